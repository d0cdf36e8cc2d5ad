"""The chat's widgets: the input box (multi-line, history, paste), the lines of the conversation, a tool
call as one line that expands to its arguments and output, and the approval question."""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar, Final

from markdown_it import MarkdownIt
from rich.console import RenderableType
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.widgets import Collapsible, Static, TextArea

from avibe.record.display import shown
from avibe.record.sources import frame_tag_lines
from avibe.tools.approval import Answer, ApprovalRequest, Decision

NEWLINE_KEYS: Final = frozenset({"ctrl+j", "shift+enter", "alt+enter", "ctrl+enter"})
OUTPUT_SHOWN: Final = 4_000  # characters of a tool's output a tool line expands to
REASON_SHOWN: Final = 80  # characters of a failed tool's reason on its one line
DIFF_SHOWN: Final = 16  # lines of a write's diff the approval question shows
CODE_THEME: Final = "monokai"  # code blocks in replies: a dark theme, like the chat's


def safe(text: str) -> Text:
    """Text as written, never read as markup, and with every control, format and invisible character
    shown as its escape (`avibe.record.display.shown`, as on the CLI): a model's text is shown, not
    obeyed, and hides nothing."""
    return Text(shown(text))


def title_safe(text: str) -> str:
    """Text for a widget title, which Textual reads as markup: escaped for both, on one line."""
    return escape(shown(text, lines=False))


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


class ChatLog(VerticalScroll):
    """The conversation. It follows its end while lines are added and a reply grows, until the person
    scrolls up (wheel, PageUp, the scrollbar); it then stays where they read, and follows again once they
    are back at the end. `Away` tells the app when that changes (it shows "new messages below")."""

    class Away(Message):
        def __init__(self, away: bool) -> None:
            super().__init__()
            self.away = away

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.away = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Only the person moves the view up: what the chat does is scroll down to the end (a shrinking
        # conversation clamps the position to the end too).
        if new_value >= self.max_scroll_y:
            self._set_away(False)
        elif new_value < old_value:
            self._set_away(True)

    def _set_away(self, away: bool) -> None:
        if away != self.away:
            self.away = away
            self.post_message(self.Away(away))

    def on_resize(self, event: events.Resize) -> None:
        self.follow()  # the terminal changed size

    def watch_virtual_size(self, size: Size) -> None:
        self.follow()  # a line was added, a reply grew or was rendered again

    def clear(self) -> None:
        """Another session: the conversation starts empty, and followed."""
        self.remove_children()
        self._set_away(False)

    def follow(self) -> None:
        """Something was added or grew: show the end, unless the person scrolled up to read."""
        if not self.away:
            self.scroll_end(animate=False, immediate=False)


class Bubble(Static):
    """One line of the conversation; its class says whose (user, vibey, input, error, notice, output).

    A reply (`markdown=True`) is rendered as markdown - headings, lists, tables, code blocks with their
    syntax highlighted - beside its writer's name; else the text is shown as written. While a reply
    streams, it is re-rendered at most every `RENDER_EVERY_S` (parsing all of a long reply at every token
    would make typing wait), and at once when it is complete."""

    RENDER_EVERY_S: ClassVar[float] = 0.05

    def __init__(self, text: str, kind: str, *, prefix: str = "", markdown: bool = False) -> None:
        super().__init__(classes=kind)
        self.kind, self.prefix, self.body, self.markdown = kind, prefix, text, markdown
        self._due = False  # a re-render is scheduled
        self._render_body()

    def _render_body(self) -> None:
        self._due = False
        if self.markdown:
            self.update(markdown_reply(self.prefix, self.body))
            return
        shown = Text(self.prefix, style="bold") if self.prefix else Text()
        shown.append_text(safe(self.body))
        self.update(shown)

    def add(self, piece: str) -> None:
        """A streamed piece of the reply."""
        self.body += piece
        if not self.markdown:
            self._render_body()
        elif not self._due:
            self._due = True
            self.set_timer(self.RENDER_EVERY_S, self._render_body)

    def complete(self) -> None:
        """The reply is whole: render what a pending re-render would."""
        if self._due:
            self._render_body()

    def set_markdown(self, markdown: bool) -> None:
        """Plain text or rendered markdown (`/plain` toggles)."""
        if markdown != self.markdown:
            self.markdown = markdown
            self._render_body()


def markdown_reply(prefix: str, body: str) -> RenderableType:
    """The writer's name, and beside it the reply rendered as markdown (a model's text is rendered, never
    read as console markup; control characters are shown escaped, as in `safe`)."""
    grid = Table.grid(padding=0, expand=True)
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text(prefix, style="bold"), ReplyMarkdown(safe(body).plain))
    return grid


