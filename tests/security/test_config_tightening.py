"""The person's tightening cannot be taken away by the agent, and no config the agent writes breaks a start.

The project's `.avibe/config.toml` lives in the workdir, which the agent can write: before, `rm
.avibe/config.toml` (or an edit back to `approval = "auto"`) made the next run auto with no deny rules and
said nothing. Now what the file tightened is remembered in Avibe's home (hidden from every sandboxed
command) at each session start; when the file goes, breaks or loosens, the remembered settings stay and
one line says so, until the person runs `vibe config forget-tightening`. A config nested thousands deep is
one line, never a RecursionError; a pathological deny glob is matched in linear time.

Real `vibe run` in a subprocess against a loopback stand-in model, real files, the real bubblewrap
sandbox where a command runs (`sandbox_runs`: skipped where bubblewrap cannot start, failed under CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.config import SANDBOX_MODES, Settings, load_settings
from avibe.errors import ConfigError
from avibe.tightening import SANDBOX_ORDER, forget, record_file, remember
from avibe.tools.sandbox import bwrap_problem
from openai_chat import ChatServer, serve_chat

ASK = 'approval = "ask"\n[rules]\ndeny = ["vendor/**"]\n'
FORGET = "vibe config forget-tightening"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


@pytest.fixture
def sandbox_runs() -> None:
    problem = bwrap_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the sandbox tests, but the sandbox cannot start: {problem}")
        pytest.skip(problem)


def _work(tmp_path: Path, text: str | None = ASK) -> Path:
    work = tmp_path / "work"
    (work / ".avibe").mkdir(parents=True, exist_ok=True)
    (work / "vendor").mkdir(exist_ok=True)
    (work / "vendor" / "x.py").write_text("upstream = 1\n", encoding="utf-8")
    if text is not None:
        (work / ".avibe" / "config.toml").write_text(text, encoding="utf-8")
    return work


def _env(tmp_path: Path, url: str = "http://127.0.0.1:9") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_", "XDG_CONFIG"))}
    (tmp_path / "config").mkdir(exist_ok=True)
    return env | {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
                  "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": url,
                  "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip


def _vibe(
    tmp_path: Path, work: Path, url: str, *args: str, sandbox: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, url) | ({} if sandbox is None else {"AVIBE_SANDBOX": sandbox})
    return subprocess.run(
        [sys.executable, "-c", "from avibe.cli import main; main()", *args],
        env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _start(
    tmp_path: Path, work: Path, chat: ChatServer, *, attack: bool = False, sandbox: str | None = None
) -> str:
    """One `vibe run`; with `attack`, the model runs a command and writes under vendor/. Its stderr."""
    if attack:
        chat.call("shell", command="touch ran")
        chat.call("write_file", path="vendor/y.py", content="planted\n")
    chat.say("Done.")
    done = _vibe(tmp_path, work, chat.url, "run", "tidy up", sandbox=sandbox)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def _attack_held(work: Path, chat: ChatServer, refused_by: str = 'deny = ["vendor/**"]') -> None:
    assert not (work / "ran").exists()
    assert not (work / "vendor" / "y.py").exists()
    shell_out, write_out = chat.tool_outputs()
    assert "approval mode is ask and nobody can approve here" in shell_out
    assert refused_by in write_out


def _kept_line(stderr: str, work: Path, deny: str = 'deny = ["vendor/**"]') -> str:
    (line,) = [ln for ln in stderr.splitlines() if "keeping what it asked for before" in ln]
    assert line.startswith(f"vibe: the project config {work / '.avibe' / 'config.toml'} ")
    assert 'approval = "ask"' in line and deny in line and FORGET in line
    return line


# -- removed, loosened, reset, tightened: the real CLI, two starts ------------------------------------------


def test_removing_the_config_between_starts_keeps_ask_and_the_deny_rules(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    work = _work(tmp_path)
    _start(tmp_path, work, chat)
    record = record_file(tmp_path / "home", work.resolve())
    assert json.loads(record.read_text())["deny"] == ["vendor/**"]  # in Avibe's home, not the workdir
    (work / ".avibe" / "config.toml").unlink()
    stderr = _start(tmp_path, work, chat, attack=True)
    assert "is gone" in _kept_line(stderr, work)
    _attack_held(work, chat)


@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
def test_the_agent_removing_the_config_and_the_record_from_its_shell(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None, mode: str
) -> None:
    """The whole attack: the model's own command deletes the person's file and Avibe's record of it
    (approval auto, deny rules only). In workspace-write the sandbox lets it delete the file but hides
    Avibe's home, so the next run still refuses vendor/. The control: in full-access the command runs as
    the person, the record goes too, and the next run writes vendor/ - what full-access means."""
    work = _work(tmp_path, '[rules]\ndeny = ["vendor/**"]\n')
    home = tmp_path / "home"
    chat.call("shell", command=f"rm -f .avibe/config.toml; rm -rf {home / 'tightening'}")
    _start(tmp_path, work, chat, sandbox=mode)
    (work / ".avibe" / "config.toml").unlink(missing_ok=True)  # gone, whatever the sandbox allowed
    assert record_file(home, work.resolve()).exists() == (mode != "full-access")
    chat.call("write_file", path="vendor/y.py", content="planted\n")
    stderr = _start(tmp_path, work, chat, sandbox=mode)
    if mode == "full-access":
        assert (work / "vendor" / "y.py").read_text(encoding="utf-8") == "planted\n"
        return
    assert any('keeping what it asked for before: deny = ["vendor/**"]' in ln for ln in stderr.splitlines())
    assert not (work / "vendor" / "y.py").exists()
    assert 'deny = ["vendor/**"]' in chat.tool_outputs()[0]


def test_a_loosening_edit_keeps_the_remembered_settings(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    work = _work(tmp_path)
    _start(tmp_path, work, chat)
    loose = 'approval = "auto"\n[rules]\ndeny = []\nallow_commands = ["*"]\nallow_writes = ["**"]\n'
    (work / ".avibe" / "config.toml").write_text(loose, encoding="utf-8")
    stderr = _start(tmp_path, work, chat, attack=True)
    assert "no longer asks for it" in _kept_line(stderr, work)
    _attack_held(work, chat)


def test_the_reset_command_drops_the_record_and_only_then_the_attack_works(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    """The control: once the person forgets the record, a removed config leaves the run auto with no
    deny rules - what every run did before the record existed."""
    work = _work(tmp_path)
    _start(tmp_path, work, chat)
    (work / ".avibe" / "config.toml").unlink()
    done = _vibe(tmp_path, work, chat.url, "config", "forget-tightening")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        'forgot approval = "ask", deny = ["vendor/**"], allow_commands = [], allow_writes = [] '
        "(remembered since "
    )
    assert not record_file(tmp_path / "home", work.resolve()).exists()
    stderr = _start(tmp_path, work, chat, attack=True)
    assert "keeping" not in stderr
    assert (work / "ran").exists()
    assert (work / "vendor" / "y.py").read_text(encoding="utf-8") == "planted\n"
    again = _vibe(tmp_path, work, chat.url, "config", "forget-tightening")
    assert again.returncode == 0 and again.stdout.strip() == f"nothing is remembered for {work.resolve()}"


def test_a_stricter_edit_is_remembered_as_the_new_state(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    work = _work(tmp_path, '[rules]\ndeny = ["vendor/**"]\n')
    _start(tmp_path, work, chat)
    stricter = (
        'approval = "ask"\nsandbox = "read-only"\nmodel_window = 4096\n[rules]\ndeny = ["secrets/**"]\n'
    )
    (work / ".avibe" / "config.toml").write_text(stricter, encoding="utf-8")
    _start(tmp_path, work, chat)
    (work / ".avibe" / "config.toml").unlink()
    shown = _vibe(tmp_path, work, chat.url, "config", "show-tightening")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(
        f'{work.resolve()}: sandbox = "read-only", approval = "ask", model_window = 4096, '
        'deny = ["vendor/**", "secrets/**"], allow_commands = [], allow_writes = [] (remembered since '
    )
    stderr = _start(tmp_path, work, chat, attack=True)
    _attack_held(work, chat, refused_by="read-only sandbox")
    line = _kept_line(stderr, work, deny='deny = ["vendor/**", "secrets/**"]')
    assert 'sandbox = "read-only"' in line and "model_window = 4096" in line


# -- configs that broke the next start ----------------------------------------------------------------------

DEEP = "a = " + "[" * 5000 + "]" * 5000 + "\n"


def _one_line_about_depth(done: subprocess.CompletedProcess[str], config: Path) -> None:
    """Exit 2 and one line naming the file: the TOML reader's recursion (thousands deep) or the depth
    bound (deeper than any setting, yet parsed) - never a traceback."""
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"vibe: {config} ") and line.endswith("; fix or remove it")
    assert "nested too deep" in line or "nests tables or lists more than 8 deep" in line


@pytest.mark.parametrize("depth", [20, 5000])
def test_a_project_config_nested_deep_is_one_line_not_a_traceback(tmp_path: Path, depth: int) -> None:
    work = _work(tmp_path, "[rules]\ndeny = " + "[" * depth + "]" * depth + "\n")
    done = _vibe(tmp_path, work, "http://127.0.0.1:9", "run", "hi")
    _one_line_about_depth(done, work / ".avibe" / "config.toml")


def test_a_user_config_nested_5000_deep_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    work = _work(tmp_path, None)
    user = tmp_path / "config" / "avibe" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[rules]\n" + DEEP, encoding="utf-8")
    done = _vibe(tmp_path, work, "http://127.0.0.1:9", "config", "show-tightening")
    _one_line_about_depth(done, user)
    user.write_text("[rules]\ndeny = " + "[" * 20 + "]" * 20 + "\n", encoding="utf-8")
    done = _vibe(tmp_path, work, "http://127.0.0.1:9", "run", "hi")
    assert done.stderr == f"vibe: {user} nests tables or lists more than 8 deep; fix or remove it\n"


def test_a_broken_project_config_with_a_record_is_ignored_with_one_line(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    work = _work(tmp_path)
    _start(tmp_path, work, chat)
    (work / ".avibe" / "config.toml").write_text(DEEP, encoding="utf-8")
    stderr = _start(tmp_path, work, chat, attack=True)
    assert "could not be read (" in _kept_line(stderr, work)
    _attack_held(work, chat)


def test_a_pathological_deny_glob_is_matched_at_once_on_every_write(
    tmp_path: Path, chat: ChatServer, sandbox_runs: None
) -> None:
    """`*a*a*a*a*a*a*a*a*b` against a 200-character name: the regex it replaced tried about C(200, 8)
    ways (years); the run finishes within the subprocess timeout, the rule still decides."""
    work = _work(tmp_path, '[rules]\ndeny = ["*a*a*a*a*a*a*a*a*b"]\n')
    chat.call("write_file", path="a" * 200, content="kept\n")
    chat.call("write_file", path="a" * 199 + "b", content="refused\n")
    _start(tmp_path, work, chat)
    assert (work / ("a" * 200)).read_text(encoding="utf-8") == "kept\n"
    assert not (work / ("a" * 199 + "b")).exists()
    assert 'deny = ["*a*a*a*a*a*a*a*a*b"]' in chat.tool_outputs()[1]


# -- the record itself (in-process, real files) --------------------------------------------------------------


def _load(home: Path, work: Path, user: str = "", env: dict[str, str] | None = None) -> Settings:
    user_file = home.parent / "user.toml"
    user_file.write_text(user, encoding="utf-8")
    return load_settings({"AVIBE_HOME": str(home), **(env or {})}, project_dir=work, user_config=user_file)


def _started(home: Path, work: Path, user: str = "", env: dict[str, str] | None = None) -> Settings:
    """What a session start does: load the settings, then remember (avibe.cli.terminal.announce)."""
    loaded = _load(home, work, user, env)
    assert remember(loaded.home, loaded.remember) == ()
    return loaded


def test_the_record_is_written_atomically_in_the_home_and_private(tmp_path: Path) -> None:
    work = _work(tmp_path)
    _started(tmp_path / "home", work)
    record = record_file(tmp_path / "home", work.resolve())
    assert [p.name for p in record.parent.iterdir()] == [record.name]  # no temp file left behind
    assert record.stat().st_mode & 0o077 == 0
    assert not list(work.rglob("*.json"))


def test_a_damaged_record_is_one_line_and_forget_drops_it(tmp_path: Path) -> None:
    work = _work(tmp_path)
    _started(tmp_path / "home", work)
    record = record_file(tmp_path / "home", work.resolve())
    record.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"is damaged .*; run `{FORGET}` in {work.resolve()}"):
        _load(tmp_path / "home", work)
    assert forget(tmp_path / "home", work.resolve()) is not None
    assert _load(tmp_path / "home", work).approval == "ask"  # the file itself, remembered afresh


def test_the_environment_still_wins_over_the_record(tmp_path: Path) -> None:
    """The environment is the person's own word at this start; it wins over the file too."""
    work = _work(tmp_path)
    _started(tmp_path / "home", work)
    (work / ".avibe" / "config.toml").unlink()
    loaded = _load(tmp_path / "home", work, env={"AVIBE_APPROVAL": "auto"})
    assert loaded.approval == "auto" and loaded.deny == ("vendor/**",)


