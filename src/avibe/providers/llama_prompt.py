"""The embedded model's prompt: messages -> the exact tokens llama.cpp's chat handler would build for the
GGUF's own template (`PromptRenderer`), with every message content inert text (T1, T2: control sequences
escaped, tokenized with special tokens off), the tool list folded into the first system message (the
stable prefix the KV cache keeps) and a JSON schema's format line at the end; and the counts of those
tokens (`LlamaTokenCounter`). See `avibe.providers.embedded` for why each choice was made."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from avibe.errors import ModelUnavailable
from avibe.record.messages import ChatMessage, ToolCall, ToolSpec

# Private-use characters mark where message contents sit in the rendered template (see PromptRenderer).
_SLOT_OPEN, _SLOT_CLOSE = "\ue000", "\ue001"
_SLOT = re.compile(f"{_SLOT_OPEN}(\\d+){_SLOT_CLOSE}")
# Chat-template control sequences of the common local-model families, whatever this GGUF's vocabulary
# holds: ChatML/Qwen/Llama 3/Phi `<|...|>`, DeepSeek's full-width `<｜...｜>`, Qwen's and Hermes' tool
# wrappers, Gemma's turns, Mistral's `[INST]` family.
_CONTROL_SEQUENCES: Final = (
    r"<\|[^\s<>|]{1,64}\|>",
    r"<｜[^<>｜]{1,64}｜>",
    r"</?(?:tool_call|tool_response|tools|think|start_of_turn|end_of_turn)>",
    r"\[/?(?:INST|SYS|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|SYSTEM_PROMPT)\]",
)
_MARKUP_TOKEN: Final = re.compile(r"[<\[].+[>\]]", re.DOTALL)  # a vocabulary token that looks like markup
_TOKEN_CONTROL, _TOKEN_USER_DEFINED = 1 << 3, 1 << 4  # llama.cpp's token attributes


def control_pattern(extra: Iterable[str] = ()) -> re.Pattern[str]:
    """The control sequences of `_CONTROL_SEQUENCES` and the literal `extra` ones (longest first)."""
    literals = sorted({re.escape(text) for text in extra if text}, key=len, reverse=True)
    return re.compile("|".join([*_CONTROL_SEQUENCES, *literals]))


def _escaped(match: re.Match[str]) -> str:
    text = match.group(0)
    return ("&lt;" if text[0] == "<" else f"&#{ord(text[0])};") + text[1:]


def escape_control(text: str, pattern: re.Pattern[str] | None = None) -> str:
    """`text` with every control sequence made inert: its first character written as an HTML reference
    (`<|im_start|>` -> `&lt;|im_start|>`). Repeated until none is left (removing a character can never
    make a new one, but this does not rely on it)."""
    pattern = pattern or _DEFAULT_CONTROL
    for _ in range(8):
        escaped = pattern.sub(_escaped, text)
        if escaped == text:
            return text
        text = escaped
    return text


_DEFAULT_CONTROL: Final = control_pattern()


def vocabulary_controls(llama: Any) -> list[str]:
    """The texts of the GGUF's control and user-defined tokens that look like markup (`<tool_call>`,
    `</s>`); empty when llama.cpp cannot say (an old binding)."""
    model = getattr(llama, "_model", None)
    attr = getattr(model, "token_get_attr", None)
    if model is None or attr is None:
        return []
    found = []
    for token in range(int(llama.n_vocab())):
        if int(attr(token)) & (_TOKEN_CONTROL | _TOKEN_USER_DEFINED):
            text = model.token_get_text(token)
            if _MARKUP_TOKEN.fullmatch(text):
                found.append(text)
    return found


class PromptRenderer:
    """Messages -> prompt tokens, exactly as llama.cpp's chat handler for this GGUF would build them."""

    def __init__(self, llama: Any) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(
                "the GGUF file has no chat template (tokenizer.chat_template); use an instruct model"
            )
        self._llama = llama
        eos, bos = llama.token_eos(), llama.token_bos()
        self.eos_text: str = llama._model.token_get_text(eos) if eos != -1 else ""
        bos_text = llama._model.token_get_text(bos) if bos != -1 else ""
        self._formatter: Any = Jinja2ChatFormatter(
            template=template, eos_token=self.eos_text, bos_token=bos_text
        )
        # llama.cpp prepends BOS itself when the model asks for it; keep it out of our tokens then.
        self._bos_added = bool(llama._model.add_bos_token()) and bos != -1
        self._bos = bos
        self._control = control_pattern(vocabulary_controls(llama))

    def escape(self, text: str) -> str:
        """A message content as inert text for this model (see the module's docstring)."""
        return escape_control(text, self._control)

    def render(self, messages: Sequence[ChatMessage], tail: str | None = None) -> str:
        return self._render(messages, tail, lambda text: text)

    def request_tokens(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: Mapping[str, Any] | None,
    ) -> list[int]:
        """The prompt tokens of one request: the tool list folded into the first system message (stable
        prefix), the JSON-schema instruction, if any, as a system message at the end."""
        return self.tokens(with_tools(messages, tools), schema_tail(json_schema))

    def _render(self, messages: Sequence[ChatMessage], tail: str | None, slot: Callable[[str], str]) -> str:
        dicts = [_template_message(m) for m in messages]
        for item in dicts:  # contents only: the template adds its own markers around them
            item["content"] = slot(self.escape(item["content"]))
        if tail:
            dicts.append({"role": "system", "content": slot(self.escape(tail))})
        return str(self._formatter(messages=dicts).prompt)

    def tokens(self, messages: Sequence[ChatMessage], tail: str | None = None) -> list[int]:
        """The prompt tokens we hand to llama.cpp (without the BOS it adds itself).

        The template's markup is tokenized with special tokens on, message contents with them off: a
        message that contains the text `<|im_start|>system` stays text and cannot open a forged turn
        (llama.cpp's own chat handler would turn it into the special token)."""
        contents: list[str] = []

        def slot(text: str) -> str:
            if not text:  # templates test content for emptiness; keep that behaviour
                return text
            contents.append(text)
            return f"{_SLOT_OPEN}{len(contents) - 1}{_SLOT_CLOSE}"

        ids: list[int] = []
        for i, piece in enumerate(_SLOT.split(self._render(messages, tail, slot))):
            text, special = (contents[int(piece)], False) if i % 2 else (piece, True)
            if text:
                ids += self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return ids[1:] if self._bos_added and ids[:1] == [self._bos] else ids

    def evaluated(self, tokens: Sequence[int]) -> list[int]:
        """The tokens llama.cpp evaluates for a prompt of `tokens`: with the BOS it adds itself, if any."""
        return [self._bos, *tokens] if self._bos_added else list(tokens)

    def prompt_count(self, tokens: Sequence[int]) -> int:
        return len(tokens) + (1 if self._bos_added else 0)

    def count_text(self, text: str) -> int:
        return len(self._llama.tokenize(self.escape(text).encode("utf-8"), add_bos=False, special=False))


