"""The shell tool's sandbox (DESIGN "the agent's tools never reach Avibe's own home or
database"): what a command can see and write in each mode, the scrubbed environment, processes that die
with the tool and with Avibe, and the refusal where the sandbox cannot start. Real bubblewrap, real
processes; the sandboxed tests skip without bwrap and fail under CI (tests/tools/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from avibe.config import load_settings
from avibe.errors import ConfigError
from avibe.tools import Shell
from avibe.tools.sandbox import (
    MODES,
    SANDBOX_HOME,
    SandboxPolicy,
    bwrap_problem,
    scrubbed_env,
    sqlite_path,
)

SECRETS = {
    "OPENAI_API_KEY": "sk-test-SANDBOX-SECRET-1",
    "AVIBE_DATABASE_URL": "postgresql+psycopg://avibe:pw-SANDBOX-SECRET-2@localhost/avibe",
    "GITHUB_TOKEN": "ghp-SANDBOX-SECRET-3",
}


def _run(policy: SandboxPolicy, command: str, timeout_s: int = 30) -> str:
    result = Shell(policy.workdir, sandbox=policy).run({"command": command, "timeout_s": timeout_s})
    return result.output


def _running(marker: str) -> list[int]:
    """Pids of live `sleep` processes whose argument holds `marker` (not the shells that started them)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            hit = argv[0] == b"sleep" and any(marker.encode() in arg for arg in argv)
            state = cmdline.parent.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if hit and state not in "ZX":
            found.append(int(cmdline.parent.name))
    return found


def _eventually(check: Callable[[], bool], within_s: float) -> bool:
    end = time.monotonic() + within_s
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(home, workdir, database): Avibe's home with a database file in it, and a sibling workdir."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    database = home / "avibe.db"
    database.write_text("RECORD-7f3")
    (home / "logs").mkdir()
    return home, work, database


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A machine without bubblewrap: PATH without it (the probe is cached per process: cleared)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bwrap_problem.cache_clear()
    yield
    bwrap_problem.cache_clear()


# --- settings and policy values ---------------------------------------------------------------------


def test_the_setting_accepts_exactly_the_sandbox_modes_and_defaults_to_workspace_write(
    tmp_path: Path,
) -> None:
    home = str(tmp_path / "home")
    assert load_settings({"AVIBE_HOME": home}).sandbox == "workspace-write"
    for mode in MODES:
        assert load_settings({"AVIBE_HOME": home, "AVIBE_SANDBOX": mode}).sandbox == mode
    with pytest.raises(ConfigError, match="AVIBE_SANDBOX='none' is not a sandbox mode"):
        load_settings({"AVIBE_HOME": home, "AVIBE_SANDBOX": "none"})
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        SandboxPolicy("off", Path("."))


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////var/lib/avibe/avibe.db", Path("/var/lib/avibe/avibe.db")),
        ("sqlite:///rel/avibe.db", Path("rel/avibe.db")),
        ("sqlite+pysqlite:////a/b.db?timeout=5", Path("/a/b.db")),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
        ("postgresql+psycopg://u:p@host/db", None),
        ("not a url", None),
    ],
)
def test_the_database_file_is_found_as_the_store_reads_the_url(url: str, path: Path | None) -> None:
    assert sqlite_path(url) == path


def test_for_record_hides_the_home_and_the_database_file_with_its_companions(tmp_path: Path) -> None:
    """the user's config folder too, and the database's folder when it lies inside the workdir
    (no companion file can be planted next to it)."""
    policy = SandboxPolicy.for_record(
        "workspace-write",
        tmp_path,
        home=tmp_path / "home",
        database_url=f"sqlite:///{tmp_path}/db/x.db",
        config_dir=tmp_path / "config",
    )
    assert policy.hidden == (
        tmp_path / "home",
        tmp_path / "config",
        tmp_path / "db",
        tmp_path / "db/x.db",
        tmp_path / "db/x.db-wal",
        tmp_path / "db/x.db-shm",
        tmp_path / "db/x.db-journal",
    )
    assert policy.folders == (tmp_path / "home", tmp_path / "config", tmp_path / "db")
    elsewhere = SandboxPolicy.for_record(
        "workspace-write",
        tmp_path / "work",
        home=tmp_path / "home",
        database_url=f"sqlite:///{tmp_path}/x.db",
    )
    assert elsewhere.folders == (tmp_path / "home",)  # a database folder outside the workdir stays visible


