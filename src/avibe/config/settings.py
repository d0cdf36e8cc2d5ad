"""The settings object every part of Avibe is handed: one value, built once at the edge (load_settings in
avibe.config); what each field means is in avibe.config's table and docs/configuration.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from avibe.mcp.config import McpServer
from avibe.tightening import Remembered


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    database_url: str
    model: str
    user_name: str
    model_cache: Path
    model_window: int | None = None
    sandbox: str = "workspace-write"  # the shell tool's sandbox mode (avibe.tools.sandbox.MODES)
    approval: Literal["auto", "ask"] = "auto"  # avibe.tools.approval
    deny: tuple[str, ...] = ()  # path rules the file tools never write under
    allow_commands: tuple[str, ...] = ()  # shell commands run without asking in ask mode
    allow_writes: tuple[str, ...] = ()  # paths written without asking in ask mode
    serve_url: str = "http://127.0.0.1:8765"  # where `vibe serve` listens; callback URLs start here
    recollection: str = "sections"  # how the checkpoint is shown to the model
    compaction: str = "checkpoint"  # how Vibey makes room (avibe.agent.compaction's registry)
    network: bool = False  # sandboxed commands reach the network (avibe/tools/sandbox.py)
    host_sockets: bool = False  # sandboxed commands reach the host's Unix sockets (avibe/tools/reach.py)
    trusted_projects: tuple[Path, ...] = ()  # resolved; their .avibe/ is read-only in any sandbox
    mcp_servers: tuple[McpServer, ...] = ()  # the MCP servers in force (avibe.config.mcp, docs/mcp.md)
    # what every start says on stderr (one line each, `vibe: ` in front): project values
    # ignored because they would loosen, then the loosened settings in force.
    warnings: tuple[str, ...] = ()
    announcements: tuple[str, ...] = ()
    # What this start remembers of the project's tightening (avibe.tightening), written when a session
    # starts (avibe.cli.terminal.announce); None: nothing new.
    remember: Remembered | None = None

    @property
    def notices(self) -> tuple[str, ...]:
        return (*self.warnings, *self.announcements)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def sessions_dir(self) -> Path:
        """Per-session temporary directories (checkpoint files, F2) and live state live below this."""
        return self.home / "sessions"
