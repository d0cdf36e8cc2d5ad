"""Installed as any Python CLI: `uv tool install` from a copy of the clone and `pipx install` from a built
wheel each put `vibe` on PATH in a tool folder of their own (temp folders here), and it works from any
folder: `-v`, `--version`, `-h`, a command that reads the record, and pip beside it for the embedded
model's first-use fetch. llama.cpp's bindings come from Avibe's wheel cache (scripts/llama_wheel.sh, as
scripts/install.sh does): a person's second install must not compile them again, and neither must CI.
Everything else comes from PyPI through uv's and pip's caches, as for a person."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{args[:3]} failed ({done.returncode}):\n{said}"
    return done.stdout + done.stderr


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """A person's shell: not this test run's source path or virtualenv, a home of its own for Avibe."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["AVIBE_HOME"] = str(tmp_path / "avibe-home")
    env["AVIBE_MODEL_CACHE"] = str(tmp_path / "models")
    env.pop("AVIBE_DATABASE_URL", None)
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a fresh clone of this tree has (tracked, and new ones git does not ignore)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    target = tmp_path_factory.mktemp("clone") / "avibe"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def llama_wheels(clone: Path) -> Path:
    script = ["bash", "scripts/llama_wheel.sh", sys.executable]
    out = subprocess.run(script, cwd=clone, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _works_anywhere(vibe: Path, tmp_path: Path, env: dict[str, str]) -> None:
    elsewhere = tmp_path / "some-other-folder"
    elsewhere.mkdir()
    expected = f"vibe (avibe) {version('avibe')}"
    assert _run([str(vibe), "-v"], elsewhere, env).strip() == expected
    assert _run([str(vibe), "--version"], elsewhere, env).strip() == expected
    helped = _run([str(vibe), "-h"], elsewhere, env)
    assert "Usage: vibe" in helped and "chat" in helped and "--version" in helped
    assert "Usage: vibe run" in _run([str(vibe), "run", "-h"], elsewhere, env)
    assert "No sessions yet." in _run([str(vibe), "sessions"], elsewhere, env)
    tool_python = vibe.resolve().parent / "python"  # the tool's own environment
    _run([str(tool_python), "-m", "pip", "--version"], elsewhere, env)  # the model's first-use fetch


def test_uv_tool_install_from_the_clone(clone: Path, llama_wheels: Path, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    env.update(UV_TOOL_DIR=str(tmp_path / "uv-tools"), UV_TOOL_BIN_DIR=str(tmp_path / "uv-bin"))
    uv = [str(BIN / "uv"), "tool", "install", "--python", sys.executable, "--find-links", str(llama_wheels)]
    _run([*uv, str(clone)], tmp_path, env)
    _works_anywhere(tmp_path / "uv-bin" / "vibe", tmp_path, env)


def test_pipx_install_from_a_built_wheel(clone: Path, llama_wheels: Path, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    dist = tmp_path / "dist"
    _run([str(BIN / "uv"), "build", "--wheel", "--out-dir", str(dist), str(clone)], tmp_path, env)
    (wheel,) = dist.glob("avibe-*.whl")
    env.update(
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "pipx-bin"),
        PIPX_MAN_DIR=str(tmp_path / "pipx-man"),
    )
    pipx = [sys.executable, "-m", "pipx", "install", "--python", sys.executable]
    _run([*pipx, "--pip-args", f"--find-links {llama_wheels}", str(wheel)], tmp_path, env)
    _works_anywhere(tmp_path / "pipx-bin" / "vibe", tmp_path, env)
