"""Approval through the real `vibe run`: the project's `.avibe/config.toml` sets
`approval = "ask"` and `deny = ["vendor/**"]`; a model on a loopback OpenAI-compatible server asks for a
shell command and a write under vendor/. Without a terminal the command is refused (the model hears
why) and vendor/ is untouched; on a terminal (a pty) the person's "y" lets the command run."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.cli.terminal import TerminalApprover, terminal_approver
from avibe.tools.approval import ApprovalRequest, Refusal, typed_answer
from openai_chat import ChatServer, serve_chat

CONFIG = 'approval = "ask"\n[rules]\ndeny = ["vendor/**"]\nallow_commands = ["ls"]\n'


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / ".avibe").mkdir(parents=True)
    (folder / ".avibe" / "config.toml").write_text(CONFIG, encoding="utf-8")
    (folder / "vendor").mkdir()
    (folder / "vendor" / "x.py").write_text("upstream = 1\n")
    return folder


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    return env | {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
                  "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": url,
                  "AVIBE_SANDBOX": "full-access"}  # fmt: skip


COMMAND = [sys.executable, "-c", "from avibe.cli import main; main()", "run", "clean up"]


def test_without_a_terminal_ask_mode_refuses_and_deny_rules_hold(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    chat.call("shell", command="touch ran")
    chat.call("write_file", path="vendor/x.py", content="gone\n")
    chat.say("Nothing could be done without approval.")
    done = subprocess.run(COMMAND, env=_env(tmp_path, chat.url), cwd=work, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (work / "ran").exists()
    assert (work / "vendor" / "x.py").read_text() == "upstream = 1\n"
    shell_out, write_out = chat.tool_outputs()
    assert "approval mode is ask and nobody can approve here" in shell_out and "ls" in shell_out
    assert 'deny = ["vendor/**"]' in write_out
    assert "[approve]" not in done.stderr


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


def _answer_at_a_terminal(tmp_path: Path, work: Path, chat: ChatServer, typed: bytes) -> bytes:
    """`vibe run` on a pty, `typed` at its first question once asked; the question as it was shown."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(COMMAND, env=_env(tmp_path, chat.url), cwd=work, stdin=slave,
                            stdout=subprocess.DEVNULL, stderr=slave)  # fmt: skip
    os.close(slave)
    try:
        prompt = _read_until(master, b"[a]lways", 90)
        os.write(master, typed)
        assert proc.wait(60) == 0
        return prompt
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_on_a_terminal_the_person_approves_a_command(tmp_path: Path, work: Path, chat: ChatServer) -> None:
    chat.call("shell", command="touch ran")
    chat.say("Done.")
    prompt = _answer_at_a_terminal(tmp_path, work, chat, b"y\n")
    assert b"[approve] shell wants to run:" in prompt and b"touch ran" in prompt, prompt
    assert (work / "ran").exists()
    assert chat.tool_outputs()[0].startswith("exit code: 0")


def test_the_terminal_approver_reads_answers_and_shows_escapes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    request = ApprovalRequest("shell", "command", "echo hi\x1b[2K; rm -rf /")
    for typed, decision in (("maybe\nA\n", "always"), ("yes\n", "yes"), ("n\n", "no"), ("", "no")):
        monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
        assert TerminalApprover()(request) == decision
    shown = capsys.readouterr().err
    assert "\x1b" not in shown and "echo hi\\x1b[2K; rm -rf /" in shown
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert terminal_approver() is None


def test_the_terminal_approver_shows_the_writes_diff_before_asking(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Approvals in `vibe run` (docs/chat.md): the person sees what a write changes (the diff,
    terminal-safe and cut to the screen) before y / n / a, as in the chat."""
    import io

    diff = "--- a/cli.py\n+++ b/cli.py\n@@ -1 +1 @@\n-VERBOSE = 1\n+LOUD = 1\x1b[2J\n" + "+x\n" * 60
    request = ApprovalRequest("edit_file", "write", "cli.py", "edit, 1 line", diff)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert TerminalApprover()(request) == "no"
    shown = capsys.readouterr().err
    assert shown.index("  -VERBOSE = 1\n  +LOUD = 1\\x1b[2J\n") < shown.index("allow?")
    assert "\x1b" not in shown  # not a terminal here: no colour, and the model's escape is shown, not obeyed
    assert "  ... 25 more lines\n" in shown  # 65 lines, 40 shown


def test_at_a_terminal_a_no_with_a_reason_reaches_the_model_as_the_users_words(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    """`n - use pnpm`: the command does not run, and "use pnpm" is the user's message in the record -
    untagged, as the person's own words are (T1) - which the model sees after the refusal."""
    chat.call("shell", command="npm install")
    chat.say("Using pnpm, then.")
    prompt = _answer_at_a_terminal(tmp_path, work, chat, b"n - use pnpm\n")
    assert b"n - what to do instead" in prompt, prompt
    messages = chat.requests[-1]["messages"]
    refused = next(m for m in messages if m.get("role") == "tool")["content"]
    assert "did not approve" in refused and "npm install" in refused and "message #" in refused
    assert messages[-1] == {"role": "user", "content": "use pnpm"}  # after the refusal, as the user's


@pytest.mark.parametrize(
    ("typed", "answer"),
    [("n - use pnpm", Refusal("use pnpm")), ("No: run it in ./web", Refusal("run it in ./web")),
     ("n, not now", Refusal("not now")), ("no use yarn", Refusal("use yarn")), ("N", "no"),
     ("always", "always"), ("nothing", None), ("never mind", None), ("n -  ", None)],
)  # fmt: skip
def test_a_typed_answer_is_a_decision_or_a_no_with_its_reason(typed: str, answer: object) -> None:
    assert typed_answer(typed) == answer
