"""No road from the sandbox (docs/security.md, "No road from the sandbox to the person's authority"): a
sandboxed command has no network (loopback included) unless the person's own settings open it, and no
host Unix socket unless the person opts in.

Real components only: a TCP server on 127.0.0.1 and Unix socket servers started by the test, the real
shell tool under a real bubblewrap `SandboxPolicy` built the way a session builds it (`sandbox_for` over
`load_settings`). Each attack fails in `read-only` and `workspace-write` and, as the control, succeeds in
`full-access` (no sandbox: the command reaches what Avibe reaches). Sockets live outside /tmp: the
sandbox's private /tmp would hide one under /tmp on its own.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from listeners import Listener

from avibe.compose.common import sandbox_for
from avibe.config import load_settings
from avibe.ports import RecordStore
from avibe.store import open_store
from avibe.tools.sandbox import SandboxPolicy
from avibe.tools.shell import Shell
from sandbox_support import require_sandbox

SANDBOXED = ("read-only", "workspace-write")
CONNECT = (
    'python3 -c "import socket,sys; s=socket.socket(socket.{family}); s.settimeout(3); '
    "s.connect({address!r}); s.sendall(b'hi'); print('CONNECTED', s.recv(16).decode())\" 2>&1 | tail -1"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RecordStore]:
    with open_store(f"sqlite:///{tmp_path / 'home' / 'avibe.db'}") as real:
        yield real


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp)."""
    made = Path(
        tempfile.mkdtemp(prefix="avibe-net-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None)
    )
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _policy(tmp_path: Path, store: RecordStore, env: dict[str, str]) -> SandboxPolicy:
    """The policy a session gets from these settings (no project config, an empty user config)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    user = tmp_path / "user-config.toml"
    user.touch()
    env = {"AVIBE_HOME": str(tmp_path / "home"), **env}
    settings = load_settings(env, project_dir=work, user_config=user)
    return sandbox_for(settings, work, store, store.create_session("net").id)


def _run(policy: SandboxPolicy, command: str) -> str:
    return Shell(policy.workdir, sandbox=policy).run({"command": command, "timeout_s": 30}).output


@pytest.fixture
def loopback() -> Iterator[Listener]:
    server = Listener(socket.AF_INET, ("127.0.0.1", 0))
    yield server
    server.close()


@pytest.mark.parametrize("mode", SANDBOXED)
def test_a_sandboxed_command_cannot_open_a_tcp_connection_to_127_0_0_1_by_default(
    mode: str, tmp_path: Path, store: RecordStore, loopback: Listener
) -> None:
    """Before: the sandbox shared the host's network, so a command reached `vibe serve` (or any server
    the person runs) on loopback. Now it has a network namespace of its own: nothing listens there."""
    require_sandbox()
    policy = _policy(tmp_path, store, {"AVIBE_SANDBOX": mode})
    output = _run(policy, CONNECT.format(family="AF_INET", address=loopback.address))
    assert "CONNECTED" not in output and "Connection refused" in output, output
    assert loopback.accepted == 0
    assert "[no network here: commands run without one (loopback included)" in output  # ask, not retry


def test_the_no_network_note_is_only_for_a_sandbox_without_network(
    tmp_path: Path, store: RecordStore
) -> None:
    """The note names the missing network only where there is none: not with the person's `network = on`,
    not in full-access, not for a command that failed for another reason."""
    refused = "curl: (7) Failed to connect to 127.0.0.1 port 9: Connection refused"
    policies = {
        mode: _policy(_made(tmp_path / mode), store, {"AVIBE_SANDBOX": mode, **extra})
        for mode, extra in (
            ("read-only", {}),
            ("workspace-write", {"AVIBE_NETWORK": "on"}),
            ("full-access", {}),
        )
    }
    assert policies["read-only"].network_note(refused)
    assert not policies["read-only"].network_note("No such file or directory")
    assert not policies["workspace-write"].network_note(refused)
    assert not policies["full-access"].network_note(refused)


def test_full_access_control_reaches_loopback(tmp_path: Path, store: RecordStore, loopback: Listener) -> None:
    """full-access means no sandbox: the command reaches what Avibe reaches, loopback included."""
    policy = _policy(tmp_path, store, {"AVIBE_SANDBOX": "full-access"})
    output = _run(policy, CONNECT.format(family="AF_INET", address=loopback.address))
    assert "CONNECTED ok" in output and loopback.accepted == 1, output


@pytest.mark.parametrize("mode", SANDBOXED)
def test_network_on_from_the_persons_own_settings_opens_it(
    mode: str, tmp_path: Path, store: RecordStore, loopback: Listener
) -> None:
    require_sandbox()
    policy = _policy(tmp_path, store, {"AVIBE_SANDBOX": mode, "AVIBE_NETWORK": "on"})
    output = _run(policy, CONNECT.format(family="AF_INET", address=loopback.address))
    assert "CONNECTED ok" in output and loopback.accepted == 1, output


def test_a_projects_network_on_is_ignored_and_named_and_the_users_is_announced(tmp_path: Path) -> None:
    """The project's config lives where the agent writes: its `network = "on"` opens nothing and is
    named on stderr; the person's own `network = "on"` is announced at every start."""
    work = tmp_path / "work"
    (work / ".avibe").mkdir(parents=True)
    (work / ".avibe" / "config.toml").write_text('network = "on"\nhost_sockets = "on"\n')
    user = tmp_path / "user.toml"
    user.write_text("")
    settings = load_settings({"AVIBE_HOME": str(tmp_path / "h")}, project_dir=work, user_config=user)
    assert not settings.network and not settings.host_sockets
    assert [w.split(" in ")[0] for w in settings.warnings] == [
        'ignoring network = "on"',
        'ignoring host_sockets = "on"',
    ]
    assert settings.announcements == ()
    user.write_text('network = "on"\n')
    mine = load_settings({"AVIBE_HOME": str(tmp_path / "h")}, project_dir=tmp_path, user_config=user)
    assert mine.network and mine.announcements == (
        f"sandboxed commands reach the network (network = on, from {user})",
    )
    (work / ".avibe" / "config.toml").write_text('network = "off"\n')  # a project may close it
    closed = load_settings({"AVIBE_HOME": str(tmp_path / "h")}, project_dir=work, user_config=user)
    assert not closed.network and closed.warnings == ()


