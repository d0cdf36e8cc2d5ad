"""Support for the inspector's tests: a session that really ran (the product's `open_session`, a scripted
model, real tools, checkpoints), a record made by hand, and the inspector served by uvicorn in a thread.
(A module of its own: `from inspector_support import` is unambiguous across test folders.)"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from avibe.compose import open_session
from avibe.config import load_settings
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ModelReply, ToolCall
from avibe.web.inspector import inspector_app

# The first message keeps what a page could lose: a CR LF, a tab, markup, a leading space, a trailing one.
FIRST = " Work through tickets/ oldest first.\r\nNever touch vendor/ <b>ever</b>;\task me only when needed. "
MESSAGES = (FIRST, "Now read b.txt.", "Now c.txt and d.txt.", "And e.txt, then stop.")
FILES = {"a.txt": 180, "b.txt": 180, "c.txt": 150, "d.txt": 150, "e.txt": 180}
_IDS = itertools.count(1)


SCENE = (
    "<checkpoint>\n"
    + "\n".join(
        (
            "Current step: reading the files the user named, in workstream W1 (the ticket queue)",
            "Progress: done: a.txt; in progress: the next file; pending: the rest",
            "Waiting for: nothing: no background commands or questions open",
            'Next step: the next file, as the user asked: "Now read b.txt."',
            'Pitfalls: none so far; reading tickets/007.md failed with "no such file"',
            "Exact references: tickets/, a.txt, b.txt, c.txt, d.txt, e.txt",
        )
    )
    + "\n</checkpoint>"
)
MISSION = "- [M1] (active) Work through tickets/ oldest first, asking the user only when needed"
MISSION_2 = "- [M2] (active) Also:"  # then the words of the user's message it cites (M4 checks them)


def _checkpoint(request: ModelRequest) -> ModelReply:
    """The checkpoint turn in tools mode (F2, F3): tick every user message on the checklist and anchor
    the mission on the first checkpoint, then answer with the scene block."""
    if request.messages[-1].role == "tool":
        return reply(SCENE)
    asked = request.messages[-1].content
    calls = [
        ToolCall(
            f"tick-{next(_IDS)}", "edit_file", {"path": "memo.md", "old": line, "new": "- [x]" + line[5:]}
        )
        for line in re.findall(r"^- \[ \] #\S+", asked, flags=re.M)
    ]
    if MISSION not in asked:
        edit = {"path": "mind.md", "old": "### Mission", "new": f"### Mission\n{MISSION}"}
        calls.append(ToolCall(f"mind-{next(_IDS)}", "edit_file", edit))
    elif MISSION_2 not in asked:  # the second checkpoint adds an entry: the diff shows it, the count grows
        # M4: a new entry cites the user's message since the last checkpoint that asked for it
        cited = re.findall(r"^- \[ \] #(\d+) (.*)$", asked, flags=re.M)[-1:]
        line = MISSION_2 + "".join(f" {said.strip()} (from #{n})" for n, said in cited)
        edit = {"path": "mind.md", "old": MISSION, "new": f"{MISSION}\n{line}"}
        calls.append(ToolCall(f"mind-{next(_IDS)}", "edit_file", edit))
    return reply(tool_calls=calls) if calls else reply(SCENE)


class Turns:
    """The turn script: per user message, read its files one call at a time, then answer. The usage each
    reply reports mimics a provider's prompt cache (the previous request's prompt is cached)."""

    def __init__(self) -> None:
        self.plan: list[list[str]] = [["a.txt"], ["b.txt"], ["c.txt", "d.txt"], ["e.txt"]]
        self.turn, self.read, self.last_prompt = 0, 0, 0

    def __call__(self, request: ModelRequest) -> ModelReply:
        if "done" in request.tool_names:  # the checkpoint turn's own tools
            return _checkpoint(request)
        prompt = sum(len(m.content) for m in request.messages) // 4
        usage = {
            "prompt_tokens": prompt,
            "cached_tokens": min(self.last_prompt, prompt),
            "completion_tokens": 20,
        }
        self.last_prompt = prompt
        files = self.plan[self.turn]
        if self.read < len(files):
            self.read += 1
            call = ToolCall(f"call-{next(_IDS)}", "read_file", {"path": files[self.read - 1]})
            return reply(tool_calls=[call], **usage)
        self.turn, self.read = self.turn + 1, 0
        return reply(f"Read {', '.join(files)}.", **usage)


@dataclass
class Ran:
    session: str
    turn_requests: int  # the model requests of the turns (a checkpoint's own questions excluded)
    checkpoint_requests: int
    home: Path
    db_url: str


def run_scripted_session(root: Path, monkeypatch: Any) -> Ran:
    """A session run through the product's own `open_session` (so its event sink keeps the context log)
    on a scripted model with an 8,000-token window: several checkpoints happen."""
    home, work = root / "home", root / "work"
    home.mkdir(parents=True)
    work.mkdir()
    for name, lines in FILES.items():
        (work / name).write_text(
            "".join(f"{name} line {i:04d}: lorem ipsum dolor sit\n" for i in range(lines))
        )
    for key in ("AVIBE_DATABASE_URL", "AVIBE_MODEL", "AVIBE_MODEL_WINDOW"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AVIBE_HOME", str(home))
    monkeypatch.setenv("AVIBE_USER", "kofi")
    monkeypatch.setenv("AVIBE_SANDBOX", "workspace-write")
    settings = load_settings()
    turns = Turns()
    model = ScriptedModel.of([turns] * 400, window=8_000, max_output=1_000)
    with open_session(
        settings, model_name="openai/gpt-4o", workdir=work, session_id=None, window=8_000, max_steps=30,
        approver=None, model=model,
    ) as live:  # fmt: skip
        for text in MESSAGES:
            live.send(text)
        session = live.vibey.session_id
    structured = sum(1 for r in model.requests if "done" in r.tool_names)
    return Ran(session, len(model.requests) - structured, structured, home, settings.database_url)


@contextmanager
def serving(store: Any, **options: Any) -> Iterator[str]:
    """The inspector on a free loopback port in a thread; yields its base URL."""
    config = uvicorn.Config(
        inspector_app(store, **options), host="127.0.0.1", port=0, log_level="warning", lifespan="off",
        timeout_graceful_shutdown=1,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the inspector did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# What a tool printed in `record_with_activity`: markup a page would run, terminal escapes, enough lines to
# fold. Everything here is the agent's: the pages must show it as text.
PRINTED = (
    "<script>window.pwned=1</script>\n<img src=x onerror=window.pwned=2>\n\x1b[31mred\x1b[0m\n"
    + "".join(f"row {i}\n" for i in range(9))
)


def record_with_activity(store: Any) -> str:
    """A session titled with /rename: the person's message, a reply calling two tools - one printing
    PRINTED, one failing - then a failed checkpoint, a turn the model failed, and a callback input; each
    kept by the product's activity log (what a host's sink keeps)."""
    from datetime import UTC, datetime, timedelta

    from avibe.host.activity_log import ActivityLog
    from avibe.host.events import CheckpointFailed, Stopped, ToolFinished
    from avibe.ingress import deliver, record_reply
    from avibe.record.entries import CallRecord, Source
    from avibe.record.state import TitleState

    t0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    session: str = store.create_session("/home/kofi/work").id
    store.save_state(session, TitleState.KEY, TitleState("Nightly <b>build</b> triage").to_dict())
    log = ActivityLog(store, session, lambda event: None)
    deliver(store, session, Source("user", "kofi"), "What does build.sh print?", at=t0)
    calls = (CallRecord("shell", '{"command":"sh build.sh"}'), CallRecord("read_file", '{"path":"nope"}'))
    record_reply(store, session, "", at=t0 + timedelta(seconds=1), calls=calls)
    log(ToolFinished("c1", "shell", False, len(PRINTED), 0.5, output=PRINTED))
    log(ToolFinished("c2", "read_file", True, 22, 0.0, output="nope: no such file <x>"))
    log(CheckpointFailed("the scene block was missing <checkpoint>"))
    log(Stopped("the model failed: 502 <html>Bad Gateway</html>"))
    deliver(store, session, Source("callback", "ci", "cb-1"), "build finished", at=t0 + timedelta(seconds=2))
    return session
