"""Issue 28: the eval's `avibe-checkpoint` strategy and Vibey hand on the same carry for the same
transcript - skills (A1), the file list (A2), the current request (F5) and the plan - because both run
the same bookkeeping (`avibe.agent.live`) and room ops. Vibey runs the transcript live (a scripted model
replays its assistant steps; the tools report what the transcript's outputs say), the eval replays it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from eval_scripts import checkpoint_answer

from avibe.agent.loop import RunConfig, Vibey
from avibe.evals.checkpoint import NAME, replayed_result
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.scenario import AssistantTurn, Event, Scenario, ToolUse, UserMessage
from avibe.evals.strategies import make_strategy
from avibe.evals.strategy import Compacted, CompactState
from avibe.host.session import SessionHost
from avibe.ports import ModelClient, TokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel
from avibe.record.checkpoint import Carry
from avibe.record.messages import ModelFacts, ModelReply, ToolCall, ToolSpec
from avibe.store import open_store

WINDOW = 4_000
PLAN = "[x] ticket 001\n[>] ticket 002\n[ ] ticket 003"
BIG = "\n".join(f"b.txt line {i:04d}: lorem ipsum dolor sit amet" for i in range(140))  # crosses the trigger


def _use(id_: str, tool: str, output: str, error: bool = False, **arguments: str) -> ToolUse:
    return ToolUse(id_, tool, dict(arguments), output, error)


EVENTS: tuple[Event, ...] = (
    UserMessage("kofi", "Load the release-notes skill, plan tickets 001-003, then fix app.py."),
    AssistantTurn(
        "",
        (
            _use(
                "c1",
                "skill_load",
                "# release-notes\nRN-MARKER: write notes newest first.",
                name="release-notes",
            ),
            _use("c2", "update_plan", "Plan updated (1 of 3 done)", plan=PLAN),
            _use("c3", "read_file", "value = 0", path="app.py"),
            _use("c4", "edit_file", "edited app.py", path="app.py"),
            _use("c5", "shell", "FAILED test_app.py::test_value", error=True, command="pytest -q"),
        ),
    ),
    AssistantTurn("Fixed app.py; the test still fails."),
    UserMessage("kofi", "Now read b.txt and tell me what it holds."),
    AssistantTurn("", (_use("c6", "read_file", BIG, path="b.txt"),)),
    AssistantTurn("b.txt holds numbered lorem lines."),
)
SCENARIO = Scenario("parity", "custom", None, "kofi", EVENTS, start=datetime(2026, 12, 1, tzinfo=UTC))
SPECS = [
    ToolSpec(n, n, {"type": "object"})
    for n in ("skill_load", "update_plan", "read_file", "edit_file", "shell")
]


def _vibey_carry(tmp_path: Path, counter: TokenCounter) -> Carry:
    """Vibey lives the transcript: the person's messages through the host, the assistant's steps from the
    script, each tool's result what Avibe's tool reports for the transcript's output."""
    turns = [e for e in EVENTS if isinstance(e, AssistantTurn)]
    outputs = {u.id: ("ERROR: " if u.is_error else "") + u.output for t in turns for u in t.tool_uses}

    def step(request: ModelRequest) -> ModelReply:
        if request.json_schema is not None:
            return checkpoint_answer(request)
        turn = turns.pop(0)
        calls = tuple(ToolCall(u.id, u.name, u.arguments) for u in turn.tool_uses)
        return ModelReply(turn.text, calls)

    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="parity").id
    model = ScriptedModel.of([step] * 40, window=WINDOW, max_output=1_024)
    vibey = Vibey(
        store=store, model=model, counter=counter, clock=_Clock(), session_id=session,
        session_dir=tmp_path / "s", tool_specs=SPECS,
        run_tool=lambda call: replayed_result(call, outputs[call.id]),
        config=RunConfig(checkpoint_mode="structured", identity="You are Vibey.", rules="", user_name="kofi"),
    )  # fmt: skip
    host = SessionHost(store, session, vibey, vibey.clock)
    for event in EVENTS:
        if isinstance(event, UserMessage):
            assert not host.send(event.text, "kofi").stopped
    [stored] = store.list_checkpoints(session)
    return stored.carry


class _Kept:
    """The eval's strategy, keeping what each compaction hands to the next."""

    name = NAME

    def __init__(self) -> None:
        self.inner, self.carries = make_strategy(NAME, checkpoint_mode="structured"), list[str]()

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        done = self.inner.compact(state, model, counter, window)
        self.carries.append(done.carry)
        return done


def _eval_carry(counter: TokenCounter) -> Carry:
    facts = ModelFacts("scripted", WINDOW, 1_024)
    model, strategy = ScriptedModel([checkpoint_answer] * 40, facts), _Kept()
    result = replay(SCENARIO, strategy, model, counter, WINDOW, threshold=trigger_fraction(facts, WINDOW))
    compaction = result.compactions[0]  # after b.txt's output, where Vibey checkpoints too
    assert compaction.changed and compaction.meta["carry_skills"] == 1 and compaction.meta["carry_plan"] == 3
    recollection = next(m.content for m in result.context if m.kind == "checkpoint")  # A1, A2, the plan
    assert "RN-MARKER" in recollection and "app.py" in recollection and "ticket 002" in recollection
    return Carry.from_dict(json.loads(strategy.carries[0])["checkpoint"]["carry"])


class _Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 12, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at


def test_the_eval_and_vibey_hand_on_the_same_carry(tmp_path: Path, counter: TokenCounter) -> None:
    live = _vibey_carry(tmp_path, counter)
    assert [s.name for s in live.skills] == ["release-notes"] and live.plan and "app.py" in live.files
    assert live.current_request_seqs == (4,)  # F5: the person's second message, its turn still running
    replayed = _eval_carry(counter)
    assert json.dumps(replayed.to_dict(), sort_keys=True) == json.dumps(live.to_dict(), sort_keys=True)
