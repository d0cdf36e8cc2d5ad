"""The inspector finds and shows what a session did, on SQLite and PostgreSQL: sessions titled as the chat
titles them (/rename, else the first message, else the folder), and under each entry the tool outputs (the
first lines, the rest in a plain <details>) and the errors that followed it, clearly marked - every byte
of it that a tool or the model wrote escaped."""

from __future__ import annotations

import html
import re

from inspector_support import PRINTED, record_with_activity
from starlette.testclient import TestClient

from avibe.ingress import deliver
from avibe.record.entries import Source
from avibe.store import SqlStore
from avibe.web.inspector import inspector_app


def _happened(page: str) -> list[str]:
    """Each tool output or error shown: from its <div> to the next one, the next entry or the list's end."""
    found = re.findall(
        r'(<div class="happened.*?)(?=<div class="happened|<article|</section>)', page, flags=re.S
    )
    return [str(part) for part in found]


def _row(listed: str, session: str) -> str:
    found = re.search(rf'<tr data-session="{session}">(.*?)</tr>', listed, flags=re.S)
    assert found is not None, session
    return found.group(1)


def test_sessions_are_titled_as_the_chat_titles_them(store: SqlStore) -> None:
    renamed = record_with_activity(store)
    asked = store.create_session("/home/kofi/other").id
    deliver(store, asked, Source("user", "kofi"), "Why is the <i>nightly</i> red?\nSecond line")
    empty = store.create_session("/home/kofi/empty").id
    client = TestClient(inspector_app(store))
    listed = client.get("/").text
    rows = {sid: _row(listed, sid) for sid in (renamed, asked, empty)}
    assert "Nightly &lt;b&gt;build&lt;/b&gt; triage" in rows[renamed]
    assert "/home/kofi/work" in rows[renamed]  # the folder it was started in, under the title
    assert "Why is the &lt;i&gt;nightly&lt;/i&gt; red? Second line" in rows[asked]  # one line
    assert "/home/kofi/empty" in rows[empty]  # no message yet: the folder
    found = client.get("/", params={"q": "nightly <b>BUILD"}).text  # the search finds a title
    assert renamed in found and asked not in found
    timeline = client.get(f"/s/{renamed}/timeline").text
    assert (
        "<h1>Timeline <small>3 entries &middot; Nightly &lt;b&gt;build&lt;/b&gt; triage</small></h1>"
        in timeline
    )


def test_tool_outputs_and_errors_follow_their_entry_escaped_and_marked(store: SqlStore) -> None:
    session = record_with_activity(store)
    page = TestClient(inspector_app(store)).get(f"/s/{session}/timeline").text
    shown = _happened(page)
    assert len(shown) == 4
    # in place: after the reply (#2), before the callback input (#3)
    assert page.index('id="e2"') < page.index(shown[0]) and page.index(shown[-1]) < page.index('id="e3"')
    output, failed, checkpoint, stopped = shown
    assert 'data-kind="tool"' in output and "failed" not in output.split(">", 1)[0]
    assert "<details>" in output and "shell · 12 lines · 0.5 s" in output
    head = re.search(r'<pre class="output head">(.*?)</pre>', output, flags=re.S)
    assert head is not None
    visible = PRINTED.replace("\x1b", "\\x1b")  # a terminal escape written out, as `vibe log` writes it
    assert html.unescape(head.group(1)).splitlines() == visible.splitlines()[:5]
    assert "7 more lines" in output
    whole = re.search(r'<details>.*?<pre class="output">(.*?)</pre>', output, flags=re.S)
    assert whole is not None and html.unescape(whole.group(1)) == visible  # expanded: all of it
    assert 'class="happened failed"' in failed and "&#10007; error" in failed
    assert "read_file failed" in failed and "nope: no such file &lt;x&gt;" in failed
    assert 'class="happened failed"' in checkpoint
    assert "a checkpoint failed: the scene block was missing &lt;checkpoint&gt;" in checkpoint
    assert 'class="happened failed"' in stopped
    assert "the turn stopped: the model failed: 502 &lt;html&gt;Bad Gateway&lt;/html&gt;" in stopped
    # nothing the tool printed is markup on the page
    assert "<script>window" not in page and "<img" not in page and "&lt;script&gt;window.pwned=1" in page
    assert "\x1b" not in page and "\\x1b[31mred\\x1b[0m" in page


def test_a_filtered_timeline_shows_what_followed_the_entries_it_shows(store: SqlStore) -> None:
    session = record_with_activity(store)
    client = TestClient(inspector_app(store))
    assert _happened(client.get(f"/s/{session}/timeline", params={"kind": "user"}).text) == []
    assert len(_happened(client.get(f"/s/{session}/timeline", params={"kind": "assistant"}).text)) == 4
    assert len(_happened(client.get(f"/s/{session}/timeline", params={"from": "2", "to": "2"}).text)) == 4
    assert _happened(client.get(f"/s/{session}/timeline", params={"after": "2"}).text) == []
