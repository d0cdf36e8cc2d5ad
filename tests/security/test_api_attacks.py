"""the agent can never become the user - attacks on `vibe serve` and `vibe inspect` made as a
local process would make them. Where the agent's shell shares the machine's network, a sandboxed `curl`
is such a process: it reaches loopback, but not Avibe's home (where the serve token and the local socket
live). The person's routes are on that socket only; over TCP they are 403, whatever token comes along.

Each test starts the real `vibe serve` (or `vibe inspect`) on loopback over a real SQLite record and talks
to it with httpx (and headless Chromium for the SVG), as the attacker would."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.ingress import deliver
from avibe.record.entries import EntryQuery, Source
from avibe.record.feeds import Feed
from avibe.store import open_store
from openai_chat import ChatServer, serve_chat
from serve_support import VIBE, free_port, local, start_serve, stop, vibe_env

PRIVATE = "PRIVATE-PLAN-42: the person's own words"
SECRET = "callback-secret-for-the-attack-tests"
CHROMIUM = os.environ.get("AVIBE_CHROMIUM", "/usr/bin/chromium")


@dataclass
class Served:
    base: str
    port: int
    token: str
    session: str
    home: Path
    log: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def key(self) -> str:
        """The inspector's read-only key, from the address `vibe serve` printed."""
        found = re.search(r"/inspect/\?key=(\S+)", self.log.read_text())
        assert found is not None, self.log.read_text()
        return unquote(found.group(1))

    def local(self) -> httpx.Client:
        """The person's client: through the local socket, with the token."""
        return local(self.home, self.port, timeout=30)


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


def _record(home: Path) -> str:
    """A session holding the person's words; its newest entry a queued callback (no turn is due)."""
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        session = store.create_session(title="private").id
        spec = {"secret": SECRET, "max_bytes": 65_536, "per_minute": 10_000}
        store.add_feed(Feed("cb-sec", session, "callback", "build", spec, wake=False))
        deliver(store, session, Source("user", name="kofi"), PRIVATE)
        deliver(store, session, Source("callback", "build", "cb-sec"), "queued", key="callback:cb-sec:seed")
    return session


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("attacks")
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    session = _record(home)
    port = free_port()
    env = vibe_env(home, chat) | {"AVIBE_SERVE_URL": f"http://127.0.0.1:{port}"}
    process = start_serve(env, work, port, root / "serve.log")
    try:
        token = (home / "serve-token").read_text().strip()
        yield Served(f"http://127.0.0.1:{port}", port, token, session, home, root / "serve.log")
    finally:
        stop(process)


def _callbacks(served: Served, text: str) -> int:
    with open_store(f"sqlite:///{served.home / 'avibe.db'}") as store:
        return sum(1 for e in store.query(EntryQuery(served.session)) if e.text == text)


# ---- item 5: reads need the token; the Host header is checked -------------------------------------------


def test_item5_a_local_process_without_the_token_reads_nothing(served: Served) -> None:
    """on loopback no route but signed callbacks and a bare /health is open - a sandboxed
    `curl` reads no session, no entry, no inspector page (before: all of them were open on loopback).
    The person's routes are not on TCP at all (403, the token too); the inspector wants its own key."""
    s = served.session
    guesses = ({}, {"Authorization": "Bearer guess"}, {"Cookie": f"avibe_inspect_{served.port}=guess"})
    for path in ("/sessions", f"/sessions/{s}/entries", f"/sessions/{s}/entries?after=0"):
        for headers in (*guesses, served.auth):
            answer = httpx.get(served.base + path, headers=headers, timeout=10)
            assert answer.status_code == 403, (path, headers, answer.status_code)
            said = answer.json()["error"].replace(path.split("?")[0], "")  # it names the route asked
            assert "PRIVATE-PLAN" not in said and s not in said and "local socket" in said
    for path in ("/inspect/", f"/inspect/s/{s}/timeline", f"/inspect/s/{s}/context.json",
                 "/inspect/static/inspector.js"):  # fmt: skip
        for headers in (*guesses, served.auth):  # the token is not the inspector's key
            answer = httpx.get(served.base + path, headers=headers, timeout=10)
            assert answer.status_code == 401, (path, headers, answer.status_code)
            assert "PRIVATE-PLAN" not in answer.text and s not in answer.text
    bare = httpx.get(f"{served.base}/health", headers=served.auth, timeout=10)
    assert bare.status_code == 200 and s not in bare.text  # alive, and nothing more
    with served.local() as client:
        read = client.get(f"/sessions/{s}/entries")
    assert read.status_code == 200 and PRIVATE in read.text  # the person, on the socket, reads as before


