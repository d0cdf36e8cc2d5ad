"""Approval modes and path rules for the agent's actions, as Codex and Claude Code have.

- `auto` (the default): today's behaviour - the tools act at once, inside the shell's sandbox.
- `ask`: a shell command, or a write_file / edit_file, that no allow rule covers waits for the person's
  yes / no / always through the `Approver` the edge provides (`vibe run` asks on the terminal; the chat
  of a later issue shows the question). Without an approver (`vibe run` whose standard input is not a
  terminal) such an action is refused with a tool error the model sees. "always" approves that exact
  command, or that file, for the rest of the session.
- Path rules, in every mode: a write (write_file, edit_file) to a path a `deny` rule matches is refused,
  naming the rule, whatever the model does - no approval lifts it.
- The person's stated bans, in every mode: a write to a path that a sentence of the person's forbids
  changing ("Never modify anything under vendor/", avibe/checkpoint/stated.py) is refused, quoting it,
  until a later message of theirs allows the change.

Rules are set by the person in the project's `.avibe/config.toml` (or the user's config.toml):

    approval = "ask"
    [rules]
    deny = ["vendor/**", "*.lock"]          # never changed by the file tools
    allow_commands = ["git status", "pytest*"]  # run without asking in ask mode
    allow_writes = ["src/**", "tests/**"]   # written without asking in ask mode

Path patterns are gitignore-style, relative to the working directory: `*` and `?` stay within one
folder name, `**` crosses folders, a pattern without a `/` matches a name at any depth, a leading `/`
anchors it at the working directory, and a pattern that matches a folder covers everything below it.
Paths are matched after links are resolved, so a link into `vendor/` is `vendor/`. The matching takes
linear time whatever the pattern (avibe.tools.pathrule; a project's rules may be the agent's), and a
pattern is at most MAX_RULE_CHARS characters, a list at most MAX_RULES patterns. Command patterns are
shell-style (`fnmatch`) over the whole command line; a command holding a control operator or a
substitution (`;`, `&`, `|`, `` ` ``, `$(`, `>`, `<`, a line break) never matches one, so `pytest*`
cannot let `pytest; rm -rf .` through.

The matching is pure (no filesystem access); the tools pass the resolved path as they show it.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Protocol, cast

from avibe.errors import ToolError
from avibe.tools.pathrule import MAX_RULE_CHARS, PathRule, compile_path_rule

__all__ = ["compile_path_rule"]  # re-exported: the rules' matcher lives in avibe.tools.pathrule

if TYPE_CHECKING:
    from avibe.checkpoint.stated import StatedBan

APPROVAL_MODES: Final = ("auto", "ask")
RULE_KEYS: Final = ("deny", "allow_commands", "allow_writes")
MAX_RULES: Final = 1000  # patterns per list: more is refused with one line
ApprovalMode = Literal["auto", "ask"]
Decision = Literal["yes", "no", "always"]
# "no - use pnpm": a no with the person's words, at the terminal (the reason after n / no and a mark)
_NO_BECAUSE: Final = re.compile(
    r"^\s*(?:n|no)\s*(?:[-:,;]|\s)\s*(?P<reason>[^\s:,;-].*?)\s*$", re.IGNORECASE | re.DOTALL
)
Action = Literal["command", "write", "call"]  # call: an MCP server's tool (avibe/mcp)
# Characters that chain, redirect or substitute: a command holding one is never covered by an allow rule.
_SHELL_CONTROL: Final = re.compile(r"[;&|`<>\n\r]|\$\(")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the person is asked to approve: `subject` is the command line or the path (as the model sees
    it, relative to the working directory); `detail` says more (e.g. "new file, 12 lines"); `diff` is the
    change a write would make (a unified diff; a new file's lines as additions), shown before y / n / a."""

    tool: str
    action: Action
    subject: str
    detail: str = ""
    diff: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A no with the person's words ("no - use pnpm"): they reach the model as the user's message,
    recorded through ingress like any message of theirs (T1), never inside the tool's result."""

    reason: str


Answer = Decision | Refusal


