"""`--approval ask|auto` and `--sandbox MODE` on `vibe`, `vibe run` and `vibe chat`: the person's choice
for this process, set as AVIBE_APPROVAL / AVIBE_SANDBOX before the settings are read (docs/configuration.md);
a bad value is one line, exit 2. End to end: the real `vibe run` on a scripted chat server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer

from avibe.cli import _opens_chat
from avibe.cli.options import check_approval, check_sandbox


def test_the_flags_are_the_persons_settings_for_this_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AVIBE_APPROVAL", "AVIBE_SANDBOX"):  # set first, so the teardown puts back what was there
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    assert check_approval("ASK") == "ask" and os.environ["AVIBE_APPROVAL"] == "ask"
    assert check_sandbox("read-only") == "read-only" and os.environ["AVIBE_SANDBOX"] == "read-only"
    with pytest.raises(typer.BadParameter, match="not one of ask, auto"):
        check_approval("sometimes")
    with pytest.raises(typer.BadParameter, match="not one of read-only, workspace-write, full-access"):
        check_sandbox("docker")


def test_vibe_with_the_chats_options_first_is_the_chat() -> None:
    assert _opens_chat([]) and _opens_chat(["--approval", "ask"]) and _opens_chat(["--sandbox=read-only"])
    assert not _opens_chat(["-h"]) and not _opens_chat(["--version"]) and not _opens_chat(["run", "x"])


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_bad_value_is_one_line(command: str, tmp_path: Path) -> None:
    import subprocess

    from serve_support import VIBE

    env = {**os.environ, "AVIBE_HOME": str(tmp_path / "home")}
    args = [*VIBE, command, "--approval", "never"] + (["task"] if command == "run" else [])
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "'never' is not one of ask, auto" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_vibe_run_takes_the_sandbox_flag_and_says_so(tmp_path: Path) -> None:
    from openai_chat import serve_chat
    from serve_support import vibe, vibe_env

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with serve_chat() as chat:
        chat.say("Done.")
        done = vibe(vibe_env(home, chat), work, "run", "--no-wait", "--sandbox", "full-access", "Hi.")
    assert "sandbox = full-access, from AVIBE_SANDBOX" in done.stderr, done.stderr
    assert "Done." in done.stdout
