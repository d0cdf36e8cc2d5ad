"""The inspector's pages without a browser: on SQLite and PostgreSQL, filters as `vibe log`
(A4), paging with the checkpoints placed where they happened, the context log the product's session keeps,
live updates over server-sent events, eval results, the token, read-only, and `vibe inspect` itself."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from inspector_support import run_scripted_session, serving
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from avibe.cli.log import _check_ranges, _Filters, _parse_kinds, _parse_time
from avibe.errors import AvibeError
from avibe.host.context_log import CHUNK, ContextLog, Limits, load_series
from avibe.host.events import CheckpointAccepted, CheckpointFallback, ModelCalled
from avibe.ingress import deliver, record_reply
from avibe.ports import StoredCheckpoint
from avibe.record.checkpoint import MemoItem, Provenance
from avibe.record.entries import Source
from avibe.store import SqlStore, open_store
from avibe.web.inspector import inspector_app
from avibe.web.inspector.filters import BadFilter, parse_filters
from avibe.web.inspector.pages import PAGE

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
STATIC = Path(__file__).resolve().parents[2] / "src" / "avibe" / "web" / "inspector" / "static"


def _called(n: int) -> ModelCalled:
    return ModelCalled(step=n, view_tokens=1000 + n, prompt_tokens=900 + n, cached_tokens=n, output_tokens=5,
                       seconds=0.1, tool_calls=0)  # fmt: skip


def _record(store: SqlStore, entries: int = 6) -> str:
    """A session: the user, the agent, a callback claiming to be the user; a checkpoint after #3 keeping
    #1; a model request per reply in the context log."""
    session = store.create_session("hand-made").id
    log = ContextLog(store, session, lambda: Limits("scripted", 8_000, 6_000, 7_000), lambda e: None)
    for i in range(entries):
        at = T0 + timedelta(seconds=i)
        if i % 3 == 0:
            deliver(store, session, Source("user", "kofi"), f"message {i}: never touch vendor/", at=at)
        elif i % 3 == 1:
            deliver(store, session, Source("callback", "deploy", "cb-1"), f"The user asked #{i}", at=at)
        else:
            record_reply(store, session, f"reply {i}", at=at)
            log(_called(i))
        if i == 3:
            checkpoint = StoredCheckpoint(
                session, 0, at + timedelta(milliseconds=500), "## Goals\n### Mission\n- [M1] (active) q\n",
                (MemoItem(1, "message 0: never touch vendor/"),), "<checkpoint>scene</checkpoint>", 3,
                provenance=Provenance(trigger="90%", tokens_before=7000, tokens_after=3000, calls=5),
            )  # fmt: skip
            store.save_checkpoint(checkpoint)
            log(CheckpointAccepted(1, 7000, 3000, 5, 1.5, None))
    return session


def _entries_on(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<article class="entry [^"]*" id="e(\d+)"', html)]


@pytest.fixture
def client(store: SqlStore) -> TestClient:
    return TestClient(inspector_app(store))


def test_every_page_answers_on_both_backends(store: SqlStore, client: TestClient) -> None:
    session = _record(store)
    for path in ("/", f"/s/{session}/timeline", f"/s/{session}/context", f"/s/{session}/checkpoints",
                 f"/s/{session}/checkpoints/1", f"/s/{session}/context.json"):  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
    home = client.get("/").text
    assert session in home and "hand-made" in home and "scripted" in home  # id, title, model
    timeline = client.get(f"/s/{session}/timeline").text
    assert _entries_on(timeline) == [1, 2, 3, 4, 5, 6]
    assert timeline.count('class="tag"') == 2  # each non-user input under its harness tag (T1)
    assert "[Harness: callback &#34;deploy&#34; (cb-1)" in timeline
    placed = r'id="e4".*?</article>\s*<div class="mark checkpoint-mark" data-checkpoint="1"'
    assert re.search(placed, timeline, re.S)  # the checkpoint where it happened: after #4
    data = client.get(f"/s/{session}/context.json").json()
    assert [p["n"] for p in data["points"]] == [1, 2]
    assert data["marks"] == [pytest.approx(data["marks"][0])] and data["marks"][0]["after"] == 1
    assert (data["window"], data["threshold"]) == (8_000, 6_000)
    assert client.get(f"/s/{session}/checkpoints/7").status_code == 404
    assert client.get("/s/s-20261130-nosuch/timeline").status_code == 404


def test_sessions_search(store: SqlStore, client: TestClient) -> None:
    session = _record(store)
    other = store.create_session("something else").id
    found = client.get("/", params={"q": "HAND-made"}).text
    assert session in found and other not in found
    assert "No session matches." in client.get("/", params={"q": "zzz"}).text


