"""Delegated runs (the seed's scene waits on "delegated runs"): Vibey's `delegate` tool starts
the task in a new session, run by a process of its own (`vibe serve --session S --exit-when-idle`); its
final reply comes back to the delegating session as an `agent` input whose ref is the delegated session
(T1), exactly once; `vibe run` waits for it like a background job, and the scene lists it meanwhile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from avibe.ingress import deliver, record_reply
from avibe.record.entries import CallRecord, Entry, EntryQuery, Source
from avibe.sources.delegations import Delegations
from avibe.store import SqlStore, open_store
from openai_chat import ChatServer, serve_chat
from serve_support import vibe, vibe_env

AT = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _said(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def _respond(body: dict[str, Any]) -> dict[str, Any] | None:
    text = _said(body)
    if "PARENT-TASK" not in text:  # the delegated session
        return {"role": "assistant", "content": "The answer is 42."}
    if "The answer is 42." in text:
        return {"role": "assistant", "content": "The delegated run says 42. Done."}
    if '"delegate"' in text:  # its tool result is in: wait
        return {"role": "assistant", "content": "Delegated; I will report when it answers."}
    arguments = json.dumps({"task": "Compute the answer."})
    call = {"id": "call_d", "type": "function", "function": {"name": "delegate", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.responder = _respond
        yield server


def test_a_delegated_run_reports_back_as_an_agent_input_of_the_delegated_session(
    tmp_path: Path, chat: ChatServer
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = vibe(
        vibe_env(home, chat), work, "run", "--json", "PARENT-TASK: delegate the computation.", timeout=180
    )
    events = [json.loads(line) for line in done.stdout.splitlines()]
    parent = next(e["session"] for e in events if e["kind"] == "turn_started")
    assert [e["reply"] for e in events if e["kind"] == "turn_ended"][-1] == "The delegated run says 42. Done."
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        entries = store.query(EntryQuery(parent))
        reports = [e for e in entries if e.kind == "agent"]
        assert len(reports) == 1 and "The answer is 42." in reports[0].text
        child = reports[0].source.ref
        first = store.query(EntryQuery(child))[0]
        assert first.kind == "agent" and first.source.ref == parent and first.text == "Compute the answer."
        assert store.session_lease(child) is None  # the delegated run's host let it go when idle


def _post_to(store: SqlStore) -> Any:
    def post(session: str, source: Source, text: str) -> Entry:
        return deliver(store, session, source, text, at=AT)

    return post


def test_delegations_report_once_and_are_in_the_scene_until_then(sqlite_store: SqlStore) -> None:
    parent = sqlite_store.create_session().id
    started: list[str] = []

    def keyed(source: Source, text: str, key: str) -> Entry:
        return deliver(sqlite_store, parent, source, text, at=AT, key=key)

    runs = Delegations(sqlite_store, parent, keyed, post_to=_post_to(sqlite_store), start=started.append)
    child = runs.start("Summarise the log")
    assert started == [child] and runs.waiting_for() == (child,)
    assert runs.scene_lines() == ((child, "delegated run: Summarise the log", "", "", "delegated run"),)
    runs.poll()
    assert sqlite_store.query(EntryQuery(parent)) == []  # no reply yet
    record_reply(sqlite_store, child, "", at=AT, calls=())  # an empty step is no final reply
    record_reply(sqlite_store, child, "Reading it", at=AT, calls=(CallRecord("read_file", "{}"),))
    runs.poll()
    assert sqlite_store.query(EntryQuery(parent)) == []
    record_reply(sqlite_store, child, "Three errors, all in parser.py.", at=AT)
    runs.poll()
    again = Delegations(sqlite_store, parent, keyed, post_to=_post_to(sqlite_store), start=started.append)
    again.poll()  # a restarted host: the saved state says it was reported
    reports = sqlite_store.query(EntryQuery(parent))
    assert len(reports) == 1 and reports[0].kind == "agent" and reports[0].source.ref == child
    assert reports[0].text.endswith("Three errors, all in parser.py.")
    assert runs.waiting_for() == () and again.scene_lines() == ()


def test_a_report_lost_with_its_state_is_delivered_once(sqlite_store: SqlStore) -> None:
    """The host died after delivering but before saving: the next one delivers the same key - nothing new."""
    parent = sqlite_store.create_session().id

    def keyed(source: Source, text: str, key: str) -> Entry:
        return deliver(sqlite_store, parent, source, text, at=AT, key=key)

    runs = Delegations(sqlite_store, parent, keyed, post_to=_post_to(sqlite_store), start=lambda c: None)
    child = runs.start("x")
    saved = sqlite_store.load_state(parent, "delegations")
    record_reply(sqlite_store, child, "done", at=AT)
    runs.poll()
    assert saved is not None
    sqlite_store.save_state(parent, "delegations", saved)  # as if the write after the delivery was lost
    Delegations(sqlite_store, parent, keyed, post_to=_post_to(sqlite_store), start=lambda c: None).poll()
    assert len(sqlite_store.query(EntryQuery(parent))) == 1


def test_a_task_delegated_to_an_external_agent_names_it_for_every_host(sqlite_store: SqlStore) -> None:
    """`delegate` may hand the task to Claude Code, Codex or OpenCode; the child's state
    says so before the task is posted, so `vibe serve` (any host) runs that agent in it."""
    from avibe.host.sessions import assign_agent
    from avibe.record.state import AgentState

    parent = sqlite_store.create_session().id
    order: list[str] = []

    def assign(child: str, worker: str) -> None:
        order.append("assigned" if sqlite_store.get_session(child).entry_count == 0 else "too late")
        assign_agent(sqlite_store)(child, worker)

    runs = Delegations(
        sqlite_store, parent, lambda *a: None, post_to=_post_to(sqlite_store),  # type: ignore[arg-type,return-value]
        start=lambda child: order.append("started"), assign=assign,
    )  # fmt: skip
    child = runs.start("Review the diff", "claude-code")
    assert order == ["assigned", "started"]
    assert sqlite_store.load_state(child, AgentState.KEY) == {"name": "claude-code"}
    assert runs.scene_lines()[0][1] == "delegated run (claude-code): Review the diff"
    plain = runs.start("Count the files")
    assert sqlite_store.load_state(plain, AgentState.KEY) is None  # Vibey: nothing to say


def test_the_delegate_tool_offers_only_the_agents_found_and_refuses_others() -> None:
    from avibe.tools.sessions import Delegate

    asked: list[tuple[str, str]] = []

    def delegate(task: str, worker: str) -> str:
        asked.append((task, worker))
        return "s-20261202-child1"

    alone = Delegate(delegate)
    assert "agent" not in alone.spec.parameters["properties"]  # nothing else installed: no choice offered
    both = Delegate(delegate, ("vibey", "codex"))
    assert both.spec.parameters["properties"]["agent"]["enum"] == ["vibey", "codex"]
    done = both.run({"task": "Port the tests", "agent": "codex"})
    assert not done.is_error and "s-20261202-child1" in done.output
    refused = both.run({"task": "x", "agent": "claude-code"})
    assert refused.is_error and "must be one of vibey, codex" in refused.output  # the schema's enum
    assert both.run({"task": "y"}).is_error is False
    assert asked == [("Port the tests", "codex"), ("y", "vibey")]


def test_on_a_local_model_vibey_delegates_only_to_external_agents(tmp_path: Path) -> None:
    """A delegated Vibey on a local model is a second model on the same cores: the demo (1.5B, 2 cores)
    slowed from 5 s a step to 230 s while Vibey delegated its own tickets to itself."""
    from avibe.backends import BACKENDS
    from avibe.backends.install import locate
    from avibe.compose.vibey import delegate_workers
    from avibe.config import load_settings
    from avibe.tools.sessions import session_tools

    settings = load_settings({"AVIBE_HOME": str(tmp_path / "home")}, user_config=tmp_path / "none.toml")
    found = tuple(b.name for b in BACKENDS if locate(b, settings.home))  # on PATH, if anywhere
    assert delegate_workers(settings, "embedded") == found
    assert delegate_workers(settings, "embedded-1.5b") == found
    assert delegate_workers(settings, "openai/gpt-4o") == ("vibey", *found)
    names = [
        t.spec.name for t in session_tools(send=lambda to, text: None, delegate=lambda t, w: "s", workers=())
    ]
    assert names == ["send_to_session"]  # nobody to delegate to: no delegate tool
    with_codex = [
        t
        for t in session_tools(lambda to, text: None, lambda t, w: w, ("codex",))
        if t.spec.name == "delegate"
    ]
    assert "codex" in with_codex[0].run({"task": "Port the tests"}).output  # the only worker is the default
