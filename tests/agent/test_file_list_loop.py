"""A2 through the loop: the checkpoint's file list is newest first.

The bug: the loop keeps the files newest first, the checkpoint read them as oldest first, so after
editing m0...m13 in order the list showed m0-m9 as "newest first" and said the four newest were pushed
out. In the demo this told the model that tickets/001.md was the newest file read, and after a
checkpoint it started the queue again from ticket 001 (P2). Driven through Vibey's public surface only:
a real SQLite record, the real tools over a temp workdir, the strict scripted model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vibey_doubles import answer, tool_step, write_lines

from avibe.providers.scripted import ModelRequest, reply
from avibe.record.messages import ModelReply

EDITED = [f"m{i}.py" for i in range(14)]
READ = [f"notes{i}.txt" for i in range(30)]  # read one by one until the first checkpoint comes


class Agent:
    """The scripted agent: edits m0..m13 in order, then reads notes files one by one; answers the
    checkpoint's questions whenever they come, and ends the turn after the first checkpoint. (Adaptive,
    so the test does not depend on the exact token count at which the checkpoint fires.)"""

    def __init__(self) -> None:
        self.moves: Iterator[ModelReply] = iter(
            [
                *(tool_step("edit_file", path=name, old="value = 0", new="value = 1") for name in EDITED),
                *(tool_step("read_file", path=name) for name in READ),
            ]
        )
        self.reads = 0
        self.checkpointed = False

    def __call__(self, request: ModelRequest) -> ModelReply:
        if request.json_schema is not None:
            self.checkpointed = True
            return answer(request)
        if self.checkpointed:
            return reply("all edited")
        move = next(self.moves)
        self.reads += move.tool_calls[0].name == "read_file"
        return move


def _file_list(meta: dict[str, Any]) -> list[str]:
    return str(meta["files"]).splitlines()


def test_A2_files_edited_and_read_in_order_are_listed_newest_first(make_harness: Any) -> None:
    agent = Agent()
    h = make_harness([agent] * 80, max_steps=80)
    for name in EDITED:
        (h.workdir / name).write_text("value = 0\n")
    for name in READ:
        write_lines(h.workdir, name, 40)
    h.send("Set value = 1 in m0.py to m13.py, in that order, then read the notes files one by one.")
    assert all((h.workdir / name).read_text() == "value = 1\n" for name in EDITED)
    [stored] = h.checkpoints()
    assert agent.reads >= 6  # more files read than the list shows
    lines = _file_list(stored.meta)
    assert lines[0] == "Files modified recently (newest first):"
    assert lines[1:11] == [f"- m{i}.py" for i in range(13, 3, -1)]  # m13 newest ... m4
    assert lines[11] == "(4 older modified files pushed out of this list)"  # m0-m3, the oldest
    assert lines[12] == "Files read recently (newest first):"
    newest_reads = [f"- notes{i}.txt" for i in range(agent.reads - 1, agent.reads - 6, -1)]
    assert lines[13:18] == newest_reads
    assert lines[18] == f"({agent.reads - 5} older read files pushed out of this list)"
