"""The chat's slash commands: parsed here, carried out by the app. The ones that read the record are the
`vibe` commands themselves, run in process by the CLI (`Cli`): `/log` takes exactly `vibe log`'s filters,
`/checkpoints` `vibe checkpoints`' options; both default to the chat's session."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from avibe.agent.compaction import DEFAULT_COMPACTION, compaction_names
from avibe.record.agents import agent_names, listed


class Cli(Protocol):
    """What the CLI does for the chat (`avibe.cli.chat` provides it; the chat imports no CLI code)."""

    def run(self, args: list[str]) -> str:
        """Run `vibe ARGS` in this process; what it printed (a failure is its one `vibe: ...` line)."""
        ...

    def check_model(self, name: str) -> str | None:
        """None when model `name` can run here; else what is wrong (checked before anything loads)."""
        ...

    def check_agent(self, name: str) -> str | None:
        """None when agent `name` can run here (Vibey, or an installed external agent); else why not."""
        ...

    def model_names(self) -> tuple[str, ...]:
        """The models `/model NAME` offers on Tab: the configured one and the installed embedded ones."""
        ...


HELP: Final = f"""Commands
  /new                  start a new session (what Vibey asks for when its context is too full to go on)
  /sessions             the sessions: title, agent, when last active
  /rename TITLE         give this session a title (/sessions shows it)
  /resume [ID]          resume a session (ID or its start; default: the latest other one of this folder)
  /model [NAME]         show the model, or go on in this session with another one
  /agent [NAME]         who works in this session and the agents found, or go on with another:
                        {listed(agent_names(), "or")} (the others keep their own context)
  /log [FILTERS]        search this session's record - vibe log's filters: --user --kind K --grep TEXT
                        --from-seq A --to-seq B --since T --until T --limit N (--session S for another)
  /checkpoints [--show N | --diff N M]
                        this session's checkpoints: list, one whole (mind, memo, scene), diff two minds
  /compaction [NAME]    how Vibey makes room when the context fills (by default {DEFAULT_COMPACTION}):
                        {listed(compaction_names(), "or")}
  /compact [FOCUS]      make room now (a checkpoint, or the compaction in use); FOCUS: what to keep,
                        as your own words
  /undo                 revert the file changes of the last turn (what the write and edit tools did)
  /skills               the skills Vibey can load
  /mcp                  the MCP servers: started or not (and why), their tools, what they cost in tokens
  /plain                replies as written, or (again) rendered as markdown
  /help                 this list;  /quit  leave (the session stays resumable)
Keys
  Enter send · Ctrl-J new line (or Shift/Alt-Enter) · Up/Down history
  Tab complete a /command or its argument (/model NAME, /compaction NAME)
  Ctrl-C cancel the running step, twice when idle quit · y / n / a answer an approval
  click a tool line to see its arguments and output
  PageUp / PageDown scroll the conversation; scrolled up, it stays put - PageDown to the end follows again"""

NAMES: Final = (
    "new", "sessions", "rename", "resume", "model", "agent", "compaction", "compact", "undo", "log",
    "checkpoints", "skills", "mcp", "plain", "help", "quit", "exit",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...]


class CommandError(ValueError):
    """A slash command that cannot be read; the message says why."""


def parse(text: str) -> Command:
    """`/log --grep "a b"` -> Command("log", ("--grep", "a b")); shell-style quoting."""
    try:
        words = shlex.split(text.strip()[1:])
    except ValueError as exc:
        raise CommandError(f"cannot read {text.strip()!r}: {exc}") from None
    if not words:
        raise CommandError("an empty command; /help lists them")
    name = words[0].lower()
    if name not in NAMES:
        raise CommandError(f"unknown command /{name}; /help lists them")
    return Command(name, tuple(words[1:]))


def complete(text: str, arguments: Mapping[str, Sequence[str]] | None = None) -> tuple[str, tuple[str, ...]]:
    """Tab on the input: a slash command's name completed - `/se` -> `/sessions ` when one name fits,
    else as far as the names that fit agree (`/r` -> `/re`) - and the names that fit; then its one
    argument from `arguments[name]` (`/model ` -> the models, `/compaction tr` -> `/compaction truncate `);
    `text` unchanged (and none) when it is neither."""
    if not text.startswith("/") or text.startswith("//"):
        return text, ()
    name, space, typed_arg = text[1:].partition(" ")
    if space:
        choices = (arguments or {}).get(name.lower(), ())
        if not choices or " " in typed_arg:  # one argument, typed as a single word
            return text, ()
        completed, fits = _extend(typed_arg, tuple(dict.fromkeys(choices)))
        return f"/{name} {completed}", fits
    if any(c.isspace() for c in text):
        return text, ()
    completed, fits = _extend(name.lower(), NAMES)
    return f"/{completed if len(completed) > len(name) else name}", fits


def _extend(typed: str, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """`typed` completed among `names`: the one that fits and a space, else as far as those that fit agree
    (`typed` itself when they agree no further); and the names that fit."""
    fits = tuple(name for name in names if name.startswith(typed))
    if len(fits) == 1:
        return f"{fits[0]} ", fits
    common = _shared_start(fits) if fits else typed
    return (common if len(common) > len(typed) else typed), fits


def arguments(cli: Cli, current_model: str) -> dict[str, tuple[str, ...]]:
    """What Tab offers after `/model ` (the configured and installed models, and the one in use) and
    `/compaction ` (the compactors by name)."""
    return {"model": (current_model, *cli.model_names()), "compaction": compaction_names()}


def _shared_start(names: tuple[str, ...]) -> str:
    """The longest start all `names` share."""
    first, last = min(names), max(names)  # what the extremes share, all share
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]


def with_session(args: tuple[str, ...], session_id: str | None) -> list[str]:
    """The command's arguments, with `--session` set to the chat's session unless they name one."""
    named = any(a in ("--session", "-s") or a.startswith("--session=") for a in args)
    return list(args) if named or session_id is None else ["--session", session_id, *args]
