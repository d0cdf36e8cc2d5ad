"""Hosted models stream: given `on_text`, LiteLLM is asked for a stream, each content
delta goes to `on_text` as it arrives, and the reply is the same ModelReply as without streaming (text,
tool calls, usage); errors, also mid-stream, are mapped as for an unstreamed call. Against an
OpenAI-compatible server on loopback that answers `"stream": true` with Server-Sent Events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from provider_support import DUMMY_KEY, WireServer

from avibe.errors import AuthError, BadResponse, ContextOverflow, ModelError, ModelUnavailable, RateLimited
from avibe.ports import CompletionRequest
from avibe.providers.facts import model_facts
from avibe.providers.hosted import HostedModel
from avibe.record.messages import ChatMessage, ToolSpec
from openai_chat import ChatServer, serve_chat

READ = ToolSpec("read", "Read a text file.", {"type": "object", "properties": {"path": {"type": "string"}}})
ASK = [ChatMessage("system", "You are Vibey."), ChatMessage("user", "Do the tests pass?")]
TEXT = "Yes: all 42 tests pass, and the build is green."


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


def _with_call(content: str, arguments: str) -> dict[str, object]:
    call = {"id": "call_9", "type": "function", "function": {"name": "read", "arguments": arguments}}
    return {"role": "assistant", "content": content, "tool_calls": [call]}


def _model(url: str) -> HostedModel:
    return HostedModel(model_facts("openai/gpt-4o"), api_base=url, api_key=DUMMY_KEY)


def test_a_streamed_reply_is_the_unstreamed_one_and_comes_in_pieces(chat: ChatServer) -> None:
    model = _model(chat.url)
    prompts: list[int] = []
    model.on_prompt_usage(lambda _messages, tokens, _tools: prompts.append(tokens))
    chat.say(TEXT)
    plain = model.complete(CompletionRequest(ASK, max_tokens=50))
    chat.say(TEXT)
    pieces: list[str] = []
    streamed = model.complete(CompletionRequest(ASK, max_tokens=50, on_text=pieces.append))
    assert streamed == plain and streamed.text == TEXT
    assert len(pieces) > 5 and "".join(pieces) == TEXT  # as the server sent them, 4 characters a piece
    assert streamed.usage.prompt_tokens == 100 and streamed.usage.completion_tokens == 5  # reported
    assert prompts == [100, 100]  # the counter's calibration is fed either way
    assert "stream" not in chat.requests[0]
    assert chat.requests[1]["stream"] is True
    assert chat.requests[1]["stream_options"] == {"include_usage": True}


def test_streamed_tool_calls_are_the_same_and_never_shown(chat: ChatServer) -> None:
    model = _model(chat.url)
    chat.call("read", path="docs/a very long file name.md")
    plain = model.complete(CompletionRequest(ASK, [READ]))
    chat.call("read", path="docs/a very long file name.md")
    pieces: list[str] = []
    streamed = model.complete(CompletionRequest(ASK, [READ], on_text=pieces.append))
    assert streamed == plain and set(pieces) == {""}  # nothing shown; a heartbeat per chunk (ports.Model)
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        ("read", {"path": "docs/a very long file name.md"})
    ]
    chat.replies.append(_with_call("Reading it.", '{"path": "b"}'))
    both = model.complete(CompletionRequest(ASK, [READ], on_text=pieces.append))
    assert "".join(pieces) == both.text == "Reading it." and both.tool_calls[0].arguments == {"path": "b"}


def test_a_structured_call_never_streams(chat: ChatServer) -> None:
    chat.say('{"answer": "yes"}')
    pieces: list[str] = []
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    reply = _model(chat.url).complete(CompletionRequest(ASK, json_schema=schema, on_text=pieces.append))
    assert reply.text == '{"answer": "yes"}' and pieces == [] and "stream" not in chat.requests[0]


def test_an_error_mid_stream_is_mapped(chat: ChatServer) -> None:
    chat.fail_stream_after = 3  # the role chunk and two pieces, then an error event
    chat.say(TEXT)
    pieces: list[str] = []
    with pytest.raises(ModelError) as caught:
        _model(chat.url).complete(CompletionRequest(ASK, on_text=pieces.append))
    assert isinstance(caught.value, ModelUnavailable)
    assert "error while streaming" in caught.value.provider_text
    assert caught.value.__cause__ is not None  # the provider's exception is chained
    assert "".join(pieces) == TEXT[:8]  # what came before the error was shown


def test_streamed_tool_arguments_that_are_not_json_are_a_bad_response(chat: ChatServer) -> None:
    chat.replies.append(_with_call("", '{"path": "b'))
    with pytest.raises(BadResponse, match="not JSON"):
        _model(chat.url).complete(CompletionRequest(ASK, [READ], on_text=lambda _: None))


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("openai/rate_limit.json", RateLimited),
        ("openai/auth.json", AuthError),
        ("openai/context_overflow.json", ContextOverflow),
    ],
)
def test_errors_of_a_streamed_request_are_mapped_as_unstreamed(
    wire: WireServer, name: str, error: type[ModelError]
) -> None:
    """A server that refuses the streamed request (an error status) raises what the unstreamed call
    raises, with the same message."""
    model = HostedModel(model_facts("openai/gpt-4o"), api_base=wire.url, api_key=DUMMY_KEY)
    wire.queue(name, name)
    with pytest.raises(error) as unstreamed:
        model.complete(CompletionRequest(ASK, [READ]))
    with pytest.raises(error) as streamed:
        model.complete(CompletionRequest(ASK, [READ], on_text=lambda _: None))
    assert wire.requests[1]["body"]["stream"] is True
    assert str(streamed.value) == str(unstreamed.value)


def test_an_error_raised_by_on_text_is_not_the_providers(chat: ChatServer) -> None:
    def refuse(_: str) -> None:
        raise BrokenPipeError("the terminal went away")

    chat.say(TEXT)
    with pytest.raises(BrokenPipeError):
        _model(chat.url).complete(CompletionRequest(ASK, on_text=refuse))


def test_a_call_from_the_main_thread_leaves_no_event_loop_open(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LiteLLM logs each sync call through asyncio.get_event_loop(); on Python 3.11 that used to create a
    loop in the main thread that nobody closed (a ResourceWarning at some later garbage collection, in
    whatever ran then: it failed a CI run in the chat's tests)."""
    import asyncio
    import threading
    import time

    made: list[asyncio.AbstractEventLoop] = []
    original = asyncio.BaseEventLoop.__init__

    def remember(self: asyncio.BaseEventLoop) -> None:
        original(self)
        made.append(self)

    monkeypatch.setattr(asyncio.BaseEventLoop, "__init__", remember)
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(None)  # a fresh policy: the main thread of a new process, no loop set
    try:
        for on_text in (None, [].append):
            chat.say(TEXT)
            assert (
                _model(chat.url).complete(CompletionRequest(ASK, max_tokens=50, on_text=on_text)).text == TEXT
            )
        assert threading.current_thread() is threading.main_thread()
        deadline = time.monotonic() + 10
        while any(not loop.is_closed() for loop in made) and time.monotonic() < deadline:
            time.sleep(0.05)  # LiteLLM's logging threads close their own loops when they are done
    finally:
        asyncio.set_event_loop_policy(policy)
        open_loops = [loop for loop in made if not loop.is_closed()]
        for loop in open_loops:
            loop.close()  # (so a failure is this test's, not a warning in a later one)
    assert made and not open_loops
