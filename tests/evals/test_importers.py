"""`vibe import`: Claude Code session JSONL, Codex rollout JSONL and OpenCode sessions (an export and a
storage tree; fixtures in their documented formats)
become Avibe sessions - inputs through ingress, replies as assistant entries, tool output kept out of the
record (A3) - and replay through two strategies."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from avibe.evals.importers import (
    REPLAY_STATE_KEY,
    SessionImportError,
    detect_format,
    parse_session_file,
    record_import,
)
from avibe.evals.metrics import measure
from avibe.evals.replay import conversation_tokens, replay
from avibe.evals.scenario import AssistantTurn, UserMessage, scenario_from_dict
from avibe.evals.strategies import make_strategy
from avibe.ports import RecordStore, TokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.entries import EntryQuery
from avibe.store import SqlStore

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude_session.jsonl"
CODEX = FIXTURES / "codex_rollout.jsonl"
OPENCODE = FIXTURES / "opencode_export.json"
OPENCODE_STORED = next((FIXTURES / "opencode_storage" / "session").glob("*/ses_*.json"))
AGENTS = {CLAUDE: "claude-code", CODEX: "codex", OPENCODE: "opencode", OPENCODE_STORED: "opencode"}


def _users(path: Path) -> list[str]:
    return [e.text for e in parse_session_file(path, "kofi").scenario.events if isinstance(e, UserMessage)]


def test_E1_formats_are_detected() -> None:
    assert detect_format(CLAUDE) == "claude" and detect_format(CODEX) == "codex"
    assert detect_format(OPENCODE) == detect_format(OPENCODE_STORED) == "opencode"


def test_N7_opencode_synthetic_parts_reasoning_and_steps_are_not_the_users_words() -> None:
    users = _users(OPENCODE)
    assert users == [
        "Migrate the Larkspur ledger to the new schema. Never drop the audit table; "
        "spend at most $120 on CI.",
        "Create ledger_v2 first, then rerun.",
    ]
    events = parse_session_file(OPENCODE, "kofi").scenario.events
    uses = [u for e in events if isinstance(e, AssistantTurn) for u in e.tool_uses]
    assert [(u.name, u.is_error) for u in uses] == [("bash", False), ("bash", True), ("write", False)]
    assert uses[1].output == 'psql: error: relation "ledger_v2" does not exist'
    assert not any("I should look" in e.text for e in events)  # reasoning is not a reply
    assert parse_session_file(OPENCODE_STORED, "kofi").scenario.events == events  # storage == export


def test_N7_claude_code_tool_results_meta_and_sidechains_are_not_the_users_words() -> None:
    users = _users(CLAUDE)
    assert users == [
        "Fix the Larkspur ledger export. Never push to trunk-larkspur; open a pull request instead. "
        "Spend at most $300 on CI minutes.",
        "Only change files under src/larkspur/; the tests stay as they are.",
        "Yes, open it against trunk-larkspur.",
    ]
    events = parse_session_file(CLAUDE, "kofi").scenario.events
    uses = [u for e in events if isinstance(e, AssistantTurn) for u in e.tool_uses]
    assert [u.name for u in uses] == ["Read", "Edit", "Bash", "Read"]
    assert all(u.output for u in uses) and uses[2].is_error and "ledger-7731" in uses[2].output


def test_N7_codex_injected_context_and_ui_events_are_skipped() -> None:
    users = _users(CODEX)
    assert len(users) == 2 and not any("environment_context" in u for u in users)
    events = parse_session_file(CODEX, "kofi").scenario.events
    uses = [u for e in events if isinstance(e, AssistantTurn) for u in e.tool_uses]
    assert [u.name for u in uses] == ["shell", "shell", "apply_patch"]
    assert uses[0].arguments["command"][-1] == "cat scripts/reindex.sh"
    assert uses[1].output.startswith("started background job job-4be1f0")  # unwrapped from {"output": ...}
    texts = [e.text for e in events if isinstance(e, AssistantTurn)]
    assert texts.count("The script runs quillctl in the background. Starting it for shard 12.") == 1


@pytest.mark.parametrize("path", [CLAUDE, CODEX, OPENCODE_STORED])
def test_A3_import_records_inputs_and_replies_but_no_tool_output(sqlite_store: SqlStore, path: Path) -> None:
    store: RecordStore = sqlite_store
    imported = parse_session_file(path, "kofi")
    session = record_import(store, imported)
    entries = store.query(EntryQuery(session))
    assert [e.text for e in entries if e.kind == "user"] == _users(path)
    assert all(e.source.name == "kofi" for e in entries if e.kind == "user")
    replies = [e for e in entries if e.kind == "assistant"]
    assert replies and {e.source.name for e in replies} == {AGENTS[path]}
    outputs = [
        u.output for e in imported.scenario.events if isinstance(e, AssistantTurn) for u in e.tool_uses
    ]
    assert not any(out and out in e.text for e in entries for out in outputs)
    state = store.load_state(session, REPLAY_STATE_KEY)
    assert state is not None and scenario_from_dict(state) == imported.scenario


@pytest.mark.parametrize("path", [CLAUDE, CODEX, OPENCODE])
@pytest.mark.parametrize("strategy", ["truncate", "rewrite"])
def test_E1_imported_sessions_replay_through_two_strategies(
    path: Path, strategy: str, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    scenario = parse_session_file(path, "kofi").scenario
    window = int(conversation_tokens(scenario, counter) * 0.8)  # too small for the whole conversation
    model = scripted(20)
    result = replay(scenario, make_strategy(strategy), model, counter, window)
    assert result.k >= 1 and len(model.requests) == result.calls
    assert counter.count_messages(result.context) <= window
    assert measure(scenario, result.context, counter).values["context_tokens"] > 0


def test_E1_a_file_that_is_neither_format_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(
        SessionImportError, match="neither a Claude Code session, a Codex rollout nor an OpenCode"
    ):
        parse_session_file(other, "kofi")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "user"}\nnot json\n', encoding="utf-8")
    with pytest.raises(SessionImportError, match=r"broken\.jsonl:2: not a JSON line"):
        parse_session_file(broken, "kofi", "claude")
