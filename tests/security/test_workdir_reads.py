"""Nothing the agent plants leads Avibe's own process elsewhere: the harness reads the workdir one way
(avibe/sources/agent_files.py) and never follows a link there.

The attack: the sandboxed shell cannot read Avibe's serve token (its home is covered), so it leaves a link
where the harness reads with the user's authority - `ln -s ~/.local/share/avibe/serve-token AGENTS.md` -
and the next turn's system prompt, built outside the sandbox, would carry the token to the model. Also
`-> ~/.config/avibe/config.toml` (a database password) and `-> /proc/self/environ` (Avibe's environment);
a binary or FIFO AGENTS.md (a crash or a hang); a watched `build.log` replaced by a link to the token;
`.avibe/skills -> <Avibe's home>` or `-> /` turning a home or the whole disk into a read root; a link for
the project's `.avibe/config.toml`. Each through the real `open_session`, the real bubblewrap sandbox and
the real file tools; the links are planted with the agent's own means (its sandboxed shell) wherever the
mode lets it write.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from reads_support import PASSWORD, TOKEN, Layout, make_layout, run_session, scratch

from avibe.config import load_settings
from avibe.errors import ConfigError
from avibe.ingress import deliver
from avibe.ports import ToolResult
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.feeds import Feed
from avibe.record.messages import ToolCall
from avibe.sources.feeds import FeedRunner
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools
from avibe.tools.sandbox import SandboxPolicy
from sandbox_support import require_sandbox

NOT_READ = "Not read: it is a link, or lies behind one"


@pytest.fixture(params=["read-only", "workspace-write", "full-access"])
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Layout]:
    if request.param != "full-access":
        require_sandbox()
    made = make_layout(scratch(tmp_path), request.param)
    try:
        yield made
    finally:
        subprocess.run(["rm", "-rf", str(made.root)], check=True)


def _plant(layout: Layout, command: str) -> list[str]:
    """The agent's own means: its sandboxed shell in a first session where the mode lets it write (in
    read-only a link left there before, by the test, stands for it)."""
    if layout.sandbox == "read-only":
        subprocess.run(["sh", "-c", command], cwd=layout.work, check=True)
        return []
    return run_session(layout, [("shell", {"command": command, "timeout_s": 30})]).outputs


def _environ_lines() -> list[str]:
    """The entries of this process's /proc/self/environ long enough to be telling."""
    data = Path("/proc/self/environ").read_bytes().decode("utf-8", "replace")
    return [line for line in data.split("\0") if len(line) > 12]


@pytest.mark.parametrize("target", ["token", "config", "environ"])
def test_a_linked_agents_md_never_reaches_the_system_prompt(
    layout: Layout, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The chain's first link: the next session's system prompt holds no secret and
    tells the model the file was not read; the person's log has one line saying so."""
    path = {
        "token": str(layout.token),
        "config": str(layout.user_config),
        "environ": "/proc/self/environ",
    }[target]
    _plant(layout, f"ln -s {path} AGENTS.md")
    assert (layout.work / "AGENTS.md").is_symlink()
    run = run_session(layout, [], task="hello again")
    system = run.systems[0]
    assert TOKEN not in system and PASSWORD not in system
    assert not [line for line in _environ_lines() if line in system]
    assert NOT_READ in system and run.finished
    said = [r.getMessage() for r in caplog.records if "AGENTS.md was not read" in r.getMessage()]
    assert said and all("\n" not in line and TOKEN not in line for line in said)


def test_control_full_access_the_shell_reads_the_token_itself(tmp_path: Path) -> None:
    """What full-access means: no sandbox, the shell reads Avibe's home directly (the harness's reads
    above refuse the link in every mode all the same)."""
    layout = make_layout(scratch(tmp_path), "full-access")
    try:
        command = {"command": f"cat {layout.token}", "timeout_s": 30}
        assert TOKEN in run_session(layout, [("shell", command)]).outputs[0]
    finally:
        subprocess.run(["rm", "-rf", str(layout.root)], check=True)


def test_a_hard_link_to_the_token_as_agents_md_is_refused_by_identity(layout: Layout) -> None:
    """A second name for Avibe's own file (no link to refuse): known by its identity."""
    os.link(layout.token, layout.work / "AGENTS.md")
    system = run_session(layout, [], task="hello").systems[0]
    assert TOKEN not in system and "Not read: it is one of Avibe's own files." in system


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("plant", "why"),
    [
        ("printf '\\377\\376\\000binary' > AGENTS.md", "it is not UTF-8 text"),
        ("mkfifo AGENTS.md", "it is not a regular file"),
    ],
)
def test_a_binary_or_fifo_agents_md_is_one_line_and_the_turn_goes_on(
    layout: Layout, plant: str, why: str
) -> None:
    """Finding 15 (LOW): a binary AGENTS.md crashed the next turn (UnicodeDecodeError); a FIFO would
    hang it. Now the model is told it was not read and the turn ends normally."""
    _plant(layout, plant)
    run = run_session(layout, [("read_file", {"path": "notes.md"})], task="hello")
    assert run.finished and all(f"Not read: {why}." in system for system in run.systems)


