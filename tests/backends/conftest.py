"""The real Claude Code, Codex and OpenCode for the contract tests, installed once by the real
`vibe agents install` (npm, pinned by the shipped lockfile) into a cache keyed by the lockfile's hash, so a
second run (and CI with that folder cached) installs nothing. `AVIBE_TEST_AGENTS_CACHE` moves the cache.
Without npm the tests that need the programs are skipped - except under CI (env `CI` set), where they
fail: CI must prove the three backends."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import avibe.backends
from avibe.backends import BACKENDS
from avibe.backends.install import installed_bin

LOCKFILE = Path(avibe.backends.__file__).parent / "npm" / "package-lock.json"


def _cache_root() -> Path:
    default = Path.home() / ".cache" / "avibe-test-agents"
    return Path(os.environ.get("AVIBE_TEST_AGENTS_CACHE", default))


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the backend contract tests")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def agents_home() -> Path:
    """An AVIBE_HOME whose `agents` folder holds the three programs, installed by `vibe agents install`."""
    digest = hashlib.sha256(LOCKFILE.read_bytes()).hexdigest()[:16]
    home = _cache_root() / digest / "home"
    programs = [installed_bin(home) / b.program for b in BACKENDS]
    if all(p.exists() for p in programs):
        return home
    if shutil.which("npm") is None:
        _missing("npm is not installed (the backends install from npm)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")} | {"AVIBE_HOME": str(home)}
    command = [sys.executable, "-c", "from avibe.cli import main; main()", "agents", "install"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or not all(p.exists() for p in programs):
        pytest.fail(
            f"vibe agents install failed ({done.returncode}): {done.stderr[-2000:]}{done.stdout[-2000:]}"
        )
    return home


@pytest.fixture(scope="session")
def agents_path(agents_home: Path) -> Path:
    return installed_bin(agents_home)
