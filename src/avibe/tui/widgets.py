"""The chat's widgets: the input box (multi-line, history, paste), the lines of the conversation, a tool
call as one line that expands to its arguments and output, and the approval question."""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar, Final

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Collapsible, Static, TextArea

from avibe.tools.approval import ApprovalRequest, Decision

NEWLINE_KEYS: Final = frozenset({"ctrl+j", "shift+enter", "alt+enter", "ctrl+enter"})
OUTPUT_SHOWN: Final = 4_000  # characters of a tool's output a tool line expands to


def safe(text: str) -> Text:
    """Text as written, never read as markup or escape sequences (a model's text is shown, not obeyed)."""
    cleaned = "".join(ch if ch in "\n\t" or ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return Text(cleaned)


class ChatInput(TextArea):
    """Enter sends; Ctrl-J (or Shift/Alt-Enter where the terminal tells them apart) starts a new line;
    pasted text keeps its lines; Up on the first line and Down on the last walk the history."""

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, compact=True, **kwargs)
        self.sent: list[str] = []
        self._back = 0  # 0: the text being written; n: the n-th latest sent message
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._submit()
        elif event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
        elif self._history_key(event.key):
            event.stop()
            event.prevent_default()
        else:
            await super()._on_key(event)

    def _history_key(self, key: str) -> bool:
        """Up on the first line, Down on the last: the previous / next sent message."""
        row = self.cursor_location[0]
        if key == "up" and row == 0:
            return self._walk(1)
        if key == "down" and row == self.document.line_count - 1:
            return self._walk(-1)
        return False

    def _submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._back, self._draft = 0, ""
        self.clear()
        self.post_message(self.Submitted(text))

    def _walk(self, step: int) -> bool:
        """Move `step` back (1) or forward (-1) in the history; False when there is nowhere to go."""
        target = self._back + step
        if target < 0 or target > len(self.sent):
            return False
        if self._back == 0:
            self._draft = self.text
        self._back = target
        self.text = self._draft if target == 0 else self.sent[-target]
        self.move_cursor(self.document.end if step < 0 else (0, len(self.document.get_line(0))))
        return True


class Bubble(Static):
    """One line of the conversation; its class says whose (user, vibey, input, error, notice, output)."""

    def __init__(self, text: str, kind: str, *, prefix: str = "") -> None:
        super().__init__(classes=kind)
        self.kind, self.prefix, self.body = kind, prefix, text
        self._render_body()

    def _render_body(self) -> None:
        shown = Text(self.prefix, style="bold") if self.prefix else Text()
        shown.append_text(safe(self.body))
        self.update(shown)

    def add(self, piece: str) -> None:
        """A streamed piece of the reply."""
        self.body += piece
        self._render_body()


class InputBubble(Static):
    """An input the person did not type: its harness-written source tag first, then the text (T1)."""

    def __init__(self, tag: str, text: str) -> None:
        shown = Text(tag, style="bold")
        shown.append("\n")
        shown.append_text(safe(text))
        super().__init__(shown, classes="input")


class ToolLine(Collapsible):
    """A tool call: one line; expanded, its arguments and (once it ran) its output."""

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        args = json.dumps(arguments, ensure_ascii=False)
        brief = args if len(args) <= 100 else args[:99] + "…"
        self.args = Static(safe(json.dumps(arguments, ensure_ascii=False, indent=2)), classes="args")
        self.output = Static(Text("(running)", style="dim"), classes="output")
        super().__init__(self.args, self.output, title=f"⚙ {name} {brief}", collapsed=True, classes="tool")
        self.call_id, self.tool = call_id, name
        self.brief = brief

    def finished(self, output: str, is_error: bool) -> None:
        cut = output if len(output) <= OUTPUT_SHOWN else output[:OUTPUT_SHOWN] + "\n… (cut)"
        self.output.update(safe(cut or "(no output)"))
        if is_error:
            self.title = f"✗ {self.tool} {self.brief}"
            self.add_class("failed")


class ApprovalBar(Widget, can_focus=True):
    """Ask mode: the action waiting for the person's yes / no / always."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('yes')", "yes"),
        Binding("n", "answer('no')", "no"),
        Binding("a", "answer('always')", "always"),
        Binding("escape", "answer('no')", "no", show=False),
    ]

    class Answered(Message):
        def __init__(self, decision: Decision) -> None:
            super().__init__()
            self.decision = decision

    SETTLE_S: ClassVar[float] = (
        0.5  # keys typed this soon after the question appears were meant for the input
    )

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(classes="approval")
        self.request = request
        self.asked_at = time.monotonic()

    def render(self) -> Text:
        r = self.request
        verb = "run" if r.action == "command" else "change"
        detail = f" ({r.detail})" if r.detail else ""
        text = Text(f"{r.tool} wants to {verb}{detail}:\n", style="bold")
        text.append_text(safe(r.subject))
        text.append("\nallow? [y]es / [n]o / [a]lways (this session)", style="bold")
        return text

    def action_answer(self, decision: Decision) -> None:
        if time.monotonic() - self.asked_at >= self.SETTLE_S:
            self.post_message(self.Answered(decision))
