"""The chat's commands that act on the hosted session between turns, on its own thread
(`ChatDriver.between_turns`): `/compact [focus]` makes room now (`avibe.agent.compaction.now`), `/undo`
reverts the last turn's file changes (`avibe.tools.undo`). Each returns the one line the screen shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from avibe.host.session import STOPPED_BY_PERSON
from avibe.record.entries import Entry, Source
from avibe.tui.hosted import Live

Job = Callable[[Live], str]
NOT_VIBEY: Final = "{command} is Vibey's; {agent} keeps its own context and files"


def compact(args: tuple[str, ...]) -> Job:
    """`/compact [focus]`: the focus (the words after the command) is posted as the person's message."""
    focus = " ".join(args).strip()

    def job(live: Live) -> str:
        context = live.context
        if context is None:
            return NOT_VIBEY.format(command="/compact", agent=live.host.agent.name)

        def posted() -> Entry:  # through ingress, as the person's own words (T1)
            return live.host.post(Source("user", name=live.user_name), focus)

        return context.compact_now(live.host, posted if focus else None)

    return job


def undo(args: tuple[str, ...]) -> Job:
    """`/undo`: the last turn's file changes reverted; the agent is told in a harness note it reads with
    the next message (taken in now, so it starts no turn)."""

    def job(live: Live) -> str:
        context = live.context
        if context is None:
            return NOT_VIBEY.format(command="/undo", agent=live.host.agent.name)
        if args:
            return "/undo takes no arguments; it reverts the last turn's file changes"
        if live.host.waiting_input():
            return "a message is waiting for an answer; /undo once the turn ends"
        return context.undo_last_turn(
            live.host, lambda what: live.host.post(UNDO_SOURCE, UNDO_NOTE.format(what=what))
        )

    return job


# The chat's own note (the screen said it in one line), with a ref of its own: it is no stop of a turn.
UNDO_SOURCE: Final = replace(STOPPED_BY_PERSON, ref="undo")
UNDO_NOTE: Final = (
    "The user ran /undo: {what}. Those files are as they were before that turn; read a file again "
    "before changing it."
)
JOBS: Final[dict[str, Callable[[tuple[str, ...]], Job]]] = {"compact": compact, "undo": undo}
