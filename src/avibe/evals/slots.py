"""The session folder a replayed checkpoint writes its two work files into (F2).

Its path appears in the checkpoint request, so it is a fixed slot, not a random name: the same run asks
the same prompt. A slot is held with an exclusive `flock` on its lock file, so two workers - threads of
one `vibe eval`, or two processes of the same user (two evals, a test run beside an eval) - never share
one and never delete each other's files; alone, a run always gets slot 0."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path


@contextmanager
def work_dir() -> Iterator[Path]:
    """The lowest free slot's folder, created empty and removed when done."""
    base = Path(tempfile.gettempdir()) / f"avibe-eval-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    for slot in count():
        lock = (base / f"slot-{slot}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # per open file: threads exclude each other too
        except BlockingIOError:
            lock.close()
            continue
        folder = base / f"slot-{slot}"
        try:
            shutil.rmtree(folder, ignore_errors=True)  # what a killed run left
            folder.mkdir()
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            lock.close()
        return
