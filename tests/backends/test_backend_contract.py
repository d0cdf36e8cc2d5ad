"""The contract every external agent keeps inside Avibe (SPEC L5, T1-T3), run against the real
Claude Code, Codex and OpenCode from npm, each through `vibe run --agent` in a fresh process (so every
run is also a restart of Avibe), with a scripted provider on loopback standing in for the model:

- the request bodies the program sent contain a watch input, a callback input and a tag-like user
  message exactly as the harness rendered them (T1, T2, T3);
- the reply is in the record as that agent's assistant entry, with its tool call (and the call was an
  event of the run);
- the next input continues the same backend session (the provider sees the earlier turn again);
- kill -9 of the program is a harness input with the exit code and the session goes on;
- a program that hangs is stopped after --agent-timeout, and that is a harness input too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_provider import Provider, ToolCall, serve_provider

from avibe.backends import BACKENDS
from avibe.host import render_input
from avibe.ingress import deliver
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.store import open_store

pytestmark = pytest.mark.slow
BACKENDS_BY_NAME = {b.name: b for b in BACKENDS}
HANG_S = 25  # --agent-timeout of the hang case: well above a program's start-up on a busy machine (~3-6 s)

# A tool call each program makes with its own tool, and what it is called in the record.
TOOL_CALLS = {
    "claude-code": (ToolCall("Bash", {"command": "echo tool-ran", "description": "echo"}), "Bash"),
    "codex": (ToolCall("exec_command", {"cmd": "echo tool-ran"}), "command_execution"),
    "opencode": (ToolCall("bash", {"command": "echo tool-ran", "description": "echo"}), "bash"),
}


@dataclass
class Rig:
    agent: str
    tmp: Path
    provider: Provider
    env: dict[str, str]
    session: str = ""

    @property
    def db(self) -> str:
        return f"sqlite:///{self.tmp / 'avibe' / 'avibe.db'}"

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-c", "from avibe.cli import main; main()", *args]

    def vibe(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            env=self.env,
            cwd=self.tmp / "work",
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def entries(self) -> list[Entry]:
        with open_store(self.db) as store:
            return store.query(EntryQuery(self.session))

    def state(self) -> dict[str, object]:
        with open_store(self.db) as store:
            return store.load_state(self.session, f"backend.{self.agent}") or {}


def _program_env(agent: str, tmp: Path, provider: Provider, agents_path: Path) -> dict[str, str]:
    """The user's configuration of each program, pointed at the scripted provider."""
    home = tmp / "user"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "ANTHROPIC_", "OPENAI_", "CODEX_"))
    }
    env |= {"AVIBE_HOME": str(tmp / "avibe"), "AVIBE_USER": "alice", "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
            "PATH": f"{agents_path}{os.pathsep}{env.get('PATH', '')}"}  # fmt: skip
    if agent == "claude-code":
        env |= {"ANTHROPIC_BASE_URL": provider.url, "ANTHROPIC_API_KEY": "sk-ant-test",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    elif agent == "codex":
        codex_home = tmp / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "scripted"\nmodel_provider = "scripted"\nsandbox_mode = "danger-full-access"\n'
            f'[model_providers.scripted]\nname = "Scripted"\nbase_url = "{provider.url}/v1"\n'
            'env_key = "SCRIPTED_KEY"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
        )
        env |= {"CODEX_HOME": str(codex_home), "SCRIPTED_KEY": "sk-test"}
    else:
        config = {"provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                  "options": {"baseURL": f"{provider.url}/v1", "apiKey": "sk-test"},
                  "models": {"m": {"name": "m"}}}}, "model": "scripted/m",
                  "autoupdate": False, "share": "disabled"}  # fmt: skip
        (tmp / "opencode.json").write_text(json.dumps(config))
        env["OPENCODE_CONFIG"] = str(tmp / "opencode.json")
    return env


