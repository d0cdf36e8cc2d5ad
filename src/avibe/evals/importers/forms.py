"""The forms an agent writes into the user role itself (N7, T1): a shell command run with `!` and its
output, a slash command, a compaction summary, a system reminder, injected context - skipped, or recorded
as an input of the imported agent when they say what the person did (docs/eval-format.md has the table)."""

from __future__ import annotations

import logging
import re
from typing import Final, Literal

log = logging.getLogger(__name__)


Form = Literal["words", "command", "skip"]


# (opening, ref, what it is, what import does): "command" records an `agent` input whose ref names the
# form, "skip" leaves it out of the record and the replay.
FormRule = tuple[str, str, str, Form]
CLAUDE_FORMS: Final[tuple[FormRule, ...]] = (
    ("<bash-input>", "shell-command", "a shell command the person ran with `!`", "command"),
    ("<bash-stdout>", "shell-output", "the output of a `!` shell command (tool output, A3)", "skip"),
    ("<bash-stderr>", "shell-output", "the output of a `!` shell command (tool output, A3)", "skip"),
    ("<command-name>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<command-message>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<command-args>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<local-command-stdout>", "command-output", "the output of a slash command", "skip"),
    ("<local-command-stderr>", "command-output", "the output of a slash command", "skip"),
    ("<local-command-caveat>", "caveat", "Claude Code's note about local commands", "skip"),
    ("<user-prompt-submit-hook>", "hook-output", "the output of a hook", "skip"),
    ("<task-notification>", "task-notification", "a background task's notification", "command"),
    ("[Request interrupted by user", "interrupted", "Claude Code's interruption marker", "skip"),
    (
        "This session is being continued from a previous conversation",
        "compact-summary",
        "Claude Code's summary of the conversation before a compaction (when `isCompactSummary` is missing)",
        "command",
    ),
)


# Elements Claude Code puts beside the person's text in the same message (a system reminder among them):
# each a text block of its own, or at the start or the end of one; removed by that structure
# (`without_elements`). A text that is nothing but such elements says nothing; one that merely starts
# with an opening tag, with no closing tag after it, is the person's.
_CLAUDE_INLINE: Final = ("system-reminder", "ide_opened_file", "ide_selection", "ide_diagnostics")
CODEX_FORMS: Final[tuple[FormRule, ...]] = (
    ("<user_shell_command>", "shell-command", "a shell command the person ran with `!`", "command"),
    ("<environment_context>", "context", "the working directory, sandbox and approval settings", "skip"),
    ("<user_instructions>", "context", "the person's instructions file, injected by Codex", "skip"),
    ("# AGENTS.md instructions", "context", "AGENTS.md, injected by Codex", "skip"),
    ("<INSTRUCTIONS>", "context", "AGENTS.md, injected by Codex", "skip"),
    ("<turn_aborted>", "interrupted", "Codex's interruption marker", "skip"),
    ("<skill>", "context", "a skill's text, injected by Codex", "skip"),
    ("<subagent_notification>", "notification", "a sub-agent's notification", "skip"),
    ("<collaboration_mode>", "context", "Codex's mode instructions", "skip"),
    (
        "<user_action>",
        "user-action",
        "what the person did in Codex's interface (a review), as Codex tells it",
        "command",
    ),
)


def form_of(forms: tuple[FormRule, ...], text: str) -> tuple[str, Form]:
    """The form of a user-role text by its opening element (case-insensitive): its ref and what import
    does with it; ("", "words") for the person's own words."""
    head = text.lstrip().casefold()
    for opening, ref, _, action in forms:
        if head.startswith(opening.casefold()):
            return ref, action
    return "", "words"


def element(text: str, name: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return found.group(1).strip() if found else ""


def _leading_element(text: str) -> str:
    """The name of the element `text` opens with (after whitespace), or ""."""
    head = text.lstrip()
    return next((name for name in _CLAUDE_INLINE if head.startswith(f"<{name}>")), "")


def without_elements(text: str) -> str:
    """A user-role text without the elements Claude Code put at its start or end. An element at the
    start runs to the LAST closing tag of its name in the text, one at the end from the FIRST opening tag
    of its name: a reminder quotes file contents, and a `</system-reminder>` inside them must not end it
    early and turn what follows into the person's words (a person's text holding such a tag loses that
    part rather than the agent's text becoming theirs; logged)."""
    rest, cut = text, False
    while name := _leading_element(rest):
        head = rest.lstrip()
        close = head.rfind(f"</{name}>")
        if close < 0:
            break  # an opening tag the person typed: their words
        if head.find(f"</{name}>") != close:
            log.warning("a <%s> element quotes its closing tag; it runs to the last one", name)
        rest, cut = head[close + len(name) + 3 :], True
    tail = rest.rstrip()
    for name in _CLAUDE_INLINE:
        if tail.endswith(f"</{name}>") and (start := tail.find(f"<{name}>")) >= 0:
            rest, cut = tail[:start].rstrip(), True
            tail = rest
    return rest.lstrip() if cut else text


def claude_command(text: str, ref: str) -> str:
    """What the person did, as they typed it: `! git status`, `/model opus`; a notification as it is."""
    if ref == "shell-command":
        return f"! {element(text, 'bash-input')}"
    if ref == "slash-command":
        name = element(text, "command-name") or f"/{element(text, 'command-message')}"
        return f"{name} {element(text, 'command-args')}".strip()
    return text.strip()


# Claude Code's answer to a tool call the person rejected at its permission prompt, when they typed why:
# "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file
# edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n<words>"
# (the parenthesis is missing in some versions). The words after it are the person's (often a rule:
# "use our wrapper script instead"); the rest of the result is Claude Code's.
_REJECTED: Final = re.compile(
    r"The user doesn't want to proceed with this tool use\. The tool use was rejected\b.{0,200}?"
    r"To tell you how to proceed, the user said:[ \t]*\n?",
    re.DOTALL,
)
# What Claude Code itself writes after that opening when the person picks "clarify" on a question it
# asked (AskUserQuestion): its own instructions, not the person's words.
_CLAUDE_AFTER_REJECTION: Final = ("The user wants to clarify these questions.",)


def rejection_reason(result: str) -> str:
    """The words the person typed when rejecting a tool call, read from the call's result; "" when the
    result is not such a rejection or holds no words of theirs."""
    match = _REJECTED.match(result.lstrip())
    if match is None:
        return ""
    words = result.lstrip()[match.end() :].strip()
    return "" if words.startswith(_CLAUDE_AFTER_REJECTION) else words