# ---- a watched file that becomes a link ---------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def now(self) -> datetime:
        return self.at


def _tools(layout: Layout, policy: SandboxPolicy, store: object, session: str) -> ToolBox:
    return ToolBox(
        default_tools(
            layout.work,
            store=store,  # type: ignore[arg-type]
            session_id=session,
            skill_dirs=[layout.work / ".avibe" / "skills", layout.home / "skills"],
            sandbox=policy,
        )
    )


def _policy(layout: Layout) -> SandboxPolicy:
    return SandboxPolicy.for_record(
        layout.sandbox,
        layout.work,
        home=layout.home,
        database_url=f"sqlite:///{layout.home / 'avibe.db'}",
        config_dir=layout.user_config.parent,
    )


def _call(box: ToolBox, name: str, **arguments: object) -> ToolResult:
    return box.dispatch(ToolCall(f"call-{name}", name, dict(arguments)))


def _poll(runner: FeedRunner, clock: _Clock, done: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the watch never looked"
        clock.at += timedelta(seconds=2)
        runner.poll()
        time.sleep(0.05)


def test_a_watched_file_replaced_by_a_link_is_reported_never_read(layout: Layout) -> None:
    """Finding 1, the watch: `build.log` is watched; the agent's shell swaps it for a link to the token.
    The watch posts that it became a link - its target never read."""
    (layout.work / "build.log").write_text("building\n")
    policy = _policy(layout)
    with open_store(f"sqlite:///{layout.home / 'avibe.db'}") as store:
        session = store.create_session("watched").id
        store.add_feed(Feed("w-log", session, "watch", "build", {"every_s": 1.0, "file": "build.log"}))
        clock = _Clock()

        def post(source: Source, text: str, key: str) -> Entry:
            return deliver(store, session, source, text, clock=clock, key=key)

        runner = FeedRunner(store, session, post, clock, policy=policy)
        try:
            _poll(runner, clock, lambda: "digest" in store.get_feed("w-log").state)
            swap = f"rm build.log && ln -s {layout.token} build.log"
            if layout.sandbox == "read-only":
                subprocess.run(["sh", "-c", swap], cwd=layout.work, check=True)
            else:
                _call(_tools(layout, policy, store, session), "shell", command=swap, timeout_s=30)
            assert (layout.work / "build.log").is_symlink()
            _poll(runner, clock, lambda: store.query(EntryQuery(session)))
        finally:
            runner.close()
        (entry,) = store.query(EntryQuery(session))
    assert entry.kind == "watch" and not entry.is_user
    assert "build.log became a link; it was not read" in entry.text and TOKEN not in entry.text


# ---- read roots never reach through a link ------------------------------------------------------------


@pytest.mark.parametrize("target", ["home", "root"])
def test_a_skills_folder_that_is_a_link_is_no_read_root(layout: Layout, target: str) -> None:
    """Finding 2: `.avibe/skills -> <Avibe's home>` made the home a read root for the next session (its
    log, its token), and `-> /` the whole disk. Now neither is readable, listed nor searched (in
    full-access Avibe's home in the workdir is an ordinary workdir folder: the control)."""
    outside = layout.root / "outside.txt"
    outside.write_text(f"outside the workdir: {TOKEN}\n")
    where = str(layout.home) if target == "home" else "/"
    _plant(layout, f"mkdir -p .avibe && ln -s {where} .avibe/skills")
    policy = _policy(layout)
    with open_store(f"sqlite:///{layout.home / 'avibe.db'}") as store:
        box = _tools(layout, policy, store, store.create_session("next").id)
        inside = ".avibe/skills/" + ("logs/avibe.log" if target == "home" else str(outside.relative_to("/")))
        outputs = [
            _call(box, "read_file", path=inside),
            _call(box, "read_file", path=str(outside)),
            _call(box, "list_files", path=".avibe/skills"),
            _call(box, "search_files", pattern=TOKEN, path=".avibe/skills"),
        ]
    if layout.sandbox == "full-access" and target == "home":
        # the control: full-access keeps nothing of Avibe's from the file tools, and here its home lies
        # in the workdir, so it is read as any workdir file (no read root needed)
        assert TOKEN in outputs[0].output
        return
    for result in outputs:
        assert TOKEN not in result.output
    assert outputs[0].is_error and outputs[1].is_error
    assert "serve-token" not in outputs[2].output and "avibe.log" not in outputs[2].output


# ---- the project's config -----------------------------------------------------------------------------


def test_a_project_config_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    """`.avibe/config.toml -> ~/.config/avibe/config.toml` (or any file): not read, one line that says
    so and nothing of the target; a project folder `.avibe` that is a link likewise."""
    target = tmp_path / "elsewhere.toml"
    target.write_text(f'database_url = "postgresql://me:{PASSWORD}@db/x"\nsandbox = "read-only"\n')
    user = tmp_path / "user.toml"
    user.write_text("")
    project = tmp_path / "project"
    (project / ".avibe").mkdir(parents=True)
    (project / ".avibe" / "config.toml").symlink_to(target)
    with pytest.raises(ConfigError) as caught:
        load_settings({}, project_dir=project, user_config=user)
    message = str(caught.value)
    assert "is a link" in message and PASSWORD not in message and "\n" not in message
    other = tmp_path / "other"
    other.mkdir()
    (other / ".avibe").symlink_to(target.parent)
    (target.parent / "config.toml").write_text('sandbox = "read-only"\n')
    with pytest.raises(ConfigError, match="is a link"):
        load_settings({}, project_dir=other, user_config=user)


# ---- the one reader, with openat2 and with the walk that stands in for it ---------------------------


@pytest.fixture(params=["openat2", "walk"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the reader opens: the kernel's openat2, and the O_NOFOLLOW walk used without it."""
    from avibe.sources import agent_files

    if request.param == "walk":
        monkeypatch.setattr(agent_files, "_libc", lambda: None)
    elif agent_files._libc() is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs on a kernel with openat2")
        pytest.skip("this kernel has no openat2")
    return str(request.param)


def test_the_reader_refuses_every_way_out(reader: str, tmp_path: Path) -> None:
    import socket

    from avibe.sources.agent_files import list_agent_dir, read_agent_file

    secret = tmp_path / "secret"
    secret.write_text(TOKEN)
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "ok.md").write_text("fine\n")
    (work / "file.md").symlink_to(secret)
    (work / "folder").symlink_to(tmp_path)
    (work / "big.md").write_bytes(b"x" * 2048)
    (work / "bin.md").write_bytes(b"\xff\xfe\x00")
    (work / "nul.md").write_bytes(b"a\x00b")
    os.mkfifo(work / "fifo.md")
    os.link(secret, work / "hard.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(work / "sock.md"))
        own = {(os.stat(secret).st_dev, os.stat(secret).st_ino)}
        names = "docs/ok.md file.md folder/secret big.md bin.md nul.md fifo.md hard.md sock.md nothing.md"
        names += " docs/ok.md/x docs"
        statuses = {n: read_agent_file(work, n, max_bytes=1024, own=own).status for n in names.split()}
    assert statuses == {
        "docs/ok.md": "read", "file.md": "link", "folder/secret": "link", "big.md": "too_big",
        "bin.md": "binary", "nul.md": "binary", "fifo.md": "not_regular", "hard.md": "own",
        "sock.md": "not_regular", "nothing.md": "missing", "docs/ok.md/x": "missing", "docs": "not_regular",
    }  # fmt: skip
    assert read_agent_file(work, "docs/ok.md").text == "fine\n"
    with pytest.raises(ValueError):
        read_agent_file(work, "../secret")
    assert list_agent_dir(work, "docs") == ["ok.md"] and list_agent_dir(work, "folder") is None
    line = read_agent_file(work, "file.md").line()
    assert "\n" not in line and TOKEN not in line and "link" in line


@pytest.mark.parametrize(
    ("target", "read"),
    [
        ("CLAUDE.md", True),  # the common alias beside it: a file the agent could write directly anyway
        ("docs/../CLAUDE.md", True),
        (".local/share/avibe/logs/avibe.log", False),  # inside Avibe's home (in the workdir)
        (".config/avibe/config.toml", False),  # not beside it: no folder's file, hidden or not
        ("sub/CLAUDE.md", False),  # sub is a link: no second hop
        ("../outside.md", False),  # above the workdir
    ],
)
def test_an_agents_md_alias_is_read_only_as_a_file_beside_it(layout: Layout, target: str, read: bool) -> None:
    """`AGENTS.md -> CLAUDE.md` is read as CLAUDE.md (one hop, no link on its way); a link into Avibe's
    home lying in the workdir, into any folder, through a further link, or above it is still "not read"."""
    (layout.work / "CLAUDE.md").write_text("Run the linter before each commit.\n")
    (layout.work / "docs").mkdir()
    (layout.work / "sub").symlink_to(layout.work)
    (layout.root / "outside.md").write_text(f"outside {TOKEN}\n")
    (layout.work / "AGENTS.md").symlink_to(target)
    system = run_session(layout, [], task="hello").systems[0]
    assert TOKEN not in system
    assert ("Run the linter before each commit." in system) is read
    assert (NOT_READ in system) is not read


def test_vibe_run_tells_the_person_in_one_line_that_agents_md_was_not_read(layout: Layout) -> None:
    """The person sees one line on screen (not only in the log) when a link stands where AGENTS.md
    should be; the reply and the turn go on."""
    from openai_chat import serve_chat

    (layout.work / "AGENTS.md").symlink_to(layout.token)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_", "XDG_CONFIG"))}
    with serve_chat() as chat:
        chat.say("Hello.")
        env |= {**layout.env, "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url,
                "AVIBE_MODEL": "openai/gpt-4o"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", "from avibe.cli import main; main()", "run", "Say hello"],
            env=env, cwd=layout.work, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("[note] ")]
    assert notes == [f"[note] {layout.work / 'AGENTS.md'} was not read: {_LINK_WHY}"]
    assert TOKEN not in done.stdout + done.stderr and "vibey> Hello." in done.stdout


_LINK_WHY = "it is a link, or lies behind one (Avibe never follows links where the agent can write)"