def test_item5_the_inspector_address_vibe_serve_prints_opens_in_a_browser_without_extra_steps(
    served: Served,
) -> None:
    """the printed inspector address carries its key once (never the token); the browser
    keeps it in an HttpOnly, SameSite=Strict cookie and the address it lands on has no key in it."""
    printed = re.search(r"(http://\S+/inspect/\?key=\S+)", served.log.read_text())
    assert printed is not None, served.log.read_text()
    assert served.token not in printed.group(1)
    with httpx.Client(timeout=10) as browser:
        opened = browser.get(printed.group(1), follow_redirects=True)
        assert opened.status_code == 200 and "private" in opened.text
        assert "key=" not in str(opened.url)
        cookie = opened.history[0].headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert browser.get(f"{served.base}/inspect/s/{served.session}/timeline").status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "127.0.0.1.evil.example"]
)
def test_item5_a_forged_host_header_is_refused_even_with_the_token(served: Served, host: str) -> None:
    """DNS rebinding - a page at evil.example resolving to 127.0.0.1 sends `Host:
    evil.example`; only loopback names and serve_url's host, on the right port, are answered."""
    with_key = {"Authorization": f"Bearer {served.key}"}
    headers = with_key | {"Host": host.format(port=served.port)}
    for path in ("/sessions", f"/sessions/{served.session}/entries", "/inspect/", "/health"):
        answer = httpx.get(served.base + path, headers=headers, timeout=10)
        assert answer.status_code == 421, (path, answer.status_code)
        assert "PRIVATE-PLAN" not in answer.text and "Host" in answer.text
    for good in (f"localhost:{served.port}", f"127.0.0.1:{served.port}"):
        answer = httpx.get(f"{served.base}/inspect/", headers=with_key | {"Host": good}, timeout=10)
        assert answer.status_code == 200


# ---- item 11: client input is never a 500; signed callbacks cannot be replayed --------------------------

DEEP = 100_000
MALFORMED: list[tuple[bytes, str]] = [
    (b'{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}", "text"),
    (b"[" * DEEP, "JSON"),
    (b'{"text": [[["nested"]]]}', "text"),
    (b'{"text": 5}', "text"),
    (b'{"text": {"a": 1}}', "text"),
    (b'{"text": ""}', "text"),
    (b'{"words": "x"}', "text"),
    (b"[]", "object"),
    (b'"just a string"', "object"),
    (b"null", "object"),
    (b"{", "JSON"),
    (b"\xff\xfe\x00", "JSON"),
    (b"", "JSON"),
]


@pytest.mark.parametrize(("body", "named"), MALFORMED, ids=lambda v: repr(v)[:30])
def test_item11_a_malformed_message_body_is_400_naming_what_is_wrong(
    served: Served, body: bytes, named: str
) -> None:
    """nested or wrong-typed JSON (`{"text": [[[...`) is 400 with a message naming the
    field - never a 500 (before: a deeply nested body raised RecursionError inside the server)."""
    with served.local() as client:
        url = f"/sessions/{served.session}/messages"
        answer = client.post(url, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert named in answer.json()["error"]


@pytest.mark.parametrize(
    "path",
    [
        "/sessions/{s}/entries?after=" + "9" * 30,
        "/sessions/{s}/entries?after=-1",
        "/sessions/{s}/entries?after=1e9",
        "/sessions/{s}/entries?after=" + "9" * 5000,
        "/sessions/{s}/entries?limit=" + "9" * 30,
        "/sessions/{s}/entries?limit=-3",
        "/inspect/s/{s}/timeline?after=" + "9" * 30,
        "/inspect/s/{s}/stream?after=" + "9" * 30,
        "/inspect/s/{s}/checkpoints/" + "9" * 30,
        "/inspect/s/{s}/timeline?from=" + "9" * 30,
    ],
)
def test_item11_an_out_of_range_number_in_the_address_is_4xx(served: Served, path: str) -> None:
    """`entries?after=<huge>` (and the inspector's numbers) are 400/404, never a 500
    (before: the number reached SQLite and overflowed)."""
    if path.startswith("/inspect/"):  # the inspector: over TCP, with its key
        with_key = {"Authorization": f"Bearer {served.key}"}
        answer = httpx.get(served.base + path.format(s=served.session), headers=with_key, timeout=30)
    else:  # the person's routes: on the local socket
        with served.local() as client:
            answer = client.get(path.format(s=served.session))
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["text", "x", ""]), inner),
    max_leaves=20,
)