class ReplyMarkdown(Markdown):
    """Rich's markdown, except that a line break in a paragraph stays a line break: models write lines
    meant as lines (an address, a short list without bullets), as the other agents' terminals show. A
    link shows its address after its text instead of hiding it behind the words (the model wrote both)."""

    PARSER: ClassVar[MarkdownIt] = MarkdownIt().enable(["strikethrough", "table"])

    def __init__(self, markup: str) -> None:
        super().__init__("", code_theme=CODE_THEME, hyperlinks=False)
        self.markup = markup
        self.parsed = self.PARSER.parse(markup)
        for block in self.parsed:
            for token in block.children or ():
                if token.type == "softbreak":
                    token.type = "hardbreak"


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
        brief = title_safe(args if len(args) <= 100 else args[:99] + "…")
        self.args = Static(safe(json.dumps(arguments, ensure_ascii=False, indent=2)), classes="args")
        self.output = Static(Text("(running)", style="dim"), classes="output")
        tool = title_safe(name)
        super().__init__(self.args, self.output, title=f"⚙ {tool} {brief}", collapsed=True, classes="tool")
        self.call_id, self.tool = call_id, tool
        self.brief = brief

    def finished(self, output: str, is_error: bool) -> None:
        cut = output if len(output) <= OUTPUT_SHOWN else output[:OUTPUT_SHOWN] + "\n… (cut)"
        self.output.update(safe(frame_tag_lines(cut) or "(no output)"))  # no line passes for a note
        if is_error:
            self.title = f"✗ {self.tool} {self.brief}"
            self.add_class("failed")

    def failed_because(self, reason: str) -> None:
        """An external agent's tool failed: the line says why - its first line, cut, behind the frame
        mark (the tool's words, not the person's) - and expanded, the whole reason."""
        first = reason.strip().splitlines()[0] if reason.strip() else ""
        cut = first if len(first) <= REASON_SHOWN else first[: REASON_SHOWN - 1] + "…"
        self.output.update(safe(reason))
        self.title = f"✗ {self.tool} {self.brief} │ {title_safe(cut)}"
        self.add_class("failed")


def diff_text(diff: str, limit: int) -> Text:
    """A unified diff, coloured: additions green, removals red, file and hunk lines dim; at most `limit`
    lines (the question must stay on the screen), then how many more."""
    lines = diff.splitlines()
    shown = Text()
    for number, line in enumerate(lines[:limit]):
        piece = safe(line)
        if line.startswith(("@@", "+++", "---")):
            piece.stylize("dim")
        elif line.startswith(("+", "-")):
            piece.stylize("green" if line.startswith("+") else "red")
        shown.append("\n" if number else "")
        shown.append_text(piece)
    if len(lines) > limit:
        shown.append(f"\n… {len(lines) - limit} more lines", style="dim")
    return shown


