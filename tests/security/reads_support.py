"""What tests/security/test_workdir_reads.py and test_provenance_content.py share: the person's `~` as the
working directory (Avibe's home and config folder inside it, as in test_battery.py), real settings, and
a session driven through the real `open_session` by a scripted model whose tool calls are the agent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avibe.compose import open_session
from avibe.config import Settings, load_settings
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ToolCall
from sandbox_support import outside_tmp

TOKEN = "SECRET-SERVE-TOKEN-77d1"
PASSWORD = "SECRET-DB-PASSWORD-c3e9"
AVIBE = ".local/share/avibe"
CONFIG = ".config/avibe"


def scratch(tmp_path: Path) -> Path:
    """A folder outside /tmp where possible: the sandbox's private /tmp would hide one under /tmp."""
    return outside_tmp("avibe-reads-", tmp_path)


@dataclass
class Layout:
    """`work` stands for the person's `~`: Avibe's home and the person's config folder lie in it."""

    root: Path
    sandbox: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def work(self) -> Path:
        return self.root / "user"

    @property
    def home(self) -> Path:
        return self.work / AVIBE

    @property
    def token(self) -> Path:
        return self.home / "serve-token"

    @property
    def user_config(self) -> Path:
        return self.work / CONFIG / "config.toml"

    def settings(self, workdir: Path | None = None) -> Settings:
        return load_settings(self.env, project_dir=workdir or self.work, user_config=self.user_config)


def make_layout(root: Path, sandbox: str) -> Layout:
    layout = Layout(root, sandbox)
    layout.home.mkdir(parents=True)
    (layout.home / "skills").mkdir()
    (layout.home / "logs").mkdir()
    (layout.home / "logs" / "avibe.log").write_text(f"started with token {TOKEN}\n")
    layout.token.write_text(TOKEN + "\n")
    layout.user_config.parent.mkdir(parents=True)
    layout.user_config.write_text(f'# backup db: postgresql://me:{PASSWORD}@db/x\nmodel = "openai/gpt-4o"\n')
    layout.env = {
        "AVIBE_HOME": str(layout.home),
        "AVIBE_SANDBOX": sandbox,
        "XDG_CONFIG_HOME": str(layout.work / ".config"),
    }
    return layout


@dataclass
class Run:
    session: str
    outputs: list[str]  # the tool results, in order
    systems: list[str]  # the system prompt of every request
    finished: bool  # the model was asked for every step and its last answer: the turn went on to its end


def run_session(
    layout: Layout,
    calls: list[tuple[str, dict[str, Any]]],
    *,
    workdir: Path | None = None,
    task: str = "tidy up the project, please",
) -> Run:
    """One session in which the model makes `calls`, one per step, then answers "done"."""
    steps: list[Any] = [
        reply(tool_calls=[ToolCall(f"call-{i}", name, args)]) for i, (name, args) in enumerate(calls)
    ]
    seen: list[ModelRequest] = []

    def record(request: ModelRequest) -> Any:
        seen.append(request)
        return reply("done")

    def recorded(step: Any) -> Any:
        def play(request: ModelRequest) -> Any:
            seen.append(request)
            return step

        return play

    model = ScriptedModel.of([*(recorded(s) for s in steps), record], window=64_000)
    where = workdir or layout.work
    with open_session(
        layout.settings(where),
        model_name="openai/gpt-4o",
        workdir=where,
        session_id=None,
        window=64_000,
        max_steps=len(calls) + 2,
        model=model,
        start_delegate=lambda child: None,
    ) as live:
        live.send(task)
        session = live.session_id
        outputs = [m.content for m in live.vibey.load_state().messages if m.role == "tool"]
    systems = [str(r.messages[0].content) for r in seen]
    return Run(session, outputs, systems, model.remaining == 0)
