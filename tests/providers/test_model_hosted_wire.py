"""Hosted models through LiteLLM, against recorded OpenAI- and Anthropic-style HTTP responses served on
127.0.0.1 (no network). SPEC F1 needs the usage numbers (cached tokens) these replies carry."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from provider_support import DUMMY_KEY, FIXTURES, WireServer

from avibe.config import load_settings
from avibe.errors import AuthError, BadResponse, ContextOverflow, ModelUnavailable, RateLimited
from avibe.ports import CompletionRequest
from avibe.providers import open_counter
from avibe.providers.counting import CalibratedCounter
from avibe.providers.facts import model_facts
from avibe.providers.hosted import HostedModel
from avibe.record.messages import REMINDER_KIND, ChatMessage, ToolCall, ToolSpec

READ = ToolSpec("read", "Read a text file.", {"type": "object", "properties": {"path": {"type": "string"}}})
ASK = [ChatMessage("system", "You are Vibey."), ChatMessage("user", "Do the tests pass?")]
MODELS = {"openai": "openai/gpt-4o", "anthropic": "anthropic/claude-sonnet-4-5"}


def _model(wire: WireServer, provider: str) -> HostedModel:
    return HostedModel(model_facts(MODELS[provider]), api_base=wire.url, api_key=DUMMY_KEY)


@pytest.mark.parametrize(("provider", "cached"), [("openai", 1152), ("anthropic", 2048)])
def test_plain_answer_with_cached_tokens(wire: WireServer, provider: str, cached: int) -> None:
    wire.queue(f"{provider}/answer.json")
    reply = _model(wire, provider).complete(CompletionRequest(ASK, max_tokens=50))
    assert reply.text == "Hello! The tests pass."
    assert reply.tool_calls == ()
    assert reply.usage.cached_tokens == cached
    assert reply.usage.completion_tokens in (7, 9)
    sent = wire.requests[0]["body"]
    assert sent["max_tokens"] == 50
    assert any("Do the tests pass?" in str(m) for m in sent["messages"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_native_tool_call_is_mapped(wire: WireServer, provider: str) -> None:
    wire.queue(f"{provider}/tool_call.json")
    reply = _model(wire, provider).complete(CompletionRequest(ASK, [READ]))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("read", {"path": "setup.py"})]
    assert reply.tool_calls[0].id
    assert "read" in str(wire.requests[0]["body"]["tools"])


def test_tool_history_is_sent_in_openai_format(wire: WireServer) -> None:
    wire.queue("openai/answer.json")
    history = [
        *ASK,
        ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "read", {"path": "a.py"}),)),
        ChatMessage("tool", "print('a')", tool_call_id="call_1"),
    ]
    _model(wire, "openai").complete(CompletionRequest(history, [READ]))
    sent = wire.requests[0]["body"]["messages"]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path": "a.py"}'}
    assert sent[3] == {"role": "tool", "content": "print('a')", "tool_call_id": "call_1"}


@pytest.mark.parametrize(
    ("name", "error", "provider_words"),
    [
        ("openai/context_overflow.json", ContextOverflow, "maximum context length"),
        ("openai/auth.json", AuthError, "Incorrect API key"),
        ("openai/rate_limit.json", RateLimited, "Rate limit reached"),
        ("anthropic/context_overflow.json", ContextOverflow, "prompt is too long"),
        ("anthropic/auth.json", AuthError, "invalid x-api-key"),
        ("anthropic/rate_limit.json", RateLimited, "rate limit"),
    ],
)
def test_provider_errors_are_mapped_keeping_their_text(
    wire: WireServer, name: str, error: type[Exception], provider_words: str
) -> None:
    wire.queue(name)
    with pytest.raises(error) as caught:
        _model(wire, name.split("/")[0]).complete(CompletionRequest(ASK))
    assert provider_words in getattr(caught.value, "provider_text", "")


def test_malformed_tool_arguments_are_a_bad_response(wire: WireServer) -> None:
    wire.queue("openai/bad_tool_args.json")
    with pytest.raises(BadResponse, match="not JSON"):
        _model(wire, "openai").complete(CompletionRequest(ASK, [READ]))


def test_unreachable_server_says_so() -> None:
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = HostedModel(model_facts("openai/gpt-4o"), api_base=f"http://127.0.0.1:{port}", api_key=DUMMY_KEY)
    with pytest.raises(ModelUnavailable, match="unreachable"):
        model.complete(CompletionRequest(ASK))


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("openai/gpt-4o", "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-pro", "GEMINI_API_KEY"),
    ],
)
def test_missing_key_names_what_to_set(
    monkeypatch: pytest.MonkeyPatch, wire: WireServer, name: str, variable: str
) -> None:
    for var in (variable, "GOOGLE_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(AuthError, match="API key") as caught:
        HostedModel(model_facts(name), api_base=wire.url).complete(CompletionRequest(ASK))
    assert variable.split("_")[0].lower() in caught.value.provider_text.lower()
    assert wire.requests == []  # refused before anything was sent


def test_keys_are_never_recorded_in_fixtures() -> None:
    files = list(Path(FIXTURES).rglob("*.json"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert DUMMY_KEY not in text
        assert "sk-" not in text


def test_open_counter_is_calibrated_by_each_reply(wire: WireServer, tmp_path: Path) -> None:
    """DESIGN: hosted estimates are calibrated by the usage the provider reports (here 1290 tokens)."""
    settings = load_settings({"AVIBE_HOME": str(tmp_path)})
    model = HostedModel(model_facts("openai/gpt-4o"), api_base=wire.url, api_key=DUMMY_KEY)
    counter = open_counter("openai/gpt-4o", settings, model)
    assert isinstance(counter, CalibratedCounter) and counter.observations == 0
    wire.queue("openai/answer.json")
    model.complete(CompletionRequest(ASK, [READ]))
    assert counter.observations == 1
    assert counter.factor == 2.0  # 1290 reported for a ~40-token estimate: bounded, not trusted blindly


def test_retries_run_and_an_unreachable_server_still_says_so() -> None:
    """`open_model` asks LiteLLM for retries (DEFAULT_NUM_RETRIES); they need tenacity, which LiteLLM does
    not install itself: without it a connection error became "tenacity import failed"."""
    from avibe.providers.hosted import DEFAULT_NUM_RETRIES

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = HostedModel(
        model_facts("openai/gpt-4o"),
        api_base=f"http://127.0.0.1:{port}",
        api_key=DUMMY_KEY,
        num_retries=DEFAULT_NUM_RETRIES,
    )
    with pytest.raises(ModelUnavailable, match="unreachable") as caught:
        model.complete(CompletionRequest(ASK))
    assert "tenacity" not in str(caught.value)


def test_the_views_reminder_goes_as_a_harness_input_and_the_system_prompt_stays(wire: WireServer) -> None:
    """LiteLLM moves every system message of an Anthropic request into the one system
    prompt; the reminder after a user's message goes as a user-role harness input under Avibe's tag instead,
    so the system prompt (and its cache) is the same with and without it, and the note keeps its place."""
    note = "Before you answer:\nMessage #1:\n> Never touch vendor/."
    view = [
        ChatMessage("system", "You are Vibey."),
        ChatMessage("system", "What I remember (checkpoint 1)."),
        ChatMessage("user", "Clear out vendor/.", seq=9, kind="user"),
        ChatMessage("system", note, kind=REMINDER_KIND),
    ]
    for messages in (view, view[:3]):
        wire.queue("anthropic/answer.json")
        _model(wire, "anthropic").complete(CompletionRequest(messages, max_tokens=50))
    with_note, without = (r["body"] for r in wire.requests)
    assert with_note["system"] == without["system"]
    assert "Never touch vendor/" not in str(with_note["system"])
    sent = json.dumps(with_note["messages"], ensure_ascii=False)
    assert "[Harness: avibe]\\n│ Before you answer:" in sent and "│ > Never touch vendor/." in sent
    assert sent.index("Clear out vendor/.") < sent.index("[Harness: avibe]")  # after the user's message