def test_the_environment_keeps_only_the_allow_list() -> None:
    environ = {**SECRETS, "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "AVIBE_HOME": "/h", "HOME": "/r"}
    sandboxed = scrubbed_env(environ, home=SANDBOX_HOME)
    assert {k: sandboxed[k] for k in ("PATH", "LANG", "LC_ALL", "HOME")} == {
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "HOME": SANDBOX_HOME,
    }
    assert not any(k in sandboxed for k in (*SECRETS, "AVIBE_HOME"))
    assert scrubbed_env(environ, home=None)["HOME"] == "/r"  # full-access keeps the real home


# --- what a sandboxed command sees and writes --------------------------------------------------------


def test_workspace_write_writes_the_workdir_only(sandboxed: None, tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    out = _run(
        SandboxPolicy("workspace-write", work), f"echo a > a.txt; echo b > {outside}/b.txt; touch /etc/x"
    )
    assert (work / "a.txt").read_text() == "a\n"
    assert not (outside / "b.txt").exists() and not Path("/etc/x").exists()
    assert "Read-only file system" in out or "No such file or directory" in out


def test_read_only_writes_nothing_but_its_private_tmp(sandboxed: None, workdir: Path) -> None:
    (workdir / "kept.txt").write_text("kept\n")
    out = _run(
        SandboxPolicy("read-only", workdir), "cat kept.txt; echo x > new.txt; echo t > /tmp/t && cat /tmp/t"
    )
    assert out.splitlines()[1] == "kept"
    assert "Read-only file system" in out and out.rstrip().endswith("t")
    assert sorted(p.name for p in workdir.iterdir()) == ["kept.txt"]


def test_full_access_can_write_outside_the_workdir(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _run(SandboxPolicy("full-access", work), f"echo b > {tmp_path}/b.txt")
    assert (tmp_path / "b.txt").read_text() == "b\n"  # the opt-in is real: no sandbox


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_the_home_and_the_database_are_not_visible(
    sandboxed: None, mode: str, layout: tuple[Path, Path, Path]
) -> None:
    home, work, database = layout
    policy = SandboxPolicy.for_record(mode, work, home=home, database_url=f"sqlite:///{database}")
    assert _run(policy, f"ls -A {home}").splitlines()[1:] == ["(no output)"]
    out = _run(policy, f"cat {database}; echo forged > {database}; echo new > {home}/new")
    assert "RECORD-7f3" not in out
    assert database.read_text() == "RECORD-7f3" and not (home / "new").exists()


def test_a_database_inside_the_workdir_is_covered_too(sandboxed: None, workdir: Path, tmp_path: Path) -> None:
    database = workdir / "avibe.db"
    database.write_text("RECORD-7f3")
    (workdir / "code.py").write_text("print(1)")
    policy = SandboxPolicy.for_record(
        "workspace-write", workdir, home=tmp_path / "home", database_url=f"sqlite:///{database}"
    )
    out = _run(policy, "cat code.py; cat avibe.db; echo forged > avibe.db; rm -f avibe.db; mv avibe.db x.db")
    assert "print(1)" in out and "RECORD-7f3" not in out
    assert database.read_text() == "RECORD-7f3" and not (workdir / "x.db").exists()


def test_a_home_used_as_the_workdir_stays_writable_and_its_database_is_still_covered(
    sandboxed: None, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "avibe.db").write_text("RECORD-7f3")
    policy = SandboxPolicy.for_record(
        "workspace-write", home, home=home, database_url=f"sqlite:///{home}/avibe.db"
    )
    out = _run(policy, "echo made > made.txt; cat avibe.db; echo forged > avibe.db")
    assert (home / "made.txt").read_text() == "made\n"
    assert "RECORD-7f3" not in out and (home / "avibe.db").read_text() == "RECORD-7f3"


def test_a_workdir_inside_the_home_is_visible_and_the_rest_of_the_home_is_not(
    sandboxed: None, tmp_path: Path
) -> None:
    # /var/tmp: outside the sandbox's private /tmp, so only the cover over the home hides it
    base = Path(os.environ.get("AVIBE_TEST_VAR_TMP", "/var/tmp"))
    if not os.access(base, os.W_OK):
        base = tmp_path
    root = Path(
        subprocess.check_output(["mktemp", "-d", "-p", str(base), "avibe-sbx-XXXXXX"], text=True).strip()
    )
    try:
        home, work = root / "home", root / "home" / "projects" / "app"
        work.mkdir(parents=True)
        (home / "avibe.db").write_text("RECORD-7f3")
        policy = SandboxPolicy.for_record(
            "workspace-write", work, home=home, database_url=f"sqlite:///{home}/avibe.db"
        )
        out = _run(policy, f"echo made > made.txt; ls -A {home}; cat {home}/avibe.db")
        assert (work / "made.txt").read_text() == "made\n"
        assert out.splitlines()[1] == "projects"  # only the way to the workdir
        assert "RECORD-7f3" not in out
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)


def test_the_environment_is_scrubbed_in_every_mode(
    policy: SandboxPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AVIBE_HOME", "/somewhere/avibe-home")
    out = _run(policy, "env; tr '\\0' '\\n' < /proc/self/environ; echo HOME=$HOME")
    assert not any(value in out for value in SECRETS.values())
    assert "AVIBE_" not in out and "PATH=" in out
    if policy.sandboxed:
        assert f"HOME={SANDBOX_HOME}" in out


def test_no_process_outside_the_sandbox_is_visible_and_no_capability_is_kept(
    sandboxed: None, workdir: Path
) -> None:
    out = _run(
        SandboxPolicy("workspace-write", workdir),
        "ls /proc | grep -c '^[0-9]'; grep CapEff /proc/self/status; mount -o remount,rw / && echo REMOUNTED",
    )
    lines = out.splitlines()
    assert int(lines[1]) <= 6  # bwrap's init, the supervisor, bash, ls, grep: Avibe is not among them
    assert "CapEff:\t0000000000000000" in out and "REMOUNTED" not in out


def test_no_descriptor_of_avibe_reaches_the_command(policy: SandboxPolicy, tmp_path: Path) -> None:
    with (tmp_path / "open.db").open("wb") as held:
        assert not os.get_inheritable(held.fileno())
        out = _run(policy, "ls -l /proc/$$/fd")
    assert "open.db" not in out and "report" not in out


# --- processes die with the tool and with Avibe (item 7) ----------------------------------------------


def test_setsid_children_of_a_foreground_command_are_gone_when_the_tool_returns(
    policy: SandboxPolicy,
) -> None:
    out = _run(policy, "setsid sleep 1000.0431 & nohup setsid sleep 1000.0432 >/dev/null 2>&1 & echo started")
    assert "processes it left running were stopped" in out
    # sandboxed: gone before the tool returned (the PID namespace is torn down and waited for);
    # full-access: SIGKILLed by the run's mark, which takes effect a moment later
    assert _eventually(lambda: not _running("1000.043"), within_s=0 if policy.sandboxed else 2)


def test_a_timed_out_command_leaves_no_setsid_child(policy: SandboxPolicy) -> None:
    result = Shell(policy.workdir, sandbox=policy).run(
        {"command": "setsid sleep 1000.0433 & wait", "timeout_s": 1}
    )
    assert result.is_error and result.output.startswith("timed out after 1 s")
    assert _eventually(lambda: not _running("1000.0433"), within_s=0 if policy.sandboxed else 2)


_HOLDER = """
import sys
from pathlib import Path
from avibe.store import open_store
from avibe.sources.background import BackgroundJobs
from avibe.tools import Shell
from avibe.tools.sandbox import SandboxPolicy

policy = SandboxPolicy("workspace-write", Path(sys.argv[1]))
store = open_store(f"sqlite:///{sys.argv[2]}")
session = store.create_session("holder").id
jobs = BackgroundJobs(lambda source, text: None, store, session, policy)
jobs.start("setsid sleep 1000.0441 & sleep 1000.0442")
print("ready", flush=True)
shell = Shell(policy.workdir, sandbox=policy)
shell.run({"command": "setsid sleep 1000.0443 & sleep 1000.0444", "timeout_s": 600})
"""


def test_kill_9_of_avibe_takes_every_sandboxed_process_with_it(
    sandboxed: None, workdir: Path, tmp_path: Path
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLDER), str(workdir), str(tmp_path / "h.db")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        assert _eventually(lambda: len(_running("1000.044")) == 4, within_s=20)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert _eventually(lambda: not _running("1000.044"), within_s=5)  # --die-with-parent


# --- where the sandbox cannot start --------------------------------------------------------------------


def test_without_bubblewrap_the_shell_refuses_and_names_the_mode_to_choose(
    no_bwrap: None, workdir: Path
) -> None:
    for mode in ("read-only", "workspace-write"):
        result = Shell(workdir, sandbox=SandboxPolicy(mode, workdir)).run({"command": "echo ran > ran.txt"})
        assert result.is_error
        assert f"the {mode} sandbox cannot start on this machine: bubblewrap (bwrap) is not installed" in (
            result.output
        )
        assert "AVIBE_SANDBOX=full-access" in result.output
    assert not (workdir / "ran.txt").exists()
    ran = Shell(workdir, sandbox=SandboxPolicy("full-access", workdir)).run({"command": "echo ran"})
    assert ran.output.splitlines() == ["exit code: 0", "ran"]  # the opt-in still works


def test_a_bwrap_that_fails_is_reported_with_its_own_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workdir: Path
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    bwrap_problem.cache_clear()
    try:
        result = Shell(workdir).run({"command": "true"})
    finally:
        bwrap_problem.cache_clear()
    assert result.is_error and "bwrap failed (bwrap: No permissions to create new namespace)" in result.output


def test_background_jobs_refuse_too_without_using_an_id(
    no_bwrap: None, workdir: Path, tmp_path: Path
) -> None:
    from avibe.sources.background import BackgroundJobs
    from avibe.store import open_store

    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        session = store.create_session("t").id
        jobs = BackgroundJobs(
            lambda source, text: pytest.fail("nothing to deliver"),
            store,
            session,
            SandboxPolicy("workspace-write", workdir),
        )
        refused = Shell(workdir, jobs).run({"command": "sleep 1", "background": True})
        assert refused.is_error and "AVIBE_SANDBOX=full-access" in refused.output
        assert jobs.running() == [] and store.load_state(session, "background_jobs") is None
