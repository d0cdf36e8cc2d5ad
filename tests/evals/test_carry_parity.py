"""The eval's `avibe-checkpoint` strategy and Vibey hand on the same carry for the same session - skills
(A1), the file list (A2), the current request (F5), the plan - and both name the background job the
session waits for (S3). The transcript is recorded from Avibe's REAL tools (their own wording: a skill
loaded, a plan set, a file read and edited, a failing command, a job started in the background); Vibey
then lives it with real tools again (a scripted model plays its assistant steps) while the eval lives the
recording (Vibey again, through the session host, with a replay model and the recorded outputs). Nothing
here is a function the eval shares, so a tool whose wording or report changes while the eval's reading of
it does not makes this test fail."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from eval_scripts import checkpoint_answer

from avibe.agent.loop import RunConfig, Vibey
from avibe.evals.checkpoint import NAME, ReplayCarry
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.scenario import AssistantTurn, Event, Scenario, ToolUse, UserMessage
from avibe.evals.strategies import make_strategy
from avibe.host.session import SessionHost
from avibe.ports import RecordStore, TokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel
from avibe.record.checkpoint import Carry
from avibe.record.messages import ModelFacts, ModelReply, ToolCall, ToolSpec
from avibe.sources.background import BackgroundJobs
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools, shell
from avibe.tools.sandbox import DEFAULT_MODE, SandboxPolicy

WINDOW = 4_000
PLAN = "[x] ticket 001\n[>] ticket 002\n[ ] ticket 003"
BIG = "\n".join(f"b.txt line {i:04d}: lorem ipsum dolor sit amet" for i in range(110))  # crosses the trigger
SKILL = "---\nname: release-notes\ndescription: How to write release notes.\n---\nRN-MARKER: newest first.\n"
ASKED = (
    "Load the release-notes skill, plan tickets 001-003, fix app.py, start the export in the background.",
    "Now read b.txt and tell me what it holds.",
)
CALLS: tuple[tuple[ToolCall, ...], ...] = (
    (
        ToolCall("c1", "skill_load", {"name": "release-notes"}),
        ToolCall("c2", "update_plan", {"plan": PLAN}),
        ToolCall("c3", "read_file", {"path": "app.py"}),
        ToolCall("c4", "edit_file", {"path": "app.py", "old": "value = 0", "new": "value = 1"}),
        ToolCall("c5", "shell", {"command": "echo 'FAILED test_app.py::test_value'; exit 1"}),
        ToolCall("c6", "shell", {"command": "sleep 120", "background": True}),
    ),
    (ToolCall("c7", "read_file", {"path": "b.txt"}),),
)


@dataclass
class Tools:
    box: ToolBox
    jobs: BackgroundJobs
    root: Path
    store: RecordStore
    session: str


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[Callable[[str], Tools]]:
    made: list[BackgroundJobs] = []

    def make(name: str) -> Tools:
        """Avibe's real tools over a fresh workdir and record (the skill, app.py and b.txt in place)."""
        root = tmp_path / name
        (root / "skills" / "release-notes").mkdir(parents=True)
        (root / "skills" / "release-notes" / "SKILL.md").write_text(SKILL)
        (root / "work").mkdir()
        (root / "work" / "app.py").write_text("value = 0\n")
        (root / "work" / "b.txt").write_text(BIG)
        store = open_store(f"sqlite:///{root / 'avibe.db'}")
        session = store.create_session(title=name).id
        sandbox = SandboxPolicy(DEFAULT_MODE, root / "work")
        jobs = BackgroundJobs(lambda source, text: None, store, session, sandbox, log_dir=root / "logs")  # type: ignore[arg-type,return-value]
        made.append(jobs)
        box = ToolBox(default_tools(root / "work", store=store, session_id=session,
                                    skill_dirs=[root / "skills"], jobs=jobs, sandbox=sandbox))  # fmt: skip
        return Tools(box, jobs, root, store, session)

    yield make
    for jobs in made:
        jobs.kill_all("test ended")


def _recorded(tools: Tools) -> Scenario:
    """The session as a transcript records it: each call's output as the real tool wrote it."""
    events: list[Event] = []
    for asked, calls in zip(ASKED, CALLS, strict=True):
        events.append(UserMessage("kofi", asked))
        uses = []
        for call in calls:
            result = tools.box.dispatch(call)
            uses.append(ToolUse(call.id, call.name, dict(call.arguments), result.output, result.is_error))
        events += [AssistantTurn("", tuple(uses)), AssistantTurn("Done for now.")]
    return Scenario(
        "parity", "imported", None, "kofi", tuple(events), start=datetime(2026, 12, 1, tzinfo=UTC)
    )


def _waiting(scene: str) -> str:
    return scene.split("Waiting for:", 1)[1].split("Next step:", 1)[0]