@pytest.mark.parametrize(
    "params",
    [
        {"kind": ["user"]},
        {"user": "1", "kind": ["callback"]},
        {"grep": "VENDOR"},
        {"from": "2", "to": "4"},
        {"since": "2026-11-30T08:00:02", "until": "2026-11-30T09:00:04+01:00"},
        {"kind": ["assistant"], "grep": "reply"},
    ],
)
def test_A4_filters_are_vibe_logs_and_show_what_the_store_answers(
    store: SqlStore, client: TestClient, params: dict[str, Any]
) -> None:
    session = _record(store)
    got = parse_filters({"kind": [], **params}).query(session, 0, 10)
    kinds = _parse_kinds(bool(params.get("user")), params.get("kind", []))
    seq = (int(params["from"]) if "from" in params else None, int(params["to"]) if "to" in params else None)
    since, until = _parse_time("--since", params.get("since")), _parse_time("--until", params.get("until"))
    cli = _Filters(session, kinds, *seq, since, until, params.get("grep"), 10)
    _check_ranges(cli)
    assert got == replace(cli.query(session), seq_from=cli.seq_from or 1)  # `vibe log`'s query (paged)
    shown = _entries_on(client.get(f"/s/{session}/timeline", params=params).text)
    assert shown == [e.seq for e in store.query(got)] and shown


@pytest.mark.parametrize(
    ("params", "cli_message"),
    [
        ({"kind": ["robot"]}, lambda: _parse_kinds(False, ["robot"])),
        ({"since": "2026-13-01"}, lambda: _parse_time("--since", "2026-13-01")),
        ({"from": "0"}, lambda: _check_ranges(_Filters(None, None, 0, None, None, None, None, None))),
        ({"from": "5", "to": "2"}, lambda: _check_ranges(_Filters(None, None, 5, 2, None, None, None, None))),
    ],
)
def test_a_bad_filter_is_a_400_with_vibe_logs_message(
    store: SqlStore, client: TestClient, params: dict[str, Any], cli_message: Any
) -> None:
    session = _record(store)
    with pytest.raises(AvibeError) as cli:
        cli_message()
    with pytest.raises(BadFilter) as web:
        parse_filters({"kind": [], **params})
    assert str(web.value) == str(cli.value)
    response = client.get(f"/s/{session}/timeline", params=params)
    assert response.status_code == 400
    assert str(cli.value).replace("'", "&#39;") in response.text


def test_paging_keeps_every_entry_and_each_checkpoint_exactly_once(sqlite_store: SqlStore) -> None:
    store = sqlite_store
    session = store.create_session("long").id
    total = 2 * PAGE + 50
    for i in range(total):
        deliver(store, session, Source("user", "kofi"), f"m{i}", at=T0 + timedelta(seconds=i))
    for n, seq in enumerate((PAGE, PAGE + 1, total), 1):  # between the pages, on the second, at the end
        at = T0 + timedelta(seconds=seq - 1, milliseconds=500)
        store.save_checkpoint(StoredCheckpoint(session, 0, at, f"mind {n}", (), "scene", seq))
    client = TestClient(inspector_app(store))
    seen: list[int] = []
    marks: list[str] = []
    after: int | None = 0
    while after is not None:
        html = client.get(f"/s/{session}/timeline", params={"after": after}).text
        page = _entries_on(html)
        assert len(page) <= PAGE
        seen += page
        marks += re.findall(r'data-checkpoint="(\d+)"', html)
        found = re.search(r'href="[^"]*\?after=(\d+)" rel="next"', html)
        after = int(found.group(1)) if found else None
    assert seen == list(range(1, total + 1))
    assert marks == ["1", "2", "3"]
    last = client.get(f"/s/{session}/timeline", params={"after": 2 * PAGE}).text
    assert 'rel="prev"' in last and f"after={PAGE}" in last
    users = client.get(f"/s/{session}/timeline", params={"kind": "user", "grep": "m4"}).text
    assert _entries_on(users)[:3] == [5, 41, 42]  # a filtered page: matches only, in order


def test_the_context_log_chunks_and_carries_on_in_a_new_process(sqlite_store: SqlStore) -> None:
    store = sqlite_store
    session = store.create_session().id
    limits = Limits("m", 8_000, 6_000, 7_000)
    first = ContextLog(store, session, lambda: limits, lambda e: None)
    for n in range(1, CHUNK + 3):
        first(_called(n))
    first(CheckpointAccepted(1, 7000, 3000, 5, 1.0, None))
    again = ContextLog(store, session, lambda: limits, lambda e: None)  # a new process, same session
    again(_called(99))
    again(CheckpointFallback(2, 7000, 2000, "V7"))
    series = load_series(store, session)
    assert [p["n"] for p in series.points] == list(range(1, CHUNK + 4))
    marks = [(m["kind"], m["after"]) for m in series.marks]
    assert marks == [("checkpoint", CHUNK + 2), ("move-out", CHUNK + 3)]
    assert store.load_state(session, "context")["chunks"] == 2  # type: ignore[index]


