"""The inspector's sessions list says what each session cost, as `vibe sessions` and the chat's meter do:
the requests the host recorded (the context log: prompt, cached and output tokens per request) at
LiteLLM's prices for the model that served each; nothing for the embedded model; "-" where the model has
no known price, never a guess."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from avibe.host.context_log import ContextLog, Limits
from avibe.host.events import ModelCalled
from avibe.ingress import deliver, record_reply
from avibe.providers.prices import money, prices_for
from avibe.record.entries import Source
from avibe.store import SqlStore
from avibe.web.inspector import inspector_app

REQUESTS = ((1_200, 0, 80), (2_400, 1_000, 40))  # prompt, cached, output tokens of each request


def _session(store: SqlStore, model: str, title: str) -> str:
    """A session of two requests on `model`, recorded as a host records them."""
    session = store.create_session(title).id
    log = ContextLog(store, session, lambda: Limits(model, 128_000, 100_000, 120_000), lambda e: None)
    deliver(store, session, Source("user", "kofi"), "Read the tickets.")
    for step, (prompt, cached, output) in enumerate(REQUESTS, 1):
        log(ModelCalled(step, prompt, prompt, cached, output, 0.5, 1 if step == 1 else 0))
    record_reply(store, session, "Read them.")
    return session


def _costs(html: str) -> dict[str, str]:
    """Each listed session's cost cell."""
    rows = re.findall(r'<tr data-session="([^"]+)">(.*?)</tr>', html, flags=re.S)
    return {session: re.findall(r'<td class="num cost">([^<]*)</td>', row)[0] for session, row in rows}


def test_the_sessions_list_shows_each_sessions_cost(store: SqlStore) -> None:
    hosted = _session(store, "openai/gpt-4o", "hosted")
    embedded = _session(store, "embedded", "on this machine")
    unpriced = _session(store, "ollama/a-model-nobody-priced", "unpriced")
    quiet = store.create_session("no request yet").id
    page = TestClient(inspector_app(store)).get("/")
    assert page.status_code == 200
    prices = prices_for("openai/gpt-4o")
    assert prices is not None
    expected = sum(prices.cost(*request) for request in REQUESTS)
    assert expected > 0.001
    assert _costs(page.text) == {hosted: money(expected), embedded: "$0", unpriced: "-", quiet: "$0"}
    assert ">cost</th>" in page.text


def test_a_damaged_context_log_shows_no_cost_and_hides_no_session(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    hosted = _session(store, "openai/gpt-4o", "hosted")
    damaged = _session(store, "openai/gpt-4o", "damaged")
    store.save_state(damaged, "context", {"chunks": "many"})
    page = TestClient(inspector_app(store)).get("/")
    costs = _costs(page.text)
    assert costs[damaged] == "-" and costs[hosted].startswith("$0.0")
    assert damaged in caplog.text