# Text, and whole numbers around the edges of 64-bit integers (where a database's integers end).
NUMBERISH = st.one_of(
    st.text(max_size=25),
    st.integers(-(2**80), 2**80).map(str),
    st.integers(2**62, 2**80).map(str),
    st.integers(-(2**80), -(2**62)).map(str),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=JSON, raw=st.binary(max_size=64), after=NUMBERISH, key=st.text(max_size=20))
def test_item11_no_client_input_is_answered_with_a_5xx(
    served: Served, value: Any, raw: bytes, after: str, key: str
) -> None:
    """whatever a client sends - any JSON shape, any bytes, any query value, any key -
    the answer is never a 5xx."""
    # A header is bytes on the wire: any but the control characters HTTP itself forbids there.
    header = bytes(b for b in after.encode("utf-8") if b >= 0x20 and b != 0x7F).strip(b" ")
    url = f"/sessions/{served.session}/messages"
    with served.local() as person:
        answers = [
            person.post(url, content=json.dumps(value).encode(), headers={"Idempotency-Key": "fuzz"}),
            person.post(url, content=raw),
            person.get(f"/sessions/{served.session}/entries", params={"after": after, "limit": after}),
            person.post(url, content=b'{"text": "fuzz"}', headers={"Idempotency-Key": header}),
        ]
    with_key = {"Authorization": f"Bearer {served.key}"}
    with httpx.Client(base_url=served.base, headers=with_key, timeout=30) as client:
        answers += [
            client.get(f"/inspect/s/{served.session}/timeline", params={"after": after, "from": after}),
            client.post(
                f"/callbacks/{quote(key, safe='') or 'x'}", content=raw, headers={"X-Avibe-Signature": header}
            ),
            client.post(
                "/callbacks/cb-sec",
                content=raw,
                headers={"X-Avibe-Timestamp": header, "X-Avibe-Signature": header},
            ),
        ]
    assert all(a.status_code < 500 for a in answers), [(a.request.url, a.status_code) for a in answers]