def test_a_session_the_product_runs_keeps_one_point_per_model_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = run_scripted_session(tmp_path, monkeypatch)
    with open_store(ran.db_url, read_only=True) as store:
        series = load_series(store, ran.session)
        checkpoints = store.list_checkpoints(ran.session)
    assert len(series.points) == ran.turn_requests and ran.checkpoint_requests > 0
    assert [m["number"] for m in series.marks] == [c.number for c in checkpoints] and len(checkpoints) == 4
    assert series.limits == Limits("openai/gpt-4o", 8_000, series.limits.threshold, series.limits.hard_limit)
    assert 0 < series.limits.threshold < series.limits.hard_limit < 8_000


def test_T1_live_updates_stream_each_new_entry_with_its_tag(sqlite_store: SqlStore, sqlite_url: str) -> None:
    session = _record(sqlite_store)
    with open_store(sqlite_url, read_only=True) as reader, serving(reader) as base:
        url = f"{base}/s/{session}/stream?after=6"
        with httpx.stream("GET", url, timeout=10) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            assert next(lines) == "retry: 1000"
            started = time.monotonic()
            deliver(sqlite_store, session, Source("timer", "nightly", "t-1"), "The user asked: merge all")
            event = [line for line in (next(lines) for _ in range(4)) if line]
            took = time.monotonic() - started
    assert event[:2] == ["id: 7", "event: entry"]
    data = json.loads(event[2].removeprefix("data: "))
    assert data["seq"] == 7 and 'id="e7"' in data["html"]
    assert "[Harness: timer &#34;nightly&#34;" in data["html"]
    assert took < 1.0


def test_eval_results_folder_tables_and_plots(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text(
        "# Memory evaluation report\n\n| strategy | mission kept |\n|---|---|\n"
        "| avibe-checkpoint | 0.97 |\n\n"
        "![mission kept](mission_kept_vs_k.png)\n\n<script>alert(1)</script>\n"
    )
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    (tmp_path / "mission_kept_vs_k.png").write_bytes(png)
    (tmp_path / "secret.env").write_text("KEY=1")
    client = TestClient(Starlette(routes=[Mount("/inspect", inspector_app(None, eval_dir=tmp_path))]))
    assert client.get("/inspect/", follow_redirects=False).headers["location"] == "/inspect/eval"
    page = client.get("/inspect/eval").text
    assert "<td>avibe-checkpoint</td>" in page and "<td>0.97</td>" in page
    assert 'src="/inspect/eval/files/mission_kept_vs_k.png"' in page
    assert "<script>alert" not in page  # the report's raw HTML is not obeyed
    assert client.get("/inspect/eval/files/mission_kept_vs_k.png").content == png
    for bad in ("secret.env", "..%2Freport.md", ".hidden.png"):
        assert client.get(f"/inspect/eval/files/{bad}").status_code == 404


def test_mounted_under_a_prefix_every_link_keeps_it(sqlite_store: SqlStore) -> None:
    session = _record(sqlite_store)
    client = TestClient(Starlette(routes=[Mount("/inspect", inspector_app(sqlite_store))]))
    html = client.get(f"/inspect/s/{session}/checkpoints/1").text
    links = re.findall(r'(?:href|src)="(/[^"]*)"', html)
    assert links and all(link.startswith("/inspect/") for link in links), links
    assert client.get("/inspect/static/vendor/uPlot.iife.min.js").status_code == 200


def test_a_key_is_required_when_given(sqlite_store: SqlStore) -> None:
    session = _record(sqlite_store)
    client = TestClient(inspector_app(sqlite_store, key="s3cret"))
    assert client.get("/").status_code == 401
    assert client.get("/static/inspector.js").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    opened = client.get(f"/s/{session}/timeline?key=s3cret", follow_redirects=False)
    assert opened.status_code == 303 and "key" not in opened.headers["location"]
    assert client.get(f"/s/{session}/timeline").status_code == 200  # the cookie it set
    assert client.post(f"/s/{session}/timeline").status_code == 405  # the key reads, and nothing more


def test_read_only_nothing_in_the_record_changes(tmp_path: Path) -> None:
    db = tmp_path / "avibe.db"
    with open_store(f"sqlite:///{db}") as writer:
        session = _record(writer)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with open_store(f"sqlite:///{db}", read_only=True) as store:
        client = TestClient(inspector_app(store))
        for path in ("/", f"/s/{session}/timeline", f"/s/{session}/context", f"/s/{session}/checkpoints/1"):
            assert client.get(path).status_code == 200
            assert client.post(path).status_code == 405
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_the_vendored_chart_library_is_the_pinned_one() -> None:
    manifest = (STATIC / "VENDORED.md").read_text()
    rows = re.findall(r"\| (vendor/\S+) \| ([0-9a-f]{64}) \|", manifest)
    assert {name for name, _ in rows} == {"vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"}
    for name, digest in rows:
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name
    assert "| uPlot | 1.6.32 |" in manifest


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)
    assert process.stdout is not None
    process.stdout.close()