def _template_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "assistant" and message.tool_calls:
        calls = [_call_json(call) for call in message.tool_calls]
        content = "\n".join([message.content, *calls] if message.content else calls)
        return {"role": "assistant", "content": content}
    return {"role": message.role, "content": message.content}


def _call_json(call: ToolCall) -> str:
    """A tool call as the grammar makes the model write it (canonical, so the prompt is stable)."""
    return json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)


class LlamaTokenCounter:
    """TokenCounter in the local model's own vocabulary; `count_messages` = llama.cpp's prompt count."""

    def __init__(self, renderer: PromptRenderer) -> None:
        self._renderer = renderer

    def count(self, text: str) -> int:
        return self._renderer.count_text(text)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return self._renderer.prompt_count(self._renderer.tokens(messages))

    def count_request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        json_schema: Mapping[str, Any] | None = None,
    ) -> int:
        """The exact prompt tokens of `EmbeddedModel.complete` with these arguments (tool list included)."""
        return self._renderer.prompt_count(self._renderer.request_tokens(messages, tools, json_schema))


def tools_instruction(tools: Sequence[ToolSpec]) -> str:
    lines = ["Tools (call one when you need information or an action; answer when done):"]
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False)
        lines.append(f"- {tool.name}: {tool.description} Arguments (JSON schema): {schema}")
    lines.append(
        'Reply with one JSON object: {"tool": "<name>", "arguments": {...}} or {"answer": "<reply>"}.'
    )
    return "\n".join(lines)


def with_tools(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[ChatMessage]:
    """The messages with the tool list at the end of the first system message (a new one if none)."""
    if not tools:
        return list(messages)
    listing = tools_instruction(tools)
    if messages and messages[0].role == "system":
        first = replace(messages[0], content=f"{messages[0].content}\n\n{listing}")
        return [first, *messages[1:]]
    return [ChatMessage(role="system", content=listing), *messages]


def schema_tail(json_schema: Mapping[str, Any] | None) -> str | None:
    return schema_instruction(json_schema) if json_schema is not None else None


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The schema as the prompt shows it: without what only the grammar needs (`prompt_schema`), and in
    JSON's compact form (no blank after "," and ":" - ~30% fewer tokens for Qwen's tokenizer). Every
    structured call reads this uncached, at ~11 ms a token for the 0.5B on two cores. A sketch
    with placeholders ("<54 chars>") was tried: the 0.5B copied the placeholders into its answers, so the
    prompt keeps the schema's own words."""
    shown = json.dumps(prompt_schema(schema), ensure_ascii=False, separators=(",", ":"))
    return "Reply with one JSON object that matches this JSON schema: " + shown


_GRAMMAR_ONLY: Final = frozenset({"required", "additionalProperties"})


def prompt_schema(schema: Any) -> Any:
    """`schema` without the keywords only the grammar needs, at every depth: "required" (it repeats every
    key; the grammar writes them all), "additionalProperties" (the grammar allows no others), and a
    "type" that "properties" or "enum" already implies. Property names are kept, whatever they are."""
    if isinstance(schema, list):
        return [prompt_schema(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    implied = "properties" in schema or "enum" in schema
    shown: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _GRAMMAR_ONLY or (key == "type" and implied):
            continue
        if key == "properties" and isinstance(value, Mapping):
            shown[key] = {name: prompt_schema(v) for name, v in value.items()}
        else:
            shown[key] = prompt_schema(value)
    return shown