def test_a_trusted_project_is_not_held_to_a_record(tmp_path: Path) -> None:
    work = _work(tmp_path)
    trusting = f'trusted_projects = ["{work.resolve()}"]\n'
    assert _started(tmp_path / "home", work, trusting).remember is None
    assert not record_file(tmp_path / "home", work.resolve()).exists()


def test_the_sandbox_order_is_the_configs() -> None:
    assert SANDBOX_ORDER == SANDBOX_MODES


# -- the property: any edits and removals between starts --------------------------------------------------


def _config_text(
    sandbox: str | None, approval: str | None, window: int | None, deny: list[str], allow: list[str] | None
) -> tuple[str, str]:
    lines = [
        f'sandbox = "{sandbox}"' if sandbox else "",
        f'approval = "{approval}"' if approval else "",
        f"model_window = {window}" if window else "",
        "[rules]",
        f"deny = {json.dumps(deny)}",
        f"allow_commands = {json.dumps(allow)}" if allow is not None else "",
    ]
    return "write", "\n".join(lines) + "\n"


EDITS = st.one_of(
    st.just(("remove", "")),
    st.just(("forget", "")),
    st.just(("garble", "approval = [\n")),
    st.builds(
        _config_text,
        st.sampled_from([None, *SANDBOX_MODES]),
        st.sampled_from([None, "auto", "ask"]),
        st.sampled_from([None, 1024, 4096, 65536]),
        st.lists(st.sampled_from(["vendor/**", "*.lock", "secrets"]), unique=True, max_size=3),
        st.one_of(st.none(), st.lists(st.sampled_from(["ls", "make*", "pytest*"]), unique=True, max_size=3)),
    ),
)


