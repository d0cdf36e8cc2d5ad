"""Compaction is a port (F1): Vibey makes room through the compactor its run names, picked from one registry
that `vibe run --compaction`, the config, the chat and `vibe eval -s` share. A compactor registered there is
used without any other change; the peers' strategies run in a live session; the session's state records
which compactor its turns ran with."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from vibey_doubles import BEFORE_STEPS, tool_step, write_lines

from avibe.agent.compaction import COMPACTORS, LiveRoom, Made, compaction_names, make_compactor
from avibe.agent.compaction.handoff import HANDOFF_INTRO, Handoff
from avibe.agent.compaction.messages import EXTRA_KEY, SUMMARY_KIND
from avibe.agent.state import LiveState
from avibe.evals.strategies import make_strategy
from avibe.host.events import CheckpointStarted, Compacted
from avibe.providers.scripted import ModelRequest, reply
from avibe.record.messages import ModelReply

CALLS: list[int] = []


@dataclass(frozen=True)
class Toy:
    """A compactor no other module knows: past the trigger, keep only the newest message."""

    name: str = "toy"

    def make_room(self, state: LiveState, room: LiveRoom) -> Made:
        tokens = room.tokens(state)
        CALLS.append(tokens)
        if room.trigger(tokens).checkpoint:
            kept = [m for m in state.messages[-2:] if m.role != "tool"] or list(state.messages[-1:])
            state = replace(state, messages=tuple(kept))
        return Made(state, None)


def _files(workdir: Any) -> None:
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 60)):
        write_lines(workdir, name, lines)


def test_F1_a_compactor_registered_by_name_alone_makes_room_for_vibey(
    make_harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(COMPACTORS, "toy", Toy)
    CALLS.clear()
    steps = [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), reply("c read")]
    h = make_harness(steps, compaction="toy")
    _files(h.workdir)
    h.send("Please read the files I name, one by one.")
    h.send("Now read b.txt.")
    result = h.send("Now read c.txt.")
    assert not result.stopped and result.reply == "c read"
    h.model.assert_consumed()  # no checkpoint question was ever asked: the toy made the room
    assert CALLS and max(CALLS) > h.vibey.limits.threshold  # it was called past the trigger ...
    assert h.vibey.tokens(h.vibey.load_state()) < h.vibey.limits.threshold  # ... and made room
    assert not h.checkpoints() and not any(isinstance(e, CheckpointStarted) for e in h.events)
    assert h.vibey.load_state().extra[EXTRA_KEY] == {"name": "toy"}  # recorded with the session
    assert "toy" in compaction_names()


def _summary(request: ModelRequest) -> ModelReply:
    assert request.json_schema is None and "handing this task over" in request.messages[-1].content
    return reply("Reading the files a.txt and b.txt the user named; next: c.txt.")


def test_F1_handoff_runs_in_a_live_session_as_the_eval_runs_it(make_harness: Any) -> None:
    steps = [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), _summary, reply("c read")]
    h = make_harness(steps, compaction="handoff")
    _files(h.workdir)
    h.send("Please read the files I name, one by one.")
    h.send("Now read b.txt.")
    result = h.send("Now read c.txt.")
    assert not result.stopped and result.reply == "c read"
    h.model.assert_consumed()
    [done] = [e for e in h.events if isinstance(e, Compacted)]
    assert done.strategy == "handoff" and done.after < done.before and done.calls == 1
    state = h.vibey.load_state()
    summaries = [m for m in state.messages if m.kind == SUMMARY_KIND]
    assert len(summaries) == 1 and summaries[0].content.startswith(HANDOFF_INTRO.split("{")[0])
    assert "Now read b.txt." in [m.content for m in state.messages]  # the user's words copied (handoff)
    assert not h.checkpoints()  # no checkpoint turn: the handoff made the room
    assert state.extra[EXTRA_KEY]["name"] == "handoff" and state.extra[EXTRA_KEY]["number"] == 1
    # the last request the model answered carried the handoff's summary
    assert any(m.kind == SUMMARY_KIND for m in h.model.requests[-1].messages)


@pytest.mark.parametrize("name", [n for n in COMPACTORS if n != "checkpoint"])
def test_F1_vibe_eval_and_vibe_run_build_the_same_class(name: str) -> None:
    assert type(make_strategy(name)) is type(make_compactor(name))


def test_F1_the_eval_measures_a_compactor_registered_after_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(COMPACTORS, "handoff-too", Handoff)
    assert isinstance(make_strategy("handoff-too"), Handoff)


def test_F1_an_unknown_compaction_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="choose from checkpoint, full, truncate"):
        make_compactor("nonsense")


def test_F1_the_chat_switches_compaction_for_the_next_request(make_harness: Any) -> None:
    h = make_harness([reply("hi")])
    h.vibey.use_compaction("mask")
    assert h.vibey.compactor.name == "mask" and h.vibey.config.compaction == "mask"
    with pytest.raises(ValueError, match="unknown compaction"):
        h.vibey.use_compaction("nonsense")
    assert h.vibey.compactor.name == "mask"
    h.send("hello")
    assert h.vibey.load_state().extra[EXTRA_KEY] == {"name": "mask"}