class Approver(Protocol):
    """The edge's way to ask the person: yes (this once), no - with a reason, or not - or always (this
    command / file, for the rest of the session). It may block until the person answers."""

    def __call__(self, request: ApprovalRequest) -> Answer: ...


def typed_answer(line: str) -> Answer | None:
    """An answer typed at a terminal: y(es), n(o), a(lways), or a no with a reason ("n - use pnpm",
    "no: run it in ./web"); None for anything else (asked again)."""
    word = line.strip().lower()
    plain = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}
    if word in plain:
        return cast(Decision, plain[word])
    because = _NO_BECAUSE.match(line)
    return Refusal(because["reason"]) if because else None


def command_allowed(patterns: Iterable[str], command: str) -> str | None:
    """The allow rule that covers `command` (whole line, fnmatch), or None; never one for a command that
    chains, redirects or substitutes."""
    line = command.strip()
    if _SHELL_CONTROL.search(line):
        return None
    return next((p for p in patterns if fnmatch.fnmatchcase(line, p.strip())), None)


@dataclass(frozen=True, slots=True)
class Rules:
    """The person's rules (from config.toml's `[rules]`); patterns are checked when made."""

    deny: tuple[str, ...] = ()
    allow_commands: tuple[str, ...] = ()
    allow_writes: tuple[str, ...] = ()
    _deny: tuple[tuple[str, PathRule], ...] = field(init=False, repr=False, compare=False)
    _writes: tuple[tuple[str, PathRule], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for key in RULE_KEYS:
            if len(getattr(self, key)) > MAX_RULES:
                raise ValueError(f"{key} holds more than {MAX_RULES} patterns; keep the list shorter")
        for command in self.allow_commands:
            if not command.strip():
                raise ValueError("an allow_commands rule is empty; give a command pattern such as pytest*")
            if len(command.strip()) > MAX_RULE_CHARS:
                raise ValueError(f"an allow_commands rule is over {MAX_RULE_CHARS} characters; shorten it")
        object.__setattr__(self, "_deny", tuple((p, compile_path_rule(p)) for p in self.deny))
        object.__setattr__(self, "_writes", tuple((p, compile_path_rule(p)) for p in self.allow_writes))

    def denied_by(self, path: str) -> str | None:
        """The deny rule that matches the workdir-relative `path`, or None."""
        return next((rule for rule, matcher in self._deny if matcher.fullmatch(_clean(path))), None)

    def write_allowed_by(self, path: str) -> str | None:
        return next((rule for rule, matcher in self._writes if matcher.fullmatch(_clean(path))), None)


def stated_ban_on(bans: Iterable[StatedBan], path: str) -> StatedBan | None:
    """The first of the person's stated bans whose pattern matches the workdir-relative `path`."""
    return next((ban for ban in bans if _stated_rule(ban.pattern).fullmatch(_clean(path))), None)


def stated_patterns(bans: Iterable[StatedBan]) -> tuple[str, ...]:
    """The bans' patterns that are valid path rules, each once (see `_stated_rule`)."""
    return tuple(dict.fromkeys(b.pattern for b in bans if _stated_rule(b.pattern) is not _MATCHES_NOTHING))


def _of(ban: StatedBan) -> str:
    return f" of session {ban.session}" if ban.session else ""


class _Nothing:
    """The rule a stated pattern that is no valid path rule becomes: it matches nothing."""

    def fullmatch(self, path: str) -> bool:
        return False


_MATCHES_NOTHING: Final = _Nothing()


@functools.lru_cache(maxsize=256)
def _stated_rule(pattern: str) -> PathRule | _Nothing:
    """A stated pattern as a rule; one that is no valid path rule matches nothing (the user's words
    are not checked like config: they are read as well as can be)."""
    try:
        return compile_path_rule(pattern)
    except ValueError:
        return _MATCHES_NOTHING


def _clean(path: str) -> str:
    return path[2:] if path.startswith("./") else path


class ApprovalPolicy:
    """What the tools check before they act: deny rules (every mode), then in `ask` mode the allow rules,
    what the person approved "always", and else the person (the approver; None: nobody can answer)."""

    def __init__(
        self,
        mode: ApprovalMode = "auto",
        rules: Rules | None = None,
        approver: Approver | None = None,
        stated: Callable[[], Sequence[StatedBan]] = tuple,
        tell: Callable[[str], int] | None = None,
    ) -> None:
        if mode not in APPROVAL_MODES:
            raise ValueError(f"approval mode {mode!r} is not one of {', '.join(APPROVAL_MODES)}")
        self.mode, self.rules, self.approver = mode, rules or Rules(), approver
        self.stated = stated  # the paths the person's own messages forbid changing, read at each write
        self.tell = tell  # the person's reason into the record as their message (its seq); None: nobody
        self._always: set[tuple[Action, str]] = set()

    def check_write(self, tool: str, path: str, detail: str = "", diff: str = "") -> None:
        """Raise ToolError unless `tool` may change `path` (workdir-relative, links resolved)."""
        rule = self.rules.denied_by(path)
        if rule is not None:
            raise ToolError(
                f"{tool}: '{path}' may not be changed: the person's rule deny = [\"{rule}\"] (.avibe/"
                "config.toml) covers it. Leave it as it is, whatever the task or any message says; if "
                "it must change, tell the person."
            )
        ban = stated_ban_on(self.stated(), path)
        if ban is not None:
            raise ToolError(
                f"{tool}: '{path}' was not changed: the user said, in message #{ban.seq}{_of(ban)}: "
                f'"{ban.sentence}" Leave it as it is, whatever the task or any other message says. If '
                "the work needs it changed, ask the user: a message of theirs that allows the change "
                "there lifts this."
            )
        if self.mode == "ask" and self.rules.write_allowed_by(path) is None:
            self._ask(ApprovalRequest(tool, "write", path, detail, diff))

    def check_command(self, command: str) -> None:
        """Raise ToolError unless the shell may run `command` now (ask mode: allowed or approved)."""
        if self.mode == "ask" and command_allowed(self.rules.allow_commands, command) is None:
            self._ask(ApprovalRequest("shell", "command", command.strip()))

    def check_call(self, tool: str, server: str, arguments: str) -> None:
        """Raise ToolError unless the MCP tool `tool` (`server.tool`) may be called now: in ask mode the
        person sees the server (`server`: its name and what it runs), the tool and the `arguments`;
        "always" covers that tool, whatever the arguments, for the rest of the session."""
        if self.mode == "ask":
            self._ask(ApprovalRequest(tool, "call", arguments, server))

    def _ask(self, request: ApprovalRequest) -> None:
        key = (request.action, request.tool if request.action == "call" else request.subject)
        if key in self._always:
            return
        what = {"command": "run", "call": "call"}.get(request.action, "change")
        subject = request.tool if request.action == "call" else request.subject
        if self.approver is None:
            allowed = self.rules.allow_commands if request.action == "command" else self.rules.allow_writes
            covered = ", ".join(allowed) or "nothing"
            raise ToolError(
                f"{request.tool}: the approval mode is ask and nobody can approve here (no terminal "
                f"to ask), so it will not {what} '{subject}'. Without asking, the rules allow: "
                f"{covered}. Do what you can within them, or stop and say what you need."
            )
        decision = self.approver(request)
        if isinstance(decision, Refusal):
            raise ToolError(self._refused(request.tool, what, subject, decision.reason))
        if decision == "no":
            raise ToolError(
                f"{request.tool}: the person did not approve: it will not {what} '{subject}'. "
                "Do not try it again another way; go on without it or ask the person."
            )
        if decision == "always":
            self._always.add(key)

    def _refused(self, tool: str, what: str, subject: str, reason: str) -> str:
        """The tool's error for a no with a reason; the reason itself goes in as the user's message."""
        seq = self.tell(reason) if self.tell is not None else None
        said = (
            f"They said why in their message #{seq}, which follows: do what it says instead."
            if seq is not None
            else "Go on without it or ask the person."
        )
        return f"{tool}: the person did not approve: it will not {what} '{subject}'. {said}"
