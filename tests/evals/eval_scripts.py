"""Scripted answers for the evaluation tests: a careless summariser, a correct structured checkpoint, and
a probe echo - deterministic functions of the request, played by the package's strict ScriptedModel."""

from __future__ import annotations

import json
from typing import Any

from avibe.evals.strategy import REQUEST_KIND
from avibe.ports import CompletionRequest
from avibe.providers.scripted import ModelRequest, reply
from avibe.record.messages import ModelFacts, ModelReply


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


SCENE = {
    "current_step": "working through the user's current task in the main workstream, step by step",
    "progress": "done: the earlier subtasks; in progress: the current one; pending: the rest",
    "waiting_for": "nothing open: no background commands or questions waiting",
    "next_step": "continue with the user's latest request, as the user asked",
    "pitfalls": "none so far beyond what the record shows",
    "exact_references": "the paths and ids named in the recent messages",
}


def checkpoint_answer(request: ModelRequest) -> ModelReply:
    """A correct answer to whichever structured checkpoint question this is (chosen by its schema): tick
    every candidate, add one mission entry the first time, one workstream, and a full scene."""
    assert request.json_schema is not None
    props = request.json_schema["properties"]
    data: dict[str, Any]
    if "keep" in props:
        data = {"keep": list(props["keep"]["items"]["enum"])}
    elif "new" in props:
        data = {
            "new": [] if "[M1]" in request.messages[-1].content else ["The task"],
            "status": [],
        }
    elif "workstreams" in props:
        known = "[W1]" in request.messages[-1].content  # update the workstream, do not add one each time
        data = {"workstreams": [{"id": "W1" if known else "new", "status": "active", "text": "task"}]}
    elif "lessons" in props:
        data = {"i_am_here": [], "decisions": [], "lessons": []}
    else:
        data = dict(SCENE)
    return reply(json.dumps(data))


def respond(request: ModelRequest) -> ModelReply:
    """Compaction requests get the naive summary, checkpoint questions a correct answer, probes an echo."""
    if request.messages and request.messages[-1].kind == REQUEST_KIND:
        return naive_summary(request)
    if request.json_schema is not None and "verdicts" not in request.json_schema["properties"]:
        return checkpoint_answer(request)
    return answer_from_context(request)


class Warm:
    """A model that only takes each agent step's request (a prompt cache being warmed, as
    `AvibeCheckpoint.warm` sends them): it answers nothing, and keeps what it was sent."""

    def __init__(self, window: int) -> None:
        self.facts = ModelFacts("scripted", window, 1024)
        self.sent: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> ModelReply:
        self.sent.append(request)
        return reply("")

    @staticmethod
    def recollection(request: CompletionRequest) -> str:
        """The recollection the step showed ("" before the first checkpoint): the second system message."""
        messages = request.messages
        return messages[1].content if len(messages) > 1 and messages[1].role == "system" else ""
