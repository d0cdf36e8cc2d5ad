"""A full disk mid-run: the streamed reply reached the screen but not the record.

Before: the reply streamed to the screen, then the record's "database or disk is full" escaped the turn as
a bare store error (and the turn's last state save raised again over it): nothing told the person that
the text on screen is not in the record. Now the turn stops with one line that says the reply above was
not saved and why; the record keeps everything up to its last write, stays intact, and the session goes
on once space is free. A real full disk: a small tmpfs in a private mount namespace (root only; CI runs
as root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


@pytest.mark.skipif(not _can_mount() and not os.environ.get("CI"), reason="needs root to mount a tmpfs")
def test_a_full_disk_mid_reply_is_said_and_loses_nothing(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    paths = [str(HERE), str(HERE.parent / "agent"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    script = 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" "$3" "$1"'
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(disk)]
    done = subprocess.run(
        [*argv, sys.executable, str(HERE / "full_disk_worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stdout.splitlines()
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["stopped"] is True and "raised" not in result
    stop = next(line for line in lines if line.startswith("[stop]"))
    assert "the reply above was not saved" in stop and "disk is full" in stop
    assert lines.index(stop) > next(i for i, line in enumerate(lines) if line.startswith("vibey> "))
    # nothing half-written: the record is intact, holds the user's message, and the session goes on
    assert result["integrity"] == "ok"
    assert result["entries"] == [
        ["user", "write me the long answer"],
        ["user", "go on"],
        ["assistant", "short answer"],
    ]
    assert result["resumed"] == "short answer"
