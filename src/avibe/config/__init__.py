"""Settings: one object, read once at the edge (STYLE 9). Every field is documented in docs/configuration.md.

Sources, first wins: the environment (AVIBE_*), the project's `.avibe/config.toml` (in the current
directory), the user's `config.toml` in the platform's user config dir (`~/.config/avibe/config.toml`),
then the defaults. Trust comes from outside the workdir: the project's file lives where
the agent can write, so it may only tighten - a stricter sandbox (read-only < workspace-write <
full-access), ask instead of auto, more deny rules, a smaller model_window, an allow list the user's
settings already cover - unless the user's own file lists the project (resolved) in
`trusted_projects = ["/abs/path", ...]`; then it applies in full. A project value that would loosen is
ignored and named in `Settings.warnings`; every loosened setting in force is in `Settings.announcements`
(the CLI prints both at every start). What an untrusted project's file tightened is remembered in Avibe's
home and stays in force when the file goes, breaks or loosens (avibe.tightening). The files use the
field names below as keys (`user` for AVIBE_USER), e.g. `model = "anthropic/claude-sonnet-4-5"`. Read
with pydantic-settings; every bad value is a ConfigError that names the variable or the file and says what
to set.

| field         | environment              | default                                            |
|---------------|--------------------------|----------------------------------------------------|
| home          | AVIBE_HOME               | the platform's user data dir (platformdirs)        |
| database_url  | AVIBE_DATABASE_URL       | sqlite:///<home>/avibe.db (WAL)                    |
| model         | AVIBE_MODEL              | embedded-1.5b (Qwen2.5-Coder-1.5B on llama.cpp)     |
| user_name     | AVIBE_USER               | the login name                                     |
| model_cache   | AVIBE_MODEL_CACHE        | the platform's user cache dir /models (shared by    |
|               |                          | every AVIBE_HOME, so tests with a temp home reuse it)|
| model_window  | AVIBE_MODEL_WINDOW       | none: the window from the model map; set it for a   |
|               |                          | model the map lacks (an Ollama/vLLM server) or to   |
|               |                          | use less than the full window                       |
| sandbox       | AVIBE_SANDBOX            | workspace-write; read-only, full-access (opt-in:    |
|               |                          | no sandbox); see avibe/tools/sandbox.py             |
| approval      | AVIBE_APPROVAL           | auto; ask: shell commands and writes no allow rule  |
|               |                          | covers wait for the person (avibe/tools/approval.py)|
| serve_url     | AVIBE_SERVE_URL          | http://127.0.0.1:8765 (where `vibe serve` listens)  |
| recollection  | AVIBE_RECOLLECTION       | sections; rules-last, plain: how the checkpoint is  |
|               |                          | shown to the model (avibe/context/assemble.py); a   |
|               |                          | project may set it (it changes no content, no trust)|
| compaction    | AVIBE_COMPACTION         | checkpoint; handoff, rewrite, anchored, mask,       |
|               |                          | truncate, full: how Vibey makes room when the view  |
|               |                          | outgrows the window (avibe/agent/compaction/)       |
| network       | AVIBE_NETWORK            | off: sandboxed commands have no network, loopback   |
|               |                          | included; on (yours only: a project cannot open it) |
| host_sockets  | AVIBE_HOST_SOCKETS       | off: /run, $XDG_RUNTIME_DIR, the ssh-agent's socket |
|               |                          | are covered in the sandbox; on (yours only)          |
| deny, allow_commands, allow_writes | the `[rules]` table of a config.toml | none |
| trusted_projects | - (the user's config.toml only) | none: no project config loosens anything     |
| mcp           | - (`[mcp.servers.NAME]` tables in a config.toml) | none; a project's only when trusted |
|               |                          | (avibe.config.mcp, docs/mcp.md)                     |

`[rules]` (e.g. `deny = ["vendor/**"]`): the file tools never change a path a deny rule matches; the
deny rules of every file add up (a rule only ever refuses more), while `allow_commands` and
`allow_writes` follow first-wins like every other setting (a project's list within the trust rule above).
`trusted_projects` is read from the user's file only.

The package: `settings` (the Settings object), `values` (each value checked and parsed, the defaults,
which of two values is stricter), `layers` (one source's raw values: the environment or a config file),
`trust` (the sources layered, the trust rule, the record of a project's tightening), `announce` (the
loosened settings in force, in words). Import from `avibe.config` itself: the modules are its inside.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from avibe.config.announce import announcements
from avibe.config.layers import (
    MAX_DEPTH,
    PROJECT_CONFIG,
    PROJECT_CONFIG_MAX_BYTES,
    checked_layer,
    user_config_file,
)
from avibe.config.mcp import mcp_servers
from avibe.config.settings import Settings
from avibe.config.trust import RULE_KEYS, TRUST_KEY, TRUSTED_ONLY, Sources, trusted_folders
from avibe.config.values import (
    APPROVAL_MODES,
    DEFAULT_MODEL,
    DEFAULT_SERVE_URL,
    LOOPBACK_HOSTS,
    MAX_WINDOW,
    MIN_WINDOW,
    RECOLLECTION_RENDERINGS,
    SANDBOX_MODES,
    any_rendering,
    default_cache,
    default_home,
    login_name,
    masked_url,
    parse_approval,
    parse_compaction,
    parse_database_url,
    parse_folder,
    parse_recollection,
    parse_sandbox,
    parse_serve_url,
    parse_switch,
    parse_text,
    parse_window,
    smaller_window,
    stricter_approval,
    stricter_sandbox,
    stricter_switch,
)
from avibe.tightening import Tightening

__all__ = [
    "APPROVAL_MODES",
    "DEFAULT_MODEL",
    "DEFAULT_SERVE_URL",
    "LOOPBACK_HOSTS",
    "MAX_DEPTH",
    "MAX_WINDOW",
    "MIN_WINDOW",
    "PROJECT_CONFIG",
    "PROJECT_CONFIG_MAX_BYTES",
    "RECOLLECTION_RENDERINGS",
    "RULE_KEYS",
    "SANDBOX_MODES",
    "TRUSTED_ONLY",
    "TRUST_KEY",
    "Settings",
    "load_settings",
    "masked_url",
    "own_home",
    "user_config_file",
]


def own_home(env: Mapping[str, str] | None = None, *, user_config: Path | None = None) -> Path:
    """Avibe's home as the environment or the user's own config sets it, never a project's: where the
    record of a project's tightening lives, found even when that file or the record is broken."""
    layers = (
        checked_layer(os.environ if env is None else env, None),
        checked_layer({}, user_config_file() if user_config is None else user_config),
    )
    layer = next((layer for layer in layers if "home" in layer.values), None)
    if layer is None:
        return default_home()
    return parse_folder(layer.values["home"], layer.where("home"), default_home())


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    project_dir: Path | None = None,
    user_config: Path | None = None,
) -> Settings:
    """Read the settings (environment, then the project's and the user's config.toml); raise ConfigError
    naming the bad variable or file. `env` replaces os.environ (tests); `project_dir` the current
    directory; `user_config` the user's config file. Nothing is created or written here: what a project
    tightened is read from its record in the home, and the record this start leaves is `remember`
    (written where a session starts, avibe.cli.terminal.announce).

    The project's config may only tighten, unless the user's config lists the project
    in `trusted_projects`; what it tried to loosen is named in `warnings`, and every loosened setting in
    force in `announcements`."""
    sources = Sources.read(os.environ if env is None else env, project_dir, user_config)
    home = parse_folder(*sources.raw("home"), default_home())
    database_url, where = sources.raw("database_url")
    model, model_where = sources.raw("model")
    user, user_where = sources.raw("user")
    cache, cache_where = sources.raw("model_cache")
    serve_url, serve_where = sources.raw("serve_url")
    sandbox = sources.tightened("sandbox", parse_sandbox, stricter_sandbox)
    mine_approval = parse_approval(*sources.mine("approval"))
    approval = sources.tightened("approval", parse_approval, stricter_approval)
    window = sources.tightened("model_window", parse_window, smaller_window)
    in_force = Tightening(sandbox, approval, window, **sources.rules(mine_approval))
    held, remember = sources.held(home, in_force)  # what the project tightened before stays
    settings = Settings(
        home=home,
        database_url=parse_database_url(database_url, where, home),
        model=(parse_text(model, model_where) or "").strip() or DEFAULT_MODEL,
        user_name=(parse_text(user, user_where) or "").strip() or login_name(),
        model_cache=parse_folder(cache, cache_where, default_cache()),
        model_window=held.model_window,
        sandbox=held.sandbox or sandbox,
        approval="ask" if held.approval == "ask" else "auto",
        deny=held.deny,
        allow_commands=held.allow_commands or (),
        allow_writes=held.allow_writes or (),
        serve_url=parse_serve_url(serve_url, serve_where),
        recollection=sources.tightened("recollection", parse_recollection, any_rendering),
        # a project may pick it: every compactor keeps the record whole and falls back as the checkpoint does
        compaction=sources.tightened("compaction", parse_compaction, any_rendering),
        remember=remember,
        network=sources.tightened("network", parse_switch, stricter_switch),
        host_sockets=sources.tightened("host_sockets", parse_switch, stricter_switch),
        trusted_projects=tuple(trusted_folders(sources.user)),
        mcp_servers=mcp_servers(sources),
    )
    return replace(settings, warnings=tuple(sources.warnings), announcements=announcements(sources, settings))
