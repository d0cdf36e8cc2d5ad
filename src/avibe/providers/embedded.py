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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from avibe.errors import BadResponse, ContextOverflow, ModelUnavailable
from avibe.ports import CompletionRequest
from avibe.providers.greedy_grammar import GreedyGrammar
from avibe.providers.llama_abort import AbortWatch
from avibe.providers.llama_output import (
    _TextFeed,
    interpret,
    parse_tool_choice,
    shown_text,
    stopping_list,
    tool_choice_schema,
)
from avibe.providers.llama_prompt import (
    LlamaTokenCounter,
    PromptRenderer,
    control_pattern,
    escape_control,
    prompt_schema,
    schema_instruction,
    schema_tail,
)
from avibe.providers.modelfile import EMBEDDED_MODELS, check_gguf, verify_model_file
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolSpec, Usage

log = logging.getLogger(__name__)

__all__ = [  # what callers and tests import from here (the prompt and the output have modules of their own)
    "EmbeddedModel",
    "LlamaTokenCounter",
    "PromptRenderer",
    "_TextFeed",
    "control_pattern",
    "escape_control",
    "parse_tool_choice",
    "prompt_schema",
    "schema_instruction",
    "shown_text",
    "tool_choice_schema",
]

N_CTX = 32_768
MAX_OUTPUT = 2_048  # reply reserve; a checkpoint section or a tool call fits easily
THREADS = 2
SEED = 1234
# Structured answers only: a small model at temperature 0 loops ("none, none, none, ...") until a string's
# maxLength; a frequency penalty over the last 64 tokens makes the closing quote win first.
STRUCTURED_FREQUENCY_PENALTY: Final = 0.4
# A streamed call reads its prompt in slices and can be stopped between two, and inside one through
# llama.cpp's abort callback (llama_abort.py; Ctrl-C within a second, docs/chat.md): each slice sized to
# take ~0.25 s at the speed just measured, from 64 tokens up to llama.cpp's own batch size - below 64 it
# reads at half its speed or less (benchmarks/prompt_slices.py: slices of 8, 0.39x of 512's; 64, 0.96x),
# and busy cores then made the slices smaller still.
PROMPT_SLICE_S: Final = 0.25
FIRST_SLICE: Final = 64
MIN_SLICE: Final = 64
MAX_SLICE: Final = 512


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


def common_prefix(cached: Sequence[int], tokens: Sequence[int]) -> int:
    """How many leading tokens `cached` (the KV cache's) and `tokens` share."""
    common = 0
    for a, b in zip(cached, tokens, strict=False):
        if int(a) != b:
            break
        common += 1
    return common


def next_slice(size: int, took: float) -> int:
    """The next slice of a prompt read in slices: sized to take ~`PROMPT_SLICE_S` at the speed the last
    one (`size` tokens in `took` s) was read, at most twice its size, `MIN_SLICE` to `MAX_SLICE` tokens."""
    wanted = int(min(MAX_SLICE, size * PROMPT_SLICE_S / max(took, 1e-6)))
    return max(MIN_SLICE, min(MAX_SLICE, 2 * size, wanted))


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

    def complete(self, request: CompletionRequest) -> ModelReply:
        messages, tools, json_schema = request.messages, request.tools, request.json_schema
        max_tokens, temperature, on_text = request.max_tokens, request.temperature, request.on_text
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
            if on_text is not None:  # a prompt the caller can stop while it is read (docs/chat.md)
                self._read_prompt(self._renderer.evaluated(tokens), lambda: on_text(""))
            out = self._generate(tokens, grammar, limit, temperature, feed, json_schema is not None)
        choice = out["choices"][0]
        raw, finish = str(choice["text"]), str(choice.get("finish_reason") or "stop")
        usage = Usage(
            prompt_tokens=int(out["usage"]["prompt_tokens"]),
            completion_tokens=int(out["usage"]["completion_tokens"]),
            cached_tokens=cached,
        )
        text, calls = interpret(raw, tools, json_schema, finish)
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
        common = common_prefix(llama._input_ids, tokens)  # the KV cache's tokens are its first n_tokens
        if common == len(tokens):
            exact = llama.n_tokens == len(tokens) and not llama._requires_eval
            return common if exact else common - 1  # llama.cpp replays one token to refresh the logits
        return common

    def _read_prompt(self, full: list[int], beat: Callable[[], None]) -> None:
        """Evaluate the prompt's tokens that are not in the KV cache - all but the last, which
        `create_completion` evaluates to sample from - in slices of ~`PROMPT_SLICE_S`, calling `beat`
        before each: the streaming caller's chance to stop (it raises), as at each generated token. In one
        call llama.cpp read a whole prompt - 108 s for a long one on 2 cores - with no way to stop it. A
        slice that was read stays in the cache; the next call goes on from there."""
        llama = self._llama
        end = len(full) - 1
        common = common_prefix(llama._input_ids, full)
        if common >= end:
            return
        if common > 0 and llama._ctx.kv_cache_seq_rm(-1, common, -1):
            llama.n_tokens, llama._requires_eval = common, True
        else:
            llama.reset()
            common = 0
        start, size = common, FIRST_SLICE
        with AbortWatch(llama, beat) as watch:  # a stop also lands inside a slice (llama_abort.py)
            while start < end:
                beat()
                stop = min(end, start + size)
                began = time.monotonic()
                try:
                    llama.eval(full[start:stop])
                except RuntimeError:
                    watch.raise_stopped()  # the caller's stop, if that is what aborted the evaluation
                    raise
                watch.raise_stopped()  # a stop asked at the slice's last node, which then finished
                size = next_slice(stop - start, time.monotonic() - began)
                start = stop

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
        watch = None if feed is None else stopping_list(feed)
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


def _processors(greedy: GreedyGrammar) -> Any:
    from llama_cpp import LogitsProcessorList

    return LogitsProcessorList([greedy])


def open_embedded(name: str, model_cache: Path) -> EmbeddedModel:
    return EmbeddedModel(resolve_model_file(name, model_cache), name=name)


def open_embedded_counter(name: str, model_cache: Path) -> LlamaTokenCounter:
    """A counter that loads only the vocabulary (~0.4 s, no weights)."""
    llama = load_llama(resolve_model_file(name, model_cache), n_ctx=512, vocab_only=True)
    return LlamaTokenCounter(PromptRenderer(llama))