def test_the_network_flag_is_the_persons_setting_for_this_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`vibe run --network on` sets AVIBE_NETWORK for the process before the settings are read."""
    import typer

    from avibe.cli.options import check_network

    monkeypatch.delenv("AVIBE_NETWORK", raising=False)
    assert check_network("on") == "on" and os.environ["AVIBE_NETWORK"] == "on"
    assert check_network("OFF") == "off" and os.environ["AVIBE_NETWORK"] == "off"
    with pytest.raises(typer.BadParameter, match="not on or off"):
        check_network("yes")


# --- host sockets (finding 6) ---------------------------------------------------------------------------


@pytest.fixture
def unix_server(outside: Path) -> Iterator[tuple[Path, Listener]]:
    """A Unix socket server in a runtime folder outside the workdir and outside /tmp."""
    runtime = outside / "runtime"
    runtime.mkdir()
    server = Listener(socket.AF_UNIX, str(runtime / "bus"))
    yield runtime, server
    server.close()


@pytest.mark.parametrize("variable", ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"])
@pytest.mark.parametrize("mode", SANDBOXED)
def test_a_host_unix_socket_cannot_be_connected_from_the_sandbox(
    mode: str,
    variable: str,
    tmp_path: Path,
    store: RecordStore,
    unix_server: tuple[Path, Listener],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: `--ro-bind / /` left every socket on the host connectable (the session bus, docker.sock,
    an ssh-agent, PostgreSQL's peer-auth socket). Now the folders holding them are covered."""
    require_sandbox()
    runtime, server = unix_server
    monkeypatch.setenv(variable, str(runtime if variable == "XDG_RUNTIME_DIR" else runtime / "bus"))
    policy = _policy(tmp_path, store, {"AVIBE_SANDBOX": mode, "AVIBE_NETWORK": "on"})
    output = _run(policy, CONNECT.format(family="AF_UNIX", address=str(runtime / "bus")))
    assert "CONNECTED" not in output and "No such file" in output, output
    assert server.accepted == 0


@pytest.mark.parametrize("mode", ["full-access", "host_sockets"])
def test_full_access_and_host_sockets_on_controls_connect(
    mode: str,
    tmp_path: Path,
    store: RecordStore,
    unix_server: tuple[Path, Listener],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime, server = unix_server
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    if mode == "host_sockets":
        require_sandbox()
    env = {"AVIBE_SANDBOX": "full-access"} if mode == "full-access" else {"AVIBE_HOST_SOCKETS": "on"}
    policy = _policy(tmp_path, store, env)
    output = _run(policy, CONNECT.format(family="AF_UNIX", address=str(runtime / "bus")))
    assert "CONNECTED ok" in output and server.accepted == 1, output


@pytest.mark.parametrize("mode", SANDBOXED)
def test_run_is_covered_and_the_workdir_inside_a_covered_folder_still_works(
    mode: str, tmp_path: Path, store: RecordStore, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/run (/var/run) is an empty folder in the sandbox; a workdir that lies in a covered folder (here
    the runtime folder) is bound back over the cover and works as usual, its siblings stay covered."""
    require_sandbox()
    policy = _policy(tmp_path, store, {"AVIBE_SANDBOX": mode})
    assert "entries=0" in _run(policy, "echo entries=$(ls -A /run/ /var/run/ | grep -v : | grep -c .)")
    runtime = outside / "rt"
    inner = runtime / "project"
    inner.mkdir(parents=True)
    (inner / "a.txt").write_text("seen\n")
    (runtime / "sibling.txt").write_text("hidden\n")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    output = _run(SandboxPolicy(mode, inner), "cat a.txt; cat ../sibling.txt")
    assert "seen" in output and "hidden" not in output, output


# --- end to end: `vibe run`, its --network flag and the announcement --------------------------------


@pytest.mark.parametrize("flag", [(), ("--network", "on")], ids=["default", "network-on"])
def test_vibe_run_has_no_network_in_the_sandbox_unless_the_flag_opens_it_and_says_so(
    flag: tuple[str, ...], tmp_path: Path, loopback: Listener
) -> None:
    """The real `vibe run` on a scripted model server: the agent's shell command tries a server on
    127.0.0.1. By default it is refused and nothing is announced; `--network on` opens it for this run
    and says so on stderr."""
    require_sandbox()
    from openai_chat import serve_chat
    from serve_support import vibe, vibe_env

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with serve_chat() as chat:
        chat.call("shell", command=CONNECT.format(family="AF_INET", address=loopback.address))
        chat.say("Done.")
        done = vibe(vibe_env(home, chat), work, "run", "--no-wait", *flag, "Check the server.")
        output = next(text for text in chat.tool_outputs() if "exit code" in text)
    announced = "vibe: sandboxed commands reach the network (network = on, from AVIBE_NETWORK)"
    if flag:
        assert "CONNECTED ok" in output and loopback.accepted == 1, output
        assert announced in done.stderr.splitlines(), done.stderr
    else:
        assert "Connection refused" in output and loopback.accepted == 0, output
        assert "reach the network" not in done.stderr


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder
