"""The chat's commands that act on the hosted session between turns, on its own thread
(`ChatDriver.between_turns`): `/compact [focus]` makes room now (`avibe.agent.compaction.now`), `/undo`
reverts the last turn's file changes (`avibe.tools.undo`). Each returns the one line the screen shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from avibe.record.entries import Entry, Source
from avibe.tui.driver import Live

Job = Callable[[Live], str]
NOT_VIBEY: Final = "{command} is Vibey's; {agent} keeps its own context and files"


def compact(args: tuple[str, ...]) -> Job:
    """`/compact [focus]`: the focus (the words after the command) is posted as the person's message."""
    focus = " ".join(args).strip()

    def job(live: Live) -> str:
        vibey = live.vibey
        if vibey is None:
            return NOT_VIBEY.format(command="/compact", agent=live.host.agent.name)

        def posted() -> Entry:  # through ingress, as the person's own words (T1)
            return live.host.post(Source("user", name=live.user_name), focus)

        return vibey.compact_now(live.host, posted if focus else None).line

    return job


JOBS: Final[dict[str, Callable[[tuple[str, ...]], Job]]] = {"compact": compact}
