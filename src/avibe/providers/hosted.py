"""Hosted models through LiteLLM: any `provider/model` name, keys and base URLs from the usual environment
variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_BASE_URL, OLLAMA_API_BASE ...).

LiteLLM takes seconds to import, so it is imported on the first call, never at module import, and with
LITELLM_LOCAL_MODEL_COST_MAP=True so that importing it makes no network call. Tool calls are native
(OpenAI format, which LiteLLM translates for each provider). Given `on_text`, a call streams: each content
delta goes to `on_text` as it arrives, and the chunks are rebuilt into the same response
(`litellm.stream_chunk_builder`) and parsed as an unstreamed one; structured (json_schema) calls never
stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from avibe.errors import (
    AuthError,
    BadResponse,
    ContextOverflow,
    ModelError,
    ModelUnavailable,
    RateLimited,
)
from avibe.ports import CompletionRequest
from avibe.record.messages import (
    REMINDER_KIND,
    ChatMessage,
    ModelFacts,
    ModelReply,
    ToolCall,
    ToolSpec,
    Usage,
)
from avibe.record.sources import harness_note

# LiteLLM's retries (rate limits, timeouts, a provider's 5xx): the provider's SDK backs off between them,
# honouring Retry-After; without them one 429 stopped a run. HostedModel's own default stays 0 for tests.
DEFAULT_NUM_RETRIES = 3
# Where a key may come from something other than an environment variable (cloud credentials, a local
# server without auth): LiteLLM's environment check would refuse a working setup.
_KEYS_ELSEWHERE = ("bedrock", "sagemaker", "vertex_ai", "ollama", "ollama_chat", "hosted_vllm", "lm_studio")

UsageListener = Callable[[Sequence[ChatMessage], int, Sequence[ToolSpec]], None]


def _no_implicit_event_loop() -> None:
    """LiteLLM's sync calls log timings through `asyncio.get_event_loop()`. On Python 3.11 that call, in
    the main thread with no loop set, creates a loop nobody ever closes (a leaked loop and its two
    sockets). Saying "no loop" first (when none runs here) makes it raise instead, and LiteLLM then runs
    its hook in a loop of its own that it closes (`asyncio.run`)."""
    if threading.current_thread() is not threading.main_thread():
        return  # other threads never get an implicit loop
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.set_event_loop(None)


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def to_openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The messages in OpenAI's format. The view's reminder after a user's message goes as a harness input
    (a user-role message under Avibe's tag, T1), not as a system message: LiteLLM moves every system
    message of an Anthropic request into its one system prompt, so a reminder there would change the
    prompt's start - and void its cache - at every message that has one, and leave its place."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.kind == REMINDER_KIND:
            out.append({"role": "user", "content": harness_note(m.content)})
            continue
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": wire_name(c.name), "arguments": json.dumps(c.arguments)},
                }
                for c in m.tool_calls
            ]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id or ""
        if m.name and m.role != "tool":
            item["name"] = m.name
        out.append(item)
    return out


def wire_name(name: str) -> str:
    """A tool's name as the providers take it: an MCP tool's `server.tool` as `server__tool` (OpenAI and
    Anthropic allow no dot; a server's name never holds `__`, avibe/mcp/config.py)."""
    return name.replace(".", "__", 1)


def our_name(name: str) -> str:
    """The tool a provider's name stands for (`wire_name` undone; Vibey's own tools hold no `__`)."""
    return name.replace("__", ".", 1)


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": wire_name(t.name), "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def missing_keys(name: str) -> list[str]:
    """The environment variables LiteLLM says `name` needs and the environment lacks (any one of them
    is enough where it lists several, e.g. GEMINI_API_KEY or GOOGLE_API_KEY); [] when nothing is
    missing or the provider's credentials may live elsewhere. Imports LiteLLM (~2 s)."""
    import contextlib
    import io

    if name.split("/", 1)[0] in _KEYS_ELSEWHERE:
        return []
    litellm = import_litellm()
    with contextlib.redirect_stdout(io.StringIO()):  # LiteLLM prints its provider list for some names
        try:
            found = litellm.validate_environment(model=name)
        except Exception:  # LiteLLM could not tell: the first call will say what is wrong
            return []
    if found.get("keys_in_environment"):
        return []
    return [str(key) for key in found.get("missing_keys") or []]


class HostedModel:
    """ModelClient for any model LiteLLM can call."""

    def __init__(
        self,
        facts: ModelFacts,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        num_retries: int = 0,
    ) -> None:
        self._facts = facts
        self._usage_listeners: list[UsageListener] = []
        # drop_params: LiteLLM leaves out what a model does not take (e.g. temperature on reasoning models)
        self._options: dict[str, Any] = {"timeout": timeout, "num_retries": num_retries, "drop_params": True}
        if api_base:
            self._options["api_base"] = api_base
        if api_key:
            self._options["api_key"] = api_key

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    def on_prompt_usage(self, listener: UsageListener) -> None:
        """Call `listener(messages, prompt_tokens, tools)` after each reply (feeds CalibratedCounter)."""
        self._usage_listeners.append(listener)

    def complete(self, request: CompletionRequest) -> ModelReply:
        messages, tools, json_schema = request.messages, request.tools, request.json_schema
        litellm = import_litellm()
        _no_implicit_event_loop()
        body: dict[str, Any] = {
            "model": self._facts.name,
            "messages": to_openai_messages(messages),
            "max_tokens": request.max_tokens or self._facts.max_output,
            "temperature": request.temperature,
            **self._options,
        }
        if tools:
            body["tools"] = to_openai_tools(tools)
        if json_schema is not None:
            schema = {"name": "reply", "schema": dict(json_schema)}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        if request.stream is not None:
            reply = self._streamed(litellm, body, request.stream)
        else:
            try:
                response = litellm.completion(**body)
            except Exception as exc:  # every LiteLLM/HTTP failure is mapped; the original is chained
                raise map_error(exc, self._facts.name) from exc
            reply = parse_response(response, self._facts.name)
        if reply.usage.prompt_tokens:
            for listener in self._usage_listeners:
                listener(messages, reply.usage.prompt_tokens, tools)
        return reply

    def _streamed(self, litellm: Any, request: dict[str, Any], on_text: Callable[[str], None]) -> ModelReply:
        """One streamed call: content deltas to `on_text` as they arrive, then the chunks rebuilt into the
        whole response. A failure while connecting or mid-stream is mapped like any other; an error
        raised by `on_text` itself is not the provider's and passes through unchanged. The usage is the
        one the provider put in the stream (asked for with `stream_options` where the provider takes it);
        where a stream carries none, LiteLLM counts the messages and the text itself."""
        name = self._facts.name
        request = {**request, "stream": True}
        if _streams_usage(litellm, name):
            request["stream_options"] = {"include_usage": True}
        chunks: list[Any] = []
        try:
            stream = iter(litellm.completion(**request))
        except Exception as exc:
            raise map_error(exc, name) from exc
        while True:
            try:
                chunk = next(stream)
            except StopIteration:
                break
            except Exception as exc:  # an error event or a dropped connection mid-stream
                raise map_error(exc, name) from exc
            chunks.append(chunk)
            on_text(_delta_text(chunk))  # "" for a chunk of a tool call: a heartbeat (ports.Model)
        try:
            response = litellm.stream_chunk_builder(chunks, messages=request["messages"])
        except Exception as exc:
            raise map_error(exc, name) from exc
        return parse_response(response, name)


def _streams_usage(litellm: Any, name: str) -> bool:
    """Whether the provider takes `stream_options` (OpenAI's way to put usage in the stream)."""
    provider, _, model = name.partition("/")
    try:
        params = litellm.get_supported_openai_params(model=model or name, custom_llm_provider=provider)
    except Exception:  # LiteLLM does not know the provider: stream without usage
        return False
    return bool(params) and "stream_options" in params


def _delta_text(chunk: Any) -> str:
    """A stream chunk's new visible text (its content delta; "" for role, tool-call and usage chunks)."""
    choices = getattr(chunk, "choices", None) or ()
    delta = getattr(choices[0], "delta", None) if choices else None
    content = getattr(delta, "content", None)
    return content if isinstance(content, str) else ""


def map_error(exc: Exception, model: str) -> ModelError:
    """LiteLLM's exception -> ours, keeping the provider's text and saying what to do."""
    from litellm import exceptions as e

    text = str(getattr(exc, "message", "") or exc)
    if _looks_like_missing_key(text):
        return AuthError(
            f"{model}: no API key found; set the provider's key variable (e.g. OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY, GEMINI_API_KEY)",
            provider_text=text,
        )
    if _looks_like_connection_failure(text):  # LiteLLM reports a refused connection as a server error
        return ModelUnavailable(
            f"{model}: the server is unreachable; check the network and the base URL ({type(exc).__name__})",
            provider_text=text,
        )
    if isinstance(exc, e.BadRequestError) and _looks_like_overflow(text):
        return ContextOverflow(f"{model}: the request is larger than the model's window; checkpoint", text)
    table: tuple[tuple[type[Exception], type[ModelError], str], ...] = (
        (
            e.ContextWindowExceededError,
            ContextOverflow,
            "the request is larger than the model's window; checkpoint",
        ),
        (e.AuthenticationError, AuthError, "set a valid API key in the provider's environment variable"),
        (e.PermissionDeniedError, AuthError, "the key is not allowed to use this model"),
        (e.RateLimitError, RateLimited, "wait and retry, or lower the request rate"),
        (e.NotFoundError, ModelUnavailable, "check the model name (`vibe models`)"),
        (e.APIConnectionError, ModelUnavailable, "the server is unreachable; check the network and base URL"),
        (e.Timeout, ModelUnavailable, "the server did not answer in time; retry"),
        (e.ServiceUnavailableError, ModelUnavailable, "the provider is unavailable; retry later"),
        (e.InternalServerError, ModelUnavailable, "the provider failed; retry later"),
        (e.BadRequestError, BadResponse, "the provider rejected the request"),
        (e.APIError, BadResponse, "the provider returned an error"),
    )
    for litellm_type, ours, advice in table:
        if isinstance(exc, litellm_type):
            return ours(f"{model}: {advice} ({type(exc).__name__})", provider_text=text)
    return ModelUnavailable(
        f"{model}: the call failed ({type(exc).__name__}: {text[:200]})", provider_text=text
    )


def _looks_like_connection_failure(text: str) -> bool:
    lowered = text.lower()
    return "connection error" in lowered or "connection refused" in lowered or "connecterror" in lowered


_OVERFLOW_WORDS = ("context length", "context_length_exceeded", "prompt is too long", "context window")


def _looks_like_overflow(text: str) -> bool:
    """Providers LiteLLM does not classify (e.g. some OpenAI-compatible servers) still say so in words."""
    lowered = text.lower()
    return any(word in lowered for word in _OVERFLOW_WORDS)


_MISSING_KEY = re.compile(
    r"missing (\w+ )?(api key|credentials)|no api key|api_key client option must be set", re.I
)


def _looks_like_missing_key(text: str) -> bool:
    return _MISSING_KEY.search(text) is not None


def parse_response(response: Any, model: str) -> ModelReply:
    try:
        choice = response.choices[0]
        message = choice.message
    except (AttributeError, IndexError) as exc:
        raise BadResponse(
            f"{model}: the response has no choices; retry", provider_text=str(response)
        ) from exc
    calls = tuple(_tool_call(raw, model) for raw in (getattr(message, "tool_calls", None) or ()))
    return ModelReply(
        text=str(message.content or ""),
        tool_calls=calls,
        usage=usage_of(response),
        finish_reason=str(choice.finish_reason or "stop"),
        model=str(getattr(response, "model", "") or model),
    )


def _tool_call(raw: Any, model: str) -> ToolCall:
    arguments = raw.function.arguments or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    except ValueError as exc:
        raise BadResponse(
            f"{model}: tool call {raw.function.name!r} has arguments that are not JSON ({exc}); retry",
            provider_text=str(arguments),
        ) from exc
    if not isinstance(parsed, dict):
        raise BadResponse(f"{model}: tool call arguments are not an object; retry the turn", str(arguments))
    return ToolCall(id=str(raw.id or ""), name=our_name(str(raw.function.name)), arguments=parsed)


def usage_of(response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or getattr(usage, "cache_read_input_tokens", None) or 0
    return Usage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cached_tokens=int(cached),
    )