class ApprovalBar(Vertical, can_focus=True):
    """Ask mode: the action waiting for the person's yes / no / always. The whole command (and the diff)
    is shown, scrollable when it is taller than the room it has, under a line saying how many lines it
    has; y and a are taken only once every line has been on the screen (scrolled to the end, or it fits):
    before that the question line says how much is still hidden. n and Esc answer at any time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('yes')", "yes"),
        Binding("n", "answer('no')", "no"),
        Binding("a", "answer('always')", "always"),
        Binding("r", "reason", "no, saying why"),  # the person's words go to the model as their message
        Binding("escape", "answer('no')", "no", show=False),
        Binding("down", "scroll_body('down')", "scroll", show=False),
        Binding("up", "scroll_body('up')", "scroll", show=False),
        Binding("pagedown", "scroll_body('page_down')", "scroll", show=False),
        Binding("pageup", "scroll_body('page_up')", "scroll", show=False),
        Binding("end", "scroll_body('end')", "scroll", show=False),
        Binding("home", "scroll_body('home')", "scroll", show=False),
        Binding("space", "scroll_body('page_down')", "scroll", show=False),
    ]
    DEFAULT_CSS = """
    ApprovalBar { height: auto; }
    ApprovalBar > .approval-body { height: auto; max-height: 60vh; scrollbar-size-vertical: 1; }
    ApprovalBar > .approval-ask { height: 1; text-style: bold; }
    """

    class Answered(Message):
        def __init__(self, decision: Answer) -> None:
            super().__init__()
            self.decision = decision

    class Reasoning(Message):
        """r: a no with the person's words; the app takes them from its input (avibe.tools.approval)."""

    SETTLE_S: ClassVar[float] = (
        0.5  # keys typed this soon after the question appears were meant for the input
    )
    ALLOW: ClassVar[str] = "allow? [y]es / [n]o / [r] no, saying what to do instead / [a]lways (this session)"

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(classes="approval")
        self.request = request
        self.asked_at = time.monotonic()
        self.lines = len(request.subject.splitlines()) or 1  # the command's (or the path's) lines
        self.question = question_text(request)
        self.body = VerticalScroll(Static(self.question), classes="approval-body", can_focus=False)
        self.ask = Static(Text(""), classes="approval-ask")
        self.seen_end = False  # every line has been on the screen
        self.reasoning = False  # r was pressed: the input's next message is the no's reason
        verb = {"command": "run", "call": "call"}.get(request.action, "change")
        detail = f" ({request.detail})" if request.detail else ""
        count = f" - {self.lines} lines" if self.lines != 1 else " - 1 line"
        self.header = f"{request.tool} wants to {verb}{detail}{count if verb == 'run' else ''}:"

    def compose(self) -> ComposeResult:
        yield Static(Text(self.header, style="bold"))
        yield self.body
        yield self.ask

    def text(self) -> str:
        """All the question says, as plain text: its header, the command and diff, the question line."""
        return "\n".join([self.header, self.question.plain, str(self.ask.render())])

    def on_mount(self) -> None:
        self.watch(self.body, "scroll_y", lambda _: self._update_ask(), init=False)
        self.call_after_refresh(self._update_ask)

    def on_resize(self) -> None:
        self.call_after_refresh(self._update_ask)

    def hidden_lines(self) -> int:
        """How many lines of the question are below the visible part (before any layout: all of them)."""
        body = self.body
        if body.size.height == 0:
            return self.question.plain.count("\n") + 1
        return max(0, body.virtual_size.height - int(body.scroll_y) - body.size.height)

    def _update_ask(self) -> None:
        hidden = self.hidden_lines()
        if hidden == 0 and self.body.size.height:
            self.seen_end = True
        if self.seen_end:
            self.ask.update(Text(self.ALLOW))
        else:
            self.ask.update(
                Text(f"{hidden} more lines below: scroll to the end (↓ PgDn End) to allow; [n]o refuses")
            )

    def action_scroll_body(self, how: str) -> None:
        """Scroll the question: down, up, page_down, page_up, end or home."""
        getattr(self.body, f"scroll_{how}")(animate=False)
        self.call_after_refresh(self._update_ask)

    def action_reason(self) -> None:
        if time.monotonic() - self.asked_at >= self.SETTLE_S:
            self.post_message(self.Reasoning())

    def action_answer(self, decision: Decision) -> None:
        if time.monotonic() - self.asked_at < self.SETTLE_S:
            return
        self._update_ask()
        if decision != "no" and not self.seen_end:
            self.app.bell()  # part of the command was never on the screen: no yes to it
            return
        self.post_message(self.Answered(decision))


def question_text(r: ApprovalRequest) -> Text:
    """What an approval asks about: the whole command (or the path), then the write's diff."""
    text = safe(r.subject)
    if r.diff:
        text.append("\n")
        text.append_text(diff_text(r.diff, DIFF_SHOWN))
    return text
