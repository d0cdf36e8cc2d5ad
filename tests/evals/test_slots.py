"""F2's work folder of a replayed checkpoint: a fixed path when alone, never shared by two workers of
the same user, whether threads of one eval or two processes (two evals, tests beside an eval)."""

from __future__ import annotations

import subprocess
import sys

from avibe.evals.slots import work_dir

_OTHER = "from avibe.evals.slots import work_dir\nwith work_dir() as d: print(d)"


def test_a_slot_is_held_across_threads_and_processes_and_freed_after() -> None:
    with work_dir() as first:
        (first / "memo.md").write_text("mine")
        with work_dir() as second:  # another worker of this process
            assert second != first
        other = subprocess.run([sys.executable, "-c", _OTHER], capture_output=True, text=True, check=True)
        assert other.stdout.strip() not in {str(first), ""}  # another process: another slot
        assert (first / "memo.md").read_text() == "mine"  # nobody removed what this worker wrote
    assert not first.exists()  # removed when the worker is done
    with work_dir() as again:
        assert not any(again.iterdir())  # a slot is empty when taken
