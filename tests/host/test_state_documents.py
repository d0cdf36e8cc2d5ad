"""The typed session state documents: one frozen dataclass per kind, read and written through
it; the shapes earlier versions stored read as before, and a damaged document is a StateError naming its
key and field - never a KeyError from inside a host - or, where a list of sessions is shown, a logged
fallback."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from avibe.errors import AvibeError, StateError
from avibe.host.sessions import agent_of, session_workdir
from avibe.record.state import (
    ActivityChunk,
    ActivityHeader,
    ActivityItem,
    AgentState,
    BackendState,
    ContextChunk,
    ContextHeader,
    DelegatedRun,
    DelegationsState,
    HostActivity,
    JobsState,
    LostJob,
    SessionSettings,
    TitleState,
    WorkdirState,
)
from avibe.store import SqlStore


def _round_trips() -> list[Any]:
    return [
        (WorkdirState("/work/app"), WorkdirState.from_stored),
        (AgentState("codex"), AgentState.from_stored),
        (BackendState("thread-1", 7, 5), lambda d: BackendState.from_stored(d, "codex")),
        (
            DelegationsState((DelegatedRun("s-1", "port it", 1), DelegatedRun("s-2", "x", 3, True, "codex"))),
            DelegationsState.from_stored,
        ),
        (JobsState(4, {"bg-3": LostJob("make", 12, True)}), JobsState.from_stored),
        (ContextHeader("openai/gpt-4o", 128_000, 100_000, 120_000, 2), ContextHeader.from_stored),
        (
            ContextChunk(({"n": 1, "view": 10},), ({"kind": "checkpoint", "after": 1},)),
            lambda d: ContextChunk.from_stored(d, 0),
        ),
    ]


@pytest.mark.parametrize(("document", "read"), _round_trips())
def test_every_kind_reads_back_what_it_wrote(document: Any, read: Any) -> None:
    assert read(document.to_dict()) == document


def test_an_absent_document_is_the_kinds_default() -> None:
    assert AgentState.from_stored(None).name == "vibey"
    assert WorkdirState.from_stored(None).path == ""
    assert BackendState.from_stored(None, "codex") == BackendState("", 0, 0)
    assert DelegationsState.from_stored(None).runs == ()
    assert JobsState.from_stored(None) == JobsState(1, {})
    assert ContextHeader.from_stored(None).chunks == 0


def test_the_shapes_earlier_versions_stored_read_as_before() -> None:
    """The dicts written before the documents were typed (a run without `worker`, an empty agent name)."""
    runs = DelegationsState.from_stored(
        {"runs": [{"child": "s-1", "task": "t", "from_seq": 2, "reported": False}]}
    )
    assert runs.runs == (DelegatedRun("s-1", "t", 2, False, "vibey"),) and runs.out == runs.runs
    assert AgentState.from_stored({"name": ""}).name == "vibey"  # the inspector showed vibey for it
    jobs = JobsState.from_stored(
        {"next_number": 3, "running": {"bg-2": {"command": "sleep 9", "pid": 41, "sandboxed": False}}}
    )
    assert jobs == JobsState(3, {"bg-2": LostJob("sleep 9", 41, False)})


def _stored_rows() -> list[Any]:
    """Each kind beside the exact JSON text its hand-written `to_dict` stored before the kinds shared one
    base: rows already in records must read back, and new rows must be written the same way."""
    item = ActivityItem(3, "tool", "2026-12-06T20:00:00Z", "shell", "c1", True, "out", 9, 1, 1.5, "m")
    item_row = (
        '{"after": 3, "kind": "tool", "at": "2026-12-06T20:00:00Z", "name": "shell", "call_id": "c1", '
        '"error": true, "output": "out", "chars": 9, "lines": 1, "seconds": 1.5, "message": "m"}'
    )
    return [
        (WorkdirState("/w"), '{"path": "/w"}', WorkdirState.from_stored),
        (AgentState("codex"), '{"name": "codex"}', AgentState.from_stored),
        (TitleState("Triage"), '{"title": "Triage"}', TitleState.from_stored),
        (
            SessionSettings("m", "ask", "read-only", "handoff"),
            '{"model": "m", "approval": "ask", "sandbox": "read-only", "compaction": "handoff"}',
            SessionSettings.from_stored,
        ),
        (HostActivity(True, "shell ls"), '{"turn": true, "doing": "shell ls"}', HostActivity.from_stored),
        (
            BackendState("t-1", 7, 5),
            '{"session": "t-1", "cursor": 7, "answered": 5}',
            lambda d: BackendState.from_stored(d, "codex"),
        ),
        (
            DelegationsState((DelegatedRun("s-1", "port it", 2, True, "codex"),)),
            '{"runs": [{"child": "s-1", "task": "port it", "from_seq": 2, "reported": true, '
            '"worker": "codex"}]}',
            DelegationsState.from_stored,
        ),
        (
            JobsState(4, {"bg-3": LostJob("make", None, True)}),
            '{"next_number": 4, "running": {"bg-3": {"command": "make", "pid": null, "sandboxed": true}}}',
            JobsState.from_stored,
        ),
        (
            ContextHeader("m", 8, 6, 7, 1),
            '{"model": "m", "window": 8, "threshold": 6, "hard_limit": 7, "chunks": 1}',
            ContextHeader.from_stored,
        ),
        (
            ContextChunk(({"n": 1, "view": [1, 2.5]},), ({"kind": "checkpoint"},)),
            '{"points": [{"n": 1, "view": [1, 2.5]}], "marks": [{"kind": "checkpoint"}]}',
            lambda d: ContextChunk.from_stored(d, 0),
        ),
        (ActivityHeader((0, 5)), '{"starts": [0, 5]}', ActivityHeader.from_stored),
        (ActivityChunk((item,)), f'{{"items": [{item_row}]}}', lambda d: ActivityChunk.from_stored(d, 0)),
    ]


@pytest.mark.parametrize(("document", "row", "read"), _stored_rows())
def test_every_kind_is_stored_as_it_always_was(document: Any, row: str, read: Any) -> None:
    assert json.dumps(document.to_dict()) == row
    assert read(json.loads(row)) == document


DAMAGED: list[Any] = [
    (lambda: AgentState.from_stored({"name": 3}), "'agent'", "'name'"),
    (lambda: AgentState.from_stored(["codex"]), "'agent'", "JSON object"),
    (lambda: WorkdirState.from_stored({"path": ["/a"]}), "'workdir'", "'path'"),
    (lambda: BackendState.from_stored({"cursor": "3"}, "codex"), "'backend.codex'", "'cursor'"),
    (lambda: BackendState.from_stored({"answered": True}, "codex"), "'backend.codex'", "'answered'"),
    (lambda: DelegationsState.from_stored({"runs": {"child": "s"}}), "'delegations'", "'runs'"),
    (lambda: DelegationsState.from_stored({"runs": [{"task": "t"}]}), "'delegations'", "'child'"),
    (
        lambda: DelegationsState.from_stored({"runs": [{"child": "s", "from_seq": "2"}]}),
        "'delegations'",
        "'from_seq'",
    ),
    (lambda: JobsState.from_stored({"running": []}), "'background_jobs'", "'running'"),
    (lambda: JobsState.from_stored({"running": {"bg-1": {"pid": "12"}}}), "'background_jobs'", "'pid'"),
    (lambda: ContextHeader.from_stored({"window": "8k"}), "'context'", "'window'"),
    (lambda: ContextChunk.from_stored({"points": [1, 2]}, 3), "'context/3'", "JSON object"),
]


@pytest.mark.parametrize(("read", "key", "what"), DAMAGED)
def test_a_damaged_document_is_a_state_error_naming_its_key_and_field(read: Any, key: str, what: str) -> None:
    with pytest.raises(StateError) as raised:
        read()
    assert key in str(raised.value) and what in str(raised.value)
    assert isinstance(raised.value, AvibeError)  # the CLI's one error boundary prints it as one line


def test_the_hosts_readers_say_which_document_is_damaged(sqlite_store: SqlStore, tmp_path: Path) -> None:
    session = sqlite_store.create_session(title=str(tmp_path)).id
    sqlite_store.save_state(session, "workdir", {"path": 42})
    sqlite_store.save_state(session, "agent", {"name": None})
    with pytest.raises(StateError, match="'workdir'"):
        session_workdir(sqlite_store, session, tmp_path)
    with pytest.raises(StateError, match="'agent'"):
        agent_of(sqlite_store, session)


def test_the_inspectors_list_logs_a_damaged_document_and_shows_the_rest(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    from avibe.web.inspector.pages import session_rows

    good, bad = sqlite_store.create_session().id, sqlite_store.create_session().id
    sqlite_store.save_state(good, "agent", {"name": "codex"})
    sqlite_store.save_state(bad, "context", {"model": 7})
    with caplog.at_level(logging.WARNING):
        rows = {row.info.id: (row.agent, row.model) for row in session_rows(sqlite_store)}
    assert rows == {good: ("codex", ""), bad: ("vibey", "")}
    assert f"session {bad}: session state 'context': 'model' is int" in caplog.text