def _vibey(tools: Tools, counter: TokenCounter) -> tuple[Carry, str]:
    """Vibey lives the session: the person's messages through the host, the assistant's steps from the
    script, every call run by the real tools, the scene's jobs from the real job table."""
    turns = [step for calls in CALLS for step in (calls, ())]

    def step(request: ModelRequest) -> ModelReply:
        if request.json_schema is not None:
            return checkpoint_answer(request)
        calls = turns.pop(0)
        return ModelReply("" if calls else "Done for now.", calls)

    model = ScriptedModel.of([step] * 40, window=WINDOW, max_output=1_024)
    vibey = Vibey(
        store=tools.store, model=model, counter=counter, clock=_Clock(), session_id=tools.session,
        session_dir=tools.root / "s", tool_specs=SPECS,
        run_tool=tools.box.dispatch, waiting_for=tools.jobs.waiting,
        config=RunConfig(checkpoint_mode="structured", identity="You are Vibey.", rules="", user_name="kofi"),
    )  # fmt: skip
    host = SessionHost(tools.store, tools.session, vibey, vibey.clock)
    for asked in ASKED:
        assert not host.send(asked, "kofi").stopped
    [stored] = tools.store.list_checkpoints(tools.session)
    return stored.carry, stored.scene


# the tools as the model is offered them, by name only: the replay offers none, and Vibey's request must
# cross the trigger where the replay's does (the full specs would add ~1,200 tokens to every request)
SPECS = [
    ToolSpec(n, n, {"type": "object"})
    for n in ("skill_load", "update_plan", "read_file", "edit_file", "shell")
]


def _eval(scenario: Scenario, counter: TokenCounter) -> tuple[Carry, str]:
    """The eval lives the recording: Vibey through the host, the recorded outputs through the tools'
    report path (`avibe.evals.lived`)."""
    facts = ModelFacts("scripted", WINDOW, 1_024)
    model = ScriptedModel([checkpoint_answer] * 40, facts)
    strategy = make_strategy(NAME, checkpoint_mode="structured")
    result = replay(scenario, strategy, model, counter, WINDOW, threshold=trigger_fraction(facts, WINDOW))
    compaction = result.compactions[0]  # after b.txt's output, where Vibey checkpoints too
    assert compaction.changed and compaction.meta["carry_skills"] == 1 and compaction.meta["carry_plan"] == 3
    recollection = next(m.content for m in result.context if m.kind == "checkpoint")  # A1, A2, the plan
    assert "RN-MARKER" in recollection and "app.py" in recollection and "ticket 002" in recollection
    handed = ReplayCarry.parse(result.carry)
    checkpoint = (*handed.earlier, handed.checkpoint)[0]  # the first; the probes' turn may make another
    assert checkpoint is not None and checkpoint.provenance.trigger  # handed on whole, provenance too
    return checkpoint.carry, checkpoint.scene


class _Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 12, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at


def _compare(make: Callable[[str], Tools], counter: TokenCounter) -> None:
    """The session recorded, lived by Vibey and replayed by the eval: the same carry, the same job."""
    scenario = _recorded(make("recorded"))
    [job] = [u for e in scenario.events if isinstance(e, AssistantTurn) for u in e.tool_uses if u.id == "c6"]
    assert not job.is_error and job.output.startswith("started ")  # the shell's own wording, whatever it is
    live, live_scene = _vibey(make("live"), counter)
    assert [s.name for s in live.skills] == ["release-notes"] and live.plan and "app.py" in live.files
    assert live.current_request_seqs == (4,)  # F5: the person's second message, its turn still running
    replayed, replayed_scene = _eval(scenario, counter)
    assert json.dumps(replayed.to_dict(), sort_keys=True) == json.dumps(live.to_dict(), sort_keys=True)
    # S3: the job started in the background is waited for, in the live session and in its replay alike
    assert "bg-1" in _waiting(live_scene) and "sleep 120" in _waiting(live_scene)
    assert "bg-1" in _waiting(replayed_scene), "the replay does not wait for the job the session waits for"
    assert "sleep 120" in _waiting(replayed_scene)


def test_the_eval_and_vibey_hand_on_the_same_carry_and_wait_for_the_same_job(
    tools: Callable[[str], Tools], counter: TokenCounter
) -> None:
    _compare(tools, counter)


def test_the_parity_fails_when_the_shell_says_it_otherwise_and_the_eval_reads_the_old_words(
    tools: Callable[[str], Tools], counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The product's shell changes its wording for a background start while the eval's reading of it
    (`started_job`) stays: the live session still waits for its job, the replay no longer - and the
    comparison above says so. (So the test is no tautology: it compares with the product's own words.)"""

    def reworded(job_id: str, command: str) -> str:
        return f"started {job_id}, running in the background: {command}"

    monkeypatch.setattr(shell, "started_text", reworded)
    with pytest.raises(AssertionError, match="the replay does not wait for the job"):
        _compare(tools, counter)
