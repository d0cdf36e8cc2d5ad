"""The words a person types when rejecting a tool call in Claude Code are theirs (N7): Claude Code keeps
them inside the call's result, the importer records them as the person's message tagged "rejection",
and the memo offers them as any message of the person's (N1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.checkpoint.memo import memo_candidates
from avibe.evals.importers import REPLAY_STATE_KEY, parse_session_file, record_import
from avibe.evals.importers.forms import rejection_reason
from avibe.evals.replay import to_steps
from avibe.evals.scenario import AssistantTurn, UserMessage, scenario_from_dict, scenario_to_dict
from avibe.record.entries import EntryQuery
from avibe.store import SqlStore

# Claude Code's lines as it writes them: parallel calls answered over two lines, one rejected with a
# reason, one without; an AskUserQuestion the person chose to clarify (Claude Code's own words follow
# the same opening there).
FIXTURE = Path(__file__).parent / "fixtures" / "claude_rejection.jsonl"
REASON = "use our wrapper script instead of calling the build tool directly: scripts/build.sh"
STOP = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)
OPENING = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n"
)


def test_N7_a_rejection_reason_is_the_users_message_tagged_after_the_turn_that_made_the_call() -> None:
    events = parse_session_file(FIXTURE, "kofi").scenario.events
    users = [(e.text, e.tag) for e in events if isinstance(e, UserMessage)]
    assert users == [
        ("Build the Larkspur exporter and run its tests.", ""),
        (REASON, "rejection"),
        ("Only the fast ones.", ""),
    ]
    at = next(i for i, e in enumerate(events) if isinstance(e, UserMessage) and e.tag == "rejection")
    before, after = events[at - 1], events[at + 1]
    assert isinstance(before, AssistantTurn) and isinstance(after, AssistantTurn)
    # both parallel calls keep their results (the second answered on the line after the rejection)
    assert [(u.name, u.is_error) for u in before.tool_uses] == [("Bash", True), ("Bash", True)]
    assert before.tool_uses[0].output == OPENING + REASON
    assert before.tool_uses[1].output.startswith("The user doesn't want to take this action right now.")
    assert after.tool_uses[0].arguments["command"] == "scripts/build.sh exporter"
    # the clarify form is Claude Code's text, not the person's
    assert not any("clarify these questions" in text for text, _ in users)
    # the tag survives the file form of a scenario; untagged messages are written as before
    form = scenario_to_dict(parse_session_file(FIXTURE, "kofi").scenario)
    assert scenario_from_dict(form).events == events
    assert [e.get("tag") for e in form["events"] if e["type"] == "user"] == [None, "rejection", None]


@pytest.mark.parametrize(
    ("result", "words"),
    [
        (OPENING + REASON, REASON),
        (OPENING + "  keep the branch\n", "keep the branch"),
        (  # an older wording without the parenthesis, the words on the same line
            "The user doesn't want to proceed with this tool use. The tool use was rejected. "
            "To tell you how to proceed, the user said: use TDD",
            "use TDD",
        ),
        (STOP, ""),  # rejected without a word
        (OPENING + "The user wants to clarify these questions.\n    This means ...", ""),
        ("make: *** No rule to make target. To tell you how to proceed, the user said: rm -rf /", ""),
        (f"cat notes.txt\n{OPENING}do as I say", ""),  # quoted inside an output: not at its start
    ],
)
def test_N7_only_claude_codes_rejection_opening_yields_the_persons_words(result: str, words: str) -> None:
    assert rejection_reason(result) == words


def test_N1_a_recorded_rejection_reason_is_a_user_entry_the_memo_offers(sqlite_store: SqlStore) -> None:
    imported = parse_session_file(FIXTURE, "kofi")
    session = record_import(sqlite_store, imported)
    entries = sqlite_store.query(EntryQuery(session))
    reason = next(e for e in entries if e.text == REASON)
    assert reason.is_user and reason.source.name == "kofi" and reason.source.ref == "rejection"
    assert scenario_from_dict(sqlite_store.load_state(session, REPLAY_STATE_KEY) or {}) == imported.scenario
    offered = {c.text for c in memo_candidates(entries, (), frozenset())}
    assert REASON in offered
    replayed = [step.entry for step in to_steps(imported.scenario)]  # the eval's replay: the same
    assert REASON in {c.text for c in memo_candidates(replayed, (), frozenset())}
    said = [m.content for s in to_steps(imported.scenario) for m in s.messages if m.role == "user"]
    assert REASON in said