def _signed(body: bytes, key: str, at: int, secret: str = SECRET) -> dict[str, str]:
    """The documented format: HMAC-SHA256 over `{timestamp}.{idempotency key}.{body}`."""
    digest = hmac.new(secret.encode(), f"{at}.{key}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {"X-Avibe-Timestamp": str(at), "X-Avibe-Signature": f"sha256={digest}"}
    return headers | ({"Idempotency-Key": key} if key else {})


def test_item11_a_replayed_signed_callback_is_recorded_once_and_an_old_one_not_at_all(
    served: Served,
) -> None:
    """the signature covers timestamp, Idempotency-Key and body. A captured signed POST
    replayed as it was is recorded once; replayed with a new (or no) key its signature fails; signed
    more than 5 minutes ago (or ahead) it is refused; a body-only signature (the old format) is refused."""
    url = f"{served.base}/callbacks/cb-sec"
    body = b'{"build": 881, "status": "green"}'
    signed = _signed(body, "build-881", int(time.time()))
    first = httpx.post(url, content=body, headers=signed, timeout=10)
    assert first.status_code == 202 and first.json()["duplicate"] is False, first.text
    replayed = httpx.post(url, content=body, headers=signed, timeout=10)
    assert replayed.status_code == 202 and replayed.json()["duplicate"] is True
    rekeyed = httpx.post(url, content=body, headers=signed | {"Idempotency-Key": "build-882"}, timeout=10)
    unkeyed = {k: v for k, v in signed.items() if k != "Idempotency-Key"}
    assert rekeyed.status_code == 401 and httpx.post(url, content=body, headers=unkeyed).status_code == 401
    assert _callbacks(served, body.decode()) == 1

    stale = b'{"build": 700, "status": "green"}'
    # 30 s past the window either way: a signature 301 s ahead reached a loaded host 1 s later, inside it
    for at in (int(time.time()) - 330, int(time.time()) + 330):
        old = httpx.post(url, content=stale, headers=_signed(stale, "build-700", at), timeout=10)
        assert old.status_code == 401 and "timestamp" in old.json()["error"].lower()
    body_only = hmac.new(SECRET.encode(), stale, hashlib.sha256).hexdigest()
    legacy = httpx.post(url, content=stale, headers={"X-Avibe-Signature": f"sha256={body_only}"})
    assert legacy.status_code == 401
    assert _callbacks(served, stale.decode()) == 0

    once = b"signed, no key"
    unkeyed_signed = _signed(once, "", int(time.time()))
    codes = [httpx.post(url, content=once, headers=unkeyed_signed).status_code for _ in range(2)]
    assert codes == [202, 202] and _callbacks(served, once.decode()) == 1  # the signature is its key


# ---- item 12: an eval folder's SVG cannot run script in the inspector's origin -------------------------

EVIL_SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">
<rect width="40" height="40" fill="red"/>
<script>document.documentElement.setAttribute("data-ran", "yes");</script>
</svg>"""


@pytest.fixture
def inspecting(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`vibe inspect --eval DIR` on a free loopback port; yields the printed address and the folder."""
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "report.md").write_text("# Report\n\n![plot](plot.svg)\n")
    (folder / "plot.svg").write_text(EVIL_SVG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")}
    env |= {"AVIBE_HOME": str(tmp_path / "home")}
    env.pop("DISPLAY", None)
    process = subprocess.Popen(
        [*VIBE, "inspect", "--eval", str(folder), "--port", "0", "--no-browser"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        found = re.search(r"(http://\S+)", line)
        assert found is not None, line
        yield found.group(1), folder
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()


def test_item12_an_svg_of_an_eval_folder_is_served_with_a_csp_that_forbids_script(
    inspecting: tuple[str, Path],
) -> None:
    """the SVG is served with `default-src 'none'; ... sandbox`; every page with a
    strict CSP, nosniff and no framing (before: no CSP at all, same origin as the inspector)."""
    url, _ = inspecting
    with httpx.Client(timeout=10) as client:
        page = client.get(url, follow_redirects=True)
        assert page.status_code == 200
        origin = url.split("/eval")[0]
        svg = client.get(f"{origin}/eval/files/plot.svg")
    assert svg.status_code == 200
    policy = svg.headers.get("content-security-policy", "")
    assert "default-src 'none'" in policy and "sandbox" in policy and "script" not in policy
    assert svg.headers.get("x-content-type-options") == "nosniff"
    page_policy = page.headers.get("content-security-policy", "")
    assert "default-src 'none'" in page_policy and "script-src 'self'" in page_policy
    assert (
        "frame-ancestors 'none'" in page_policy and "unsafe-inline" not in page_policy.split("style-src")[0]
    )


def test_item12_a_script_in_the_svg_does_not_run_in_headless_chromium(inspecting: tuple[str, Path]) -> None:
    """opened in a real browser, the SVG's script does not run."""
    executable = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if executable is None:
        pytest.skip("no Chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    url, _ = inspecting
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            page = browser.new_context().new_page()
            page.goto(url)  # the printed address: its token becomes the cookie
            page.goto(url.split("/eval")[0] + "/eval/files/plot.svg")
            page.wait_for_timeout(300)
            assert page.evaluate("document.documentElement.getAttribute('data-ran')") is None
        finally:
            browser.close()


# ---- item 13: a port in use is one line, and nothing is written -----------------------------------------


def test_item13_vibe_serve_on_a_port_in_use_exits_with_one_line_and_leaves_nothing_behind(
    tmp_path: Path, chat: ChatServer
) -> None:
    """the port is bound before serve-token is written or any lease taken: one line
    naming the port, a non-zero exit, no token file, no lease (before: exit 3 with uvicorn's line, after
    writing serve-token and with the fleet already started)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        session = store.create_session().id
        deliver(store, session, Source("user", name="kofi"), "a turn is due")  # the fleet would host it
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = vibe_env(home, chat) | {"AVIBE_SERVE_URL": f"http://127.0.0.1:{port}"}
        done = subprocess.run(
            [*VIBE, "serve"], env=env, cwd=work, capture_output=True, text=True, timeout=120
        )
    assert done.returncode not in (0, 3), (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vibe: port {port} on 127.0.0.1 is in use"), lines
    assert "serve_url" in lines[0]
    assert not (home / "serve-token").exists()
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        assert store.session_lease(session) is None
