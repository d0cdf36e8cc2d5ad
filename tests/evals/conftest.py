"""Fixtures for the memory evaluation: a real token counter (tiktoken, offline) and the package's strict
`ScriptedModel` driven by a deterministic summariser, so every strategy can run without a real model."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from avibe.evals.strategy import REQUEST_KIND
from avibe.ports import TokenCounter
from avibe.providers.counting import TiktokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ModelReply


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TiktokenCounter("cl100k_base")


def naive_summary(request: ModelRequest) -> ModelReply:
    """A careless summariser: it retells every user-role input (tagged or not) as "the user asked", and
    lists the last assistant lines - the failure modes the metrics must catch (P3, T1)."""
    last = request.messages[-1]
    if last.kind != REQUEST_KIND:
        raise AssertionError(f"a compaction request must come from the harness, got kind {last.kind!r}")
    lines = ["## Summary"]
    for message in request.messages[1:-1]:
        if message.role == "user":
            text = message.content.splitlines()[-1]  # drops a tag line: the spoof reads as the user's
            lines.append(f"- The user asked: {text[:160]}")
        elif message.role == "assistant" and message.content:
            lines.append(f"- Done: {message.content[:80]}")
    return reply("\n".join(lines[-40:]), prompt_tokens=100, completion_tokens=50)


def answer_from_context(request: ModelRequest) -> ModelReply:
    """Answers a probe with the last 400 characters of the context (so exact answers may or may not be in
    it), or a judge verdict when asked for one."""
    if request.json_schema is not None:
        return reply('{"verdicts": [true]}')
    text = "\n".join(m.content for m in request.messages[:-1])
    return reply(text[-400:])


def respond(request: ModelRequest) -> ModelReply:
    if request.messages and request.messages[-1].kind == REQUEST_KIND:
        return naive_summary(request)
    return answer_from_context(request)


@pytest.fixture
def scripted() -> Callable[[int], ScriptedModel]:
    """A strict scripted model with `n` steps, each answered by `respond`."""

    def make(n: int) -> ScriptedModel:
        return ScriptedModel([respond] * n)

    return make
