"""Harness overhead of Vibey, measured side by side in one run (issue 5; no timed assertions in tests).

A scripted 200-turn session on a real SQLite record with the real tools: each turn reads a file and
answers; checkpoints happen whenever the window fills. Reports, per turn, the time the harness spends
outside the model (assemble the view + count tokens + record + run the tool) next to the total, and for
each checkpoint request the share of its prompt tokens that a prefix cache serves (the longest common
prefix with the request before it - what llama.cpp's KV cache and providers' prompt caches reuse).

    .venv/bin/python benchmarks/vibey_overhead.py [--turns 200] [--window 16000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from avibe.agent.loop import RunConfig, Vibey
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall, ToolSpec
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools


class CharCounter:
    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count(m.content) + 4 for m in messages)


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 11, 30, tzinfo=UTC)

    def now(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


SCENE = {
    "current_step": "reading the next file of the queue (workstream W1)",
    "progress": "done: every file before this one; in progress: the current file; pending: the rest",
    "waiting_for": "nothing: no background commands or questions open",
    "next_step": 'read the next file, as the user asked: "read them one by one"',
    "pitfalls": "none so far",
    "exact_references": "files f000.txt ... f199.txt in the working directory",
}


class BenchModel:
    """Answers turns (read a file, then reply) and any structured checkpoint question by its schema.
    Times itself so the harness's share can be told apart."""

    def __init__(self, window: int, counter: CharCounter) -> None:
        self._facts = ModelFacts(name="bench", window=window, max_output=1_000)
        self.counter = counter
        self.model_seconds = 0.0
        self.previous: tuple[ChatMessage, ...] = ()
        self.checkpoint_cache_shares: list[float] = []
        self.pending_read: str | None = None

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    def queue(self, path: str) -> None:
        self.pending_read = path

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ModelReply:
        started = time.perf_counter()
        if json_schema is not None and not self.previous_was_checkpoint():
            self.checkpoint_cache_shares.append(self._cached_share(messages))
        self._json = json_schema is not None
        self.previous = tuple(messages)
        reply = self._answer(json_schema)
        self.model_seconds += time.perf_counter() - started
        return reply

    def previous_was_checkpoint(self) -> bool:
        return getattr(self, "_json", False)

    def _cached_share(self, messages: Sequence[ChatMessage]) -> float:
        common = 0
        for a, b in zip(self.previous, messages, strict=False):
            if a != b:
                break
            common += 1
        total = self.counter.count_messages(messages)
        return self.counter.count_messages(messages[:common]) / total if total else 0.0

    def _answer(self, schema: Mapping[str, Any] | None) -> ModelReply:
        if schema is not None:
            return ModelReply(json.dumps(self._structured(schema)))
        if self.pending_read:
            path, self.pending_read = self.pending_read, None
            return ModelReply("", (ToolCall(f"r-{path}", "read_file", {"path": path}),))
        return ModelReply("Read it; the file lists lines of lorem ipsum.")

    @staticmethod
    def _structured(schema: Mapping[str, Any]) -> dict[str, Any]:
        props = schema["properties"]
        if "keep" in props:
            return {"keep": props["keep"]["items"]["enum"][-3:]}
        if "new" in props:
            return {"new": ["Read every file of the queue in order"], "status": []}
        if "workstreams" in props:
            return {"workstreams": [{"id": "new", "status": "active", "text": "file queue"}]}
        if "lessons" in props:
            return {"i_am_here": [], "decisions": [], "lessons": []}
        return SCENE


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=16_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="avibe-bench-"))
    work = tmp / "work"
    work.mkdir()
    for i in range(args.turns):
        (work / f"f{i:03d}.txt").write_text(
            "".join(f"f{i:03d} line {n}: lorem ipsum dolor\n" for n in range(40))
        )
    store = open_store(f"sqlite:///{tmp / 'avibe.db'}")
    session = store.create_session(title="bench")
    counter = CharCounter()
    model = BenchModel(args.window, counter)
    toolbox = ToolBox(default_tools(work, store=store, session_id=session.id))
    vibey = Vibey(
        store=store,
        model=model,
        counter=counter,
        clock=Clock(),
        session_id=session.id,
        session_dir=tmp / "session",
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    per_turn: list[float] = []
    model_before = 0.0
    for i in range(args.turns):
        model.queue(f"f{i:03d}.txt")
        started = time.perf_counter()
        vibey.send(f"Read f{i:03d}.txt please (turn {i}).")
        total = time.perf_counter() - started
        per_turn.append(total - (model.model_seconds - model_before))
        model_before = model.model_seconds
    checkpoints = store.list_checkpoints(session.id)
    shares = model.checkpoint_cache_shares
    print(f"turns: {args.turns}  window: {args.window}  checkpoints: {len(checkpoints)}")
    ms = sorted(t * 1e3 for t in per_turn)
    print(
        "harness overhead per turn (assemble + count + record + tool): "
        f"median {statistics.median(ms):.1f} ms, p95 {ms[int(len(ms) * 0.95)]:.1f} ms, max {ms[-1]:.1f} ms"
    )
    print(f"model time (scripted, for scale): {model.model_seconds * 1e3:.1f} ms in all")
    if shares:
        print(
            f"checkpoint requests' prompt tokens served by a prefix cache: min {min(shares):.1%}, "
            f"median {statistics.median(shares):.1%} over {len(shares)} checkpoints"
        )


if __name__ == "__main__":
    main()