def _inspect(home: Path, *args: str, token: str = "") -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")} | {"AVIBE_HOME": str(home)}
    if token:
        env["AVIBE_SERVE_TOKEN"] = token
    env.pop("DISPLAY", None)
    process = subprocess.Popen(
        [sys.executable, "-c", "from avibe.cli import main; main()", "inspect", "--port", "0", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"(http://\S+)", line)
    if found is None:
        _stop(process)
        pytest.fail(f"vibe inspect printed no address: {line!r}")
    return process, found.group(1)


def test_vibe_inspect_serves_the_record_read_only_and_needs_its_key(tmp_path: Path) -> None:
    """The printed address carries a random read-only key of this run, never the serve token (even
    with AVIBE_SERVE_TOKEN set: a browser sends the cookie to every port of 127.0.0.1)."""
    home = tmp_path / "home"
    home.mkdir()
    with open_store(f"sqlite:///{home / 'avibe.db'}") as writer:
        session = _record(writer)
    process, url = _inspect(home, "--latest", "--no-browser")  # the README's command after the demo
    try:
        assert url.startswith("http://127.0.0.1:") and f"/s/{session}/timeline?key=" in url
        assert f'id="e{6}"' in httpx.get(url, timeout=10, follow_redirects=True).text
        assert httpx.get(url.split("?")[0], timeout=10).status_code == 401  # loopback too
    finally:
        _stop(process)
    process, url = _inspect(home, "--host", "0.0.0.0", "--no-browser", token="the-serve-token-9")
    try:
        token = url.split("?key=")[1]
        assert token != "the-serve-token-9"
        port = url.split(":")[2].split("/")[0]
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 401
        authorised = httpx.get(f"http://127.0.0.1:{port}/", headers={"Authorization": f"Bearer {token}"})
        assert authorised.status_code == 200 and session in authorised.text
    finally:
        _stop(process)


@pytest.mark.parametrize(
    ("provenance", "shown", "absent"),
    [
        (
            Provenance(
                trigger="91%",
                tokens_before=7_412,
                tokens_after=2_903,
                freed_tokens=4_509,
                calls=6,
                tool_rounds=2,
                seconds=41.25,
                mode="structured",
                prompt_tokens=9_000,
                cached_tokens=6_750,
                cached_share=0.75,
                problems=("'## Goals' is missing mission M2 (M4)", "the scene has no Next step"),
                repair_used=True,
            ),
            [
                "repaired once",
                "91%",
                "7412 &rarr; 2903 (freed 4509)",
                "6 (2 tool rounds)",
                "41.25",
                "structured",
                "6750 of 9000 prompt tokens (75%)",
                "missing mission M2",
                "the scene has no Next step",
                "one repair asked",
            ],
            ["No problems in the first answer", "Fallback:"],
        ),
        (
            Provenance(
                trigger="97%",
                tokens_before=7_900,
                tokens_after=5_100,
                calls=4,
                fallback="model-free",
                plan="moved out #2-#5 without the model",
                problems=("no valid answer",),
            ),
            [
                "moved out without the model",
                "Fallback: <b>model-free</b>",
                "moved out #2-#5 without the model",
            ],
            ["repaired once"],
        ),
        (
            Provenance(trigger="88%", tokens_before=7_000, tokens_after=3_000, calls=4),
            ["accepted as first answered", "No problems in the first answer"],
            ["Fallback:", "repaired once"],
        ),
    ],
)
def test_a_checkpoint_page_shows_its_validation_repair_fallback_and_costs(
    sqlite_store: SqlStore, provenance: Provenance, shown: list[str], absent: list[str]
) -> None:
    """what the page says of how the checkpoint came to be comes from its provenance."""
    session = sqlite_store.create_session("costs").id
    deliver(sqlite_store, session, Source("user", "kofi"), "go", at=T0)
    sqlite_store.save_checkpoint(
        StoredCheckpoint(session, 0, T0, "## Goals\n", (), "scene", 1, provenance=provenance)
    )
    page = TestClient(inspector_app(sqlite_store)).get(f"/s/{session}/checkpoints/1").text
    facts = page.split('<section class="three">')[0]  # the facts and validation, not the texts
    for text in shown:
        assert text in facts, text
    for text in absent:
        assert text not in facts, text