def _at_least_as_strict(got: Settings, floor: Settings) -> None:
    assert SANDBOX_MODES.index(got.sandbox) <= SANDBOX_MODES.index(floor.sandbox)
    assert floor.approval == "auto" or got.approval == "ask"
    assert floor.model_window is None or (got.model_window or 1 << 40) <= floor.model_window
    assert set(floor.deny) <= set(got.deny)
    if floor.approval == "ask":
        assert set(got.allow_commands) <= set(floor.allow_commands)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDITS, min_size=1, max_size=8))
def test_no_sequence_of_edits_loosens_what_a_start_saw_until_the_person_forgets(
    edits: list[tuple[str, str]],
) -> None:
    """Between starts the file is rewritten, garbled or removed, or the person forgets the record. Every
    start is at least as strict as every earlier start since the last forget (a broken file without a
    record is one ConfigError: nothing starts)."""
    user = 'sandbox = "full-access"\n[rules]\nallow_commands = ["ls", "make*", "pytest*"]\n'
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        work, home = _work(root, None), root / "home"
        config = work / ".avibe" / "config.toml"
        seen: list[Settings] = []
        for action, text in edits:
            if action == "forget":
                forget(home, work.resolve())
                seen = []
                continue
            if action == "remove":
                config.unlink(missing_ok=True)
            else:
                config.write_text(text, encoding="utf-8")
            try:
                got = _started(home, work, user)
            except ConfigError:
                assert action == "garble" and not record_file(home, work.resolve()).exists()
                continue
            for earlier in seen:
                _at_least_as_strict(got, earlier)
            seen.append(got)