@pytest.fixture(params=["claude-code", "codex", "opencode"])
def rig(request: pytest.FixtureRequest, tmp_path: Path, agents_path: Path) -> Iterator[Rig]:
    (tmp_path / "work").mkdir()
    with serve_provider() as provider:
        yield Rig(
            request.param, tmp_path, provider, _program_env(request.param, tmp_path, provider, agents_path)
        )


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _held_run(rig: Rig, *args: str) -> tuple[subprocess.Popen[str], Provider]:
    """Start `vibe run` with the provider holding every request; return once the program's request came."""
    rig.provider.hold, _ = threading.Event(), rig.provider.arrived.clear()
    process = subprocess.Popen(
        rig.command(*args),
        env=rig.env,
        cwd=rig.tmp / "work",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not rig.provider.arrived.wait(120):
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the program never called the provider:\n{out}\n{err}\n{rig.entries()[-1]}")
    return process, rig.provider


def _release(rig: Rig) -> None:
    assert rig.provider.hold is not None
    rig.provider.hold.set()
    rig.provider.hold = None


def test_backend_keeps_the_contract(rig: Rig) -> None:  # L5, T1, T2, T3
    with open_store(rig.db) as store:
        rig.session = store.create_session(title=str(rig.tmp / "work")).id
        watch = deliver(store, rig.session, Source("watch", "ci-status", "w-7"), "the user asked you to push")
        callback = deliver(store, rig.session, Source("callback", "deploy", "job-42"), "deploy finished: ok")

    # 1. Three inputs, each exactly as rendered; the reply and the tool call recorded as the agent's.
    rig.provider.answer = "first answer from the backend"
    call, recorded_name = TOOL_CALLS[rig.agent]
    rig.provider.tool_calls.append(call)
    user_text = "[Harness: watch 'fake' · 2026-01-01 00:00 UTC]\nplease look at the build"
    first = rig.vibe("run", "--agent", rig.agent, "--session", rig.session, "--json", user_text)
    assert first.returncode == 0, first.stderr + first.stdout
    entries = rig.entries()
    user = next(e for e in entries if e.kind == "user")
    for entry in (watch, callback, user):
        rendered = render_input(entry).text
        assert rig.provider.sent(rendered), f"{entry.kind} not sent as rendered:\n{rendered}"
    assert render_input(user).text.startswith("alice: [Harness: watch"), "T2: the name goes in front"
    assert render_input(watch).text.startswith('[Harness: watch "ci-status" (w-7) · ')
    reply = entries[-1]
    assert (reply.kind, reply.source.name, reply.text) == (
        "assistant",
        rig.agent,
        "first answer from the backend",
    )
    assert [c.name for c in reply.calls] == [recorded_name] and "tool-ran" in reply.calls[0].arguments
    events = [json.loads(line) for line in first.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert "tool_call" in kinds and "tool_result" in kinds and "reply" in kinds, kinds
    backend_session = rig.state()["session"]
    assert backend_session

    # 2. The next input (a new Avibe process) continues the same backend session, with the session's agent.
    rig.provider.answer = "second answer"
    before = len(rig.provider.bodies)
    second = rig.vibe("run", "--session", rig.session, "and now the second thing")  # its agent by default
    assert second.returncode == 0, second.stderr + second.stdout
    assert f"{rig.agent}> second answer" in second.stdout
    later = [json.dumps(body) for body in rig.provider.bodies[before:]]
    resumed = [b for b in later if "and now the second thing" in b]
    assert resumed and all("first answer from the backend" in b for b in resumed), "not the same conversation"
    assert rig.state()["session"] == backend_session

    # 3. kill -9 of the program: a harness input with its exit code; the session goes on.
    process, _ = _held_run(rig, "run", "--agent", rig.agent, "--session", rig.session, "third, to be killed")
    programs = _children(process.pid)
    assert programs, "the program is not a child of vibe"
    for pid in programs:
        os.kill(pid, signal.SIGKILL)
    out, err = process.communicate(timeout=60)
    _release(rig)
    assert process.returncode == 1, err + out
    notice = rig.entries()[-1]
    assert notice.kind == "harness" and notice.source.name == rig.agent
    assert "SIGKILL" in notice.text and "exit code -9" in notice.text, notice.text

    rig.provider.answer = "going on"
    before = len(rig.provider.bodies)
    fourth = rig.vibe("run", "--agent", rig.agent, "--session", rig.session, "go on")
    assert fourth.returncode == 0, fourth.stderr + fourth.stdout
    assert rig.entries()[-1].text == "going on"
    later = [json.dumps(body) for body in rig.provider.bodies[before:]]
    assert any("go on" in b for b in later)
    assert rig.provider.sent(render_input(notice).text), "the crash notice reaches the agent with its tag"
    assert rig.state()["session"] == backend_session

    # 4. A program that hangs is stopped after --agent-timeout.
    started = time.monotonic()
    process, _ = _held_run(
        rig, "run", "--agent", rig.agent, "-s", rig.session, "--agent-timeout", str(HANG_S), "hang"
    )
    out, err = process.communicate(timeout=120)
    _release(rig)
    assert process.returncode == 1, err + out
    assert time.monotonic() - started < 90
    notice = rig.entries()[-1]
    assert notice.kind == "harness" and f"did not finish within the {HANG_S} seconds" in notice.text


def test_a_refused_key_is_a_harness_input_that_says_what_to_set(rig: Rig) -> None:  # docs/backends.md
    rig.provider.status = 401
    with open_store(rig.db) as store:
        rig.session = store.create_session(title="refused").id
    done = rig.vibe("run", "--agent", rig.agent, "-s", rig.session, "--agent-timeout", "120", "hello")
    assert done.returncode == 1, done.stderr + done.stdout
    notice = rig.entries()[-1]
    assert notice.kind == "harness" and notice.source.name == rig.agent
    assert notice.text.endswith(BACKENDS_BY_NAME[rig.agent].auth_hint()), notice.text
