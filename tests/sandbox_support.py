"""What the sandbox tests share: skipping (failing under CI) where bubblewrap cannot run, and scratch folders
outside /tmp (a sandboxed command has a private /tmp of its own, which would hide one made there)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from avibe.tools.sandbox import bwrap_problem


def require_sandbox(mode: str = "workspace-write") -> None:
    """Skip where bubblewrap cannot run a sandbox here; fail under CI, which must run every sandbox test.
    full-access needs no sandbox: nothing to require."""
    problem = None if mode == "full-access" else bwrap_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the sandbox tests, but the sandbox cannot start: {problem}")
    pytest.skip(f"the sandbox cannot start here: {problem}")


def outside_tmp(prefix: str, fallback: Path) -> Path:
    """A new folder under /var/tmp where it is writable, else under `fallback`."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(fallback)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
