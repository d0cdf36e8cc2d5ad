"""The embedded model's output: the grammar it is bound to (one branch per tool and a final answer), its
reply parsed back into an answer or a tool call, and what of it may be shown while it streams
(`shown_text`, `_TextFeed`). See `avibe.providers.embedded` for why each choice was made."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from avibe.errors import BadResponse
from avibe.record.messages import ToolCall, ToolSpec, cut_answer

log = logging.getLogger(__name__)


def tool_choice_schema(tools: Sequence[ToolSpec], *, strict_arguments: bool = True) -> dict[str, Any]:
    """One branch per tool plus the final-answer branch (the grammar the output is constrained to)."""
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool.name},
                "arguments": tool.parameters if strict_arguments else {"type": "object"},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    answer = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    branches.append({**answer, "additionalProperties": False})
    return {"oneOf": branches}


def parse_tool_choice(raw: str, tools: Sequence[ToolSpec], finish: str) -> tuple[str, tuple[ToolCall, ...]]:
    """Grammar output -> (answer text, tool calls); an answer cut at the output limit -> its text so far,
    marked as cut; other malformed output -> BadResponse with the raw text."""
    try:
        value = _load_json(raw, finish)
    except BadResponse:
        cut = cut_answer(raw) if finish == "length" else None
        if cut is None:
            raise
        log.warning("the model's answer reached the output limit; kept what it wrote, marked as cut")
        return cut, ()
    names = {tool.name for tool in tools}
    if isinstance(value, dict) and isinstance(value.get("answer"), str):
        return value["answer"], ()
    tool = value.get("tool") if isinstance(value, dict) else None
    if isinstance(tool, str) and tool in names and isinstance(value.get("arguments"), dict):
        call = ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=tool, arguments=value["arguments"])
        return "", (call,)
    raise BadResponse(
        f"the model's reply is neither a call of an offered tool ({', '.join(sorted(names))}) nor an answer; "
        "the turn can be retried",
        provider_text=raw,
    )


def _load_json(raw: str, finish: str) -> Any:
    try:
        return json.loads(raw, strict=False)  # the grammar lets raw newlines into strings
    except ValueError as exc:
        hint = (
            "it stopped at max_tokens; allow more output tokens" if finish == "length" else "retry the turn"
        )
        raise BadResponse(f"the model's reply is not valid JSON ({exc}); {hint}", provider_text=raw) from exc


def interpret(
    raw: str, tools: Sequence[ToolSpec], json_schema: Mapping[str, Any] | None, finish: str
) -> tuple[str, tuple[ToolCall, ...]]:
    if json_schema is not None:
        _load_json(raw, finish)  # constrained output must at least parse; callers validate further
        return raw, ()
    if tools:
        return parse_tool_choice(raw, tools, finish)
    return raw, ()


# The JSON string's body: characters and complete escapes, up to its closing quote or an unfinished escape.
_STRING_BODY: Final = re.compile(r'(?:[^"\\]+|\\u[0-9a-fA-F]{4}|\\[^u])*')
_ANSWER_START: Final = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"answer"[ \t\n\r]*:[ \t\n\r]*"')


def shown_text(raw: str, *, answer_json: bool, stops: Sequence[str] = ()) -> str:
    """What may be shown of a reply while `raw` is the output generated so far (a pure function; the
    stream shows its growth). `answer_json`: the output is the tool grammar's JSON - nothing of a tool
    call `{"tool": ...}`, nothing before `{"answer": "` is known, then the answer's text decoded, an
    unfinished escape (or a surrogate half) held back. Otherwise the text as it is, less a tail that may
    be the start of one of `stops` (cut from the reply when it is complete)."""
    if not answer_json:
        for size in range(min(len(raw), max((len(s) for s in stops), default=0)), 0, -1):
            tail = raw[-size:]
            if any(stop.startswith(tail) for stop in stops):
                return raw[:-size]
        return raw
    start = _ANSWER_START.match(raw)
    if start is None:  # a tool call, or not known yet
        return ""
    body = _STRING_BODY.match(raw, start.end())
    assert body is not None  # the pattern matches the empty string
    closed = body.end() < len(raw) and raw[body.end()] == '"'
    try:
        text = str(json.loads(f'"{body.group(0)}"', strict=False))
    except ValueError:  # not JSON after all: the parser will say so
        return ""
    if not closed and text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1]  # the other half of a surrogate pair may follow
    return text


class _TextFeed:
    """Watches llama.cpp's tokens as they are generated and passes on the growth of `shown_text`."""

    def __init__(
        self,
        llama: Any,
        prompt: int,
        *,
        answer_json: bool,
        stops: Sequence[str],
        on_text: Callable[[str], None],
    ) -> None:
        self._llama, self._prompt, self._on_text = llama, prompt, on_text
        self._answer_json, self._stops = answer_json, tuple(stops)
        self._bytes = b""
        self._seen = 0
        self.sent = ""

    def watch(self, input_ids: Any, _logits: Any) -> bool:
        """A stopping criterion that never stops: `input_ids` are the prompt and the tokens so far. A token
        that shows nothing (a tool call's JSON) is still passed on, as "": the caller's chance to stop."""
        new = [int(token) for token in input_ids[self._prompt + self._seen :]]
        if new:
            self._seen += len(new)
            self._bytes += self._llama.detokenize(new)
            raw = self._bytes.decode("utf-8", errors="ignore")
            if not self.show(shown_text(raw, answer_json=self._answer_json, stops=self._stops)):
                self._on_text("")
        return False

    def show(self, text: str) -> bool:
        """Pass on what `text` adds to what was sent; False when it adds nothing."""
        if len(text) > len(self.sent) and text.startswith(self.sent):
            piece, self.sent = text[len(self.sent) :], text
            self._on_text(piece)
            return True
        if not text.startswith(self.sent):
            log.warning("streamed text %r is not a prefix of the reply %r", self.sent[:80], text[:80])
        return False


def stopping_list(feed: _TextFeed) -> Any:
    from llama_cpp import StoppingCriteriaList

    return StoppingCriteriaList([feed.watch])
