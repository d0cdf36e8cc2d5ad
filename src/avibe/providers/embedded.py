"""The embedded model: a GGUF file run in process by llama.cpp (`llama-cpp-python`).

Context size: the default model (Qwen2.5-Coder-0.5B-Instruct) was trained with a 32,768-token context,
and the harness scales its budgets by window / 192,000 (SPEC M6, N5). At 16,384 tokens the mind's
"I am here" cap would be ~85 tokens and all kept memo messages ~256 tokens - too small to be useful; at
32,768 they are ~170 and ~512, and the verbatim tail (a quarter of the 90% threshold) is ~7,400 tokens.
The KV cache for 32,768 tokens costs ~384 MB (24 layers x 2 KV heads x 64 dims x f16 x K and V). A full
window takes ~100 s to evaluate on two cores, which is why the KV cache is kept between calls.

Prompt: rendered with the GGUF's own chat template (ChatML for Qwen) through llama-cpp-python's
`Jinja2ChatFormatter`, so the tokens are exactly what llama.cpp's chat handler would produce. Tool calls
do not use Qwen's native `<tool_call>` format (a 0.5B model emits it unreliably); instead output is
constrained by a JSON-schema grammar with one branch per tool, `{"tool": NAME, "arguments": {...}}`, and
a final-answer branch `{"answer": "..."}`. The tool list goes at the end of the FIRST system message, so
it is part of the stable prefix: each agent call then evaluates only its new messages (with the list at
the end of the prompt, every call re-evaluated it - ~1,100 of ~1,200 tokens, 12 s a call on 2 cores). A
`json_schema` request (the structured checkpoint turn, which passes the live tool list unchanged) adds
its format instruction as a short system message at the end, after the cached conversation; a structured
call that goes on from the one before keeps that one's instruction where it was read (`FormatThread`), so
the cache holds everything up to the new question. Earlier
tool-call turns are rendered as that same JSON, tool results by the template's `tool` role.

At temperature 0 a grammar-bound completion asks the grammar about the best token first and checks the
whole vocabulary only when it is refused (`greedy_grammar.py`): the same tokens as llama.cpp's sampler
chain, which checked every token of the vocabulary at every step (~33 ms a token against ~20 ms, the 0.5B).

Message contents are inert text (T1, T2): they are tokenized with special tokens off, and every
chat-template control sequence in them - `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, `</tool_response>`,
`<tool_call>` (a user-defined token llama.cpp matches even with special tokens off), and every control or
user-defined token of the GGUF's vocabulary - has its first character escaped (`&lt;/tool_response>`),
so a tool output or a record text cannot close its turn or open a forged one. The template's own markers
are never escaped (`escape_control`).

Streaming (`on_text`): the completion runs exactly as without it; a llama.cpp stopping criterion that never
stops watches the tokens as they are generated and passes on what may be shown (`shown_text`). With tools
the output is the grammar's JSON, so nothing is shown until it is known to be `{"answer": "...`, and then
only the answer's decoded text: a tool call is never shown. Without tools, a tail that may be the start of
a stop sequence is held back until it turns out not to be one. The rest is passed on once the reply is
parsed, so the pieces always add up to the reply's text.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from avibe.errors import BadResponse, ContextOverflow, ModelUnavailable
from avibe.providers.greedy_grammar import GreedyGrammar
from avibe.providers.modelfile import EMBEDDED_MODELS, check_gguf, verify_model_file
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall, ToolSpec, Usage, cut_answer

log = logging.getLogger(__name__)

N_CTX = 32_768
MAX_OUTPUT = 2_048  # reply reserve; a checkpoint section or a tool call fits easily
THREADS = 2
SEED = 1234
# Structured answers only: a small model at temperature 0 loops ("none, none, none, ...") until a string's
# maxLength; a frequency penalty over the last 64 tokens makes the closing quote win first (issue 17).
STRUCTURED_FREQUENCY_PENALTY: Final = 0.4
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


def load_llama(path: Path, *, n_ctx: int = N_CTX, vocab_only: bool = False) -> Any:
    """Load a GGUF with llama.cpp (import deferred: the CLI should not pay for it unless used)."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:  # pragma: no cover - it is a pinned dependency
        raise ModelUnavailable("llama-cpp-python is not installed; run `pip install -e .`") from exc
    try:
        return Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=THREADS,
            n_threads_batch=THREADS,
            seed=SEED,
            vocab_only=vocab_only,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelUnavailable(
            f"llama.cpp could not load {path}: {exc}; check that it is a complete GGUF model file",
            provider_text=str(exc),
        ) from exc


def resolve_model_file(name: str, model_cache: Path) -> Path:
    """`embedded` (or another tier) -> the verified file in the cache; `local:/path.gguf` -> that file if
    it is a GGUF (no hash is known for it)."""
    if name in EMBEDDED_MODELS:
        spec = EMBEDDED_MODELS[name]
        path = model_cache / spec.filename
        verify_model_file(path, spec)
        return path
    if name.startswith("local:"):
        path = Path(name.removeprefix("local:")).expanduser()
        check_gguf(path)
        return path
    choices = ", ".join([*EMBEDDED_MODELS, "local:/path/model.gguf"])
    raise ModelUnavailable(f"{name!r} is not an embedded model name; use one of {choices}")


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
    structured call reads this uncached, at ~11 ms a token for the 0.5B on two cores (issue 17). A sketch
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


class EmbeddedModel:
    """ModelClient for a local GGUF. One instance = one KV cache; use one per session."""

    def __init__(self, path: Path, *, name: str = "embedded", n_ctx: int = N_CTX, llama: Any = None) -> None:
        self._llama = llama if llama is not None else load_llama(path, n_ctx=n_ctx)
        self._renderer = PromptRenderer(self._llama)
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        self._exchange: FormatThread | None = None  # the structured calls in a row so far
        n = int(self._llama.n_ctx())
        self._facts = ModelFacts(name=name, window=n, max_output=min(MAX_OUTPUT, n // 4))

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    @property
    def counter(self) -> LlamaTokenCounter:
        return LlamaTokenCounter(self._renderer)

    @property
    def llama(self) -> Any:
        """The underlying `llama_cpp.Llama` (benchmarks and tests read its state)."""
        return self._llama

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        on_text: Callable[[str], None] | None = None,
    ) -> ModelReply:
        shown, tokens = self._prompt(messages, tools, json_schema, max_tokens)
        limit = self._output_limit(tokens, max_tokens)
        grammar = self._grammar_for(tools, json_schema)
        feed = None
        if on_text is not None and json_schema is None:  # structured calls never stream
            stops = (self._renderer.eos_text,) if self._renderer.eos_text else ()
            prompt = self._renderer.prompt_count(tokens)
            feed = _TextFeed(self._llama, prompt, answer_json=bool(tools), stops=stops, on_text=on_text)
        with self._lock:
            cached = self._reusable_prefix(tokens)
            out = self._generate(tokens, grammar, limit, temperature, feed, json_schema is not None)
        choice = out["choices"][0]
        raw, finish = str(choice["text"]), str(choice.get("finish_reason") or "stop")
        usage = Usage(
            prompt_tokens=int(out["usage"]["prompt_tokens"]),
            completion_tokens=int(out["usage"]["completion_tokens"]),
            cached_tokens=cached,
        )
        text, calls = _interpret(raw, tools, json_schema, finish)
        tail = schema_tail(json_schema)
        self._exchange = None if json_schema is None else answered(messages, shown, tail, text)
        if feed is not None:
            feed.show(text)  # what was held back to the end
        return ModelReply(
            text=text, tool_calls=calls, usage=usage, finish_reason=finish, model=self._facts.name
        )

    def _prompt(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: Mapping[str, Any] | None,
        max_tokens: int | None,
    ) -> tuple[list[ChatMessage], list[int]]:
        """The messages as the model is shown them, and the prompt's tokens. A structured call that goes on
        from the one before keeps the earlier calls' format lines where they were read (`FormatThread`),
        where that fits the window with the reply's room; any other call is shown `messages` as they are."""
        kept = continued(self._exchange, messages) if json_schema is not None else None
        if kept is not None:
            tokens = self._renderer.request_tokens(kept, tools, json_schema)
            wanted = max_tokens if max_tokens is not None else self._facts.max_output
            if self._renderer.prompt_count(tokens) + wanted <= self._facts.window:
                return kept, tokens
        return list(messages), self._renderer.request_tokens(messages, tools, json_schema)

    def _output_limit(self, tokens: Sequence[int], max_tokens: int | None) -> int:
        prompt = self._renderer.prompt_count(tokens)
        room = self._facts.window - prompt
        if room < 1:
            raise ContextOverflow(
                f"the prompt has {prompt} tokens but the model's window is {self._facts.window}; "
                "checkpoint or shorten the conversation",
                provider_text=f"Requested tokens ({prompt}) exceed context window of {self._facts.window}",
            )
        wanted = max_tokens if max_tokens is not None else self._facts.max_output
        if wanted > room:
            log.info("max_tokens %d cut to the %d tokens left in the window", wanted, room)
        return max(1, min(wanted, room))

    def _reusable_prefix(self, tokens: Sequence[int]) -> int:
        """Prompt tokens llama.cpp will take from its KV cache (mirrors `Llama.generate`'s prefix match)."""
        llama = self._llama
        previous = llama._input_ids  # the tokens currently in the KV cache (first n_tokens)
        common = 0
        for a, b in zip(previous, tokens, strict=False):
            if int(a) != b:
                break
            common += 1
        if common == len(tokens):
            exact = llama.n_tokens == len(tokens) and not llama._requires_eval
            return common if exact else common - 1  # llama.cpp replays one token to refresh the logits
        return common

    def _generate(
        self,
        tokens: list[int],
        grammar: Any,
        limit: int,
        temp: float,
        feed: _TextFeed | None,
        structured: bool = False,
    ) -> Any:
        stop = [self._renderer.eos_text] if self._renderer.eos_text else None
        watch = None if feed is None else _stopping_list(feed)
        penalty = STRUCTURED_FREQUENCY_PENALTY if structured else 0.0
        greedy = None
        if grammar is not None and temp == 0.0:  # the same tokens, the grammar asked about the best one first
            greedy = GreedyGrammar(self._llama, grammar, len(tokens), penalty)
            grammar, penalty = None, 0.0
        try:
            out = self._llama.create_completion(
                tokens,
                max_tokens=limit,
                temperature=temp,
                seed=SEED,
                frequency_penalty=penalty,
                grammar=grammar,
                logits_processor=None if greedy is None else _processors(greedy),
                stop=stop,
                stopping_criteria=watch,
            )
        except ValueError as exc:
            if "exceed context window" in str(exc):
                raise ContextOverflow(f"{exc}; checkpoint or shorten the conversation", str(exc)) from exc
            raise BadResponse(f"llama.cpp rejected the request: {exc}", provider_text=str(exc)) from exc
        finally:
            if greedy is not None:
                greedy.close()
        if greedy is not None:
            greedy.raise_if_failed()
        return out

    def _grammar_for(self, tools: Sequence[ToolSpec], json_schema: Mapping[str, Any] | None) -> Any:
        """The output grammar; a tool schema llama.cpp cannot compile falls back (logged) to "any JSON
        object" for the arguments - the model still sees the real schema in the prompt."""
        if json_schema is not None:
            return self._grammar(dict(json_schema))
        if not tools:
            return None
        try:
            return self._grammar(tool_choice_schema(tools))
        except BadResponse as exc:
            log.warning("tool arguments left unconstrained: %s", exc)
            return self._grammar(tool_choice_schema(tools, strict_arguments=False))

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        key = json.dumps(schema)  # key order matters: the grammar fixes the property order
        if key not in self._grammars:
            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except (ValueError, RuntimeError, KeyError, NotImplementedError, AssertionError) as exc:
                raise BadResponse(
                    f"cannot build an output grammar from the JSON schema ({exc}); simplify the schema",
                    provider_text=key,
                ) from exc
        return self._grammars[key]


@dataclass(frozen=True, slots=True)
class FormatThread:
    """Structured calls in a row (the checkpoint's questions): what the caller sent, its reply appended
    (`asked`), and what the model was shown - the same with each call's format line (the JSON-schema
    instruction, a system message) kept before its reply (`shown`).

    The format line ends a structured call's prompt. Dropped from the next call, it broke the KV cache's
    prefix there, and the model read the line and its own reply again at every question (~150-250 tokens,
    2-3 s on the 0.5B); kept, the next call reads only its question and its own format line."""

    asked: tuple[ChatMessage, ...]
    shown: tuple[ChatMessage, ...]


def continued(thread: FormatThread | None, messages: Sequence[ChatMessage]) -> list[ChatMessage] | None:
    """`messages` as shown with the format lines of the structured calls they go on from; None when they
    go on from none (they do not begin with those calls' messages and replies)."""
    if thread is None or len(messages) <= len(thread.asked):
        return None
    if tuple(messages[: len(thread.asked)]) != thread.asked:
        return None
    return [*thread.shown, *messages[len(thread.asked) :]]


def answered(
    messages: Sequence[ChatMessage], shown: Sequence[ChatMessage], tail: str | None, reply: str
) -> FormatThread:
    """The thread after a structured call: its messages, the model's view of them with the format line it
    read (`tail`), and the reply, as the caller appends it to its messages."""
    answer = ChatMessage(role="assistant", content=reply)
    line = () if tail is None else (ChatMessage(role="system", content=tail),)
    return FormatThread((*messages, answer), (*shown, *line, answer))


def _interpret(
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


def _processors(greedy: GreedyGrammar) -> Any:
    from llama_cpp import LogitsProcessorList

    return LogitsProcessorList([greedy])


def _stopping_list(feed: _TextFeed) -> Any:
    from llama_cpp import StoppingCriteriaList

    return StoppingCriteriaList([feed.watch])


def open_embedded(name: str, model_cache: Path) -> EmbeddedModel:
    return EmbeddedModel(resolve_model_file(name, model_cache), name=name)


def open_embedded_counter(name: str, model_cache: Path) -> LlamaTokenCounter:
    """A counter that loads only the vocabulary (~0.4 s, no weights)."""
    llama = load_llama(resolve_model_file(name, model_cache), n_ctx=512, vocab_only=True)
    return LlamaTokenCounter(PromptRenderer(llama))
