"""Harness overhead of Vibey, measured side by side in one run (no timed assertions in tests).

A scripted 200-turn session on a real SQLite record with the real tools: each turn reads a file and
answers; checkpoints happen whenever the window fills. Reports, per turn, the time the harness spends
outside the model (assemble the view + count tokens + record + run the tool) next to the total, and for
each checkpoint request the share of its prompt tokens that a prefix cache serves (the longest common
prefix with the request before it - what llama.cpp's KV cache and providers' prompt caches reuse).

    .venv/bin/python benchmarks/vibey_overhead.py [--turns 200] [--entries 10000] [--checkpoints 100]
        [--compare-with REV] [--busy]

`--compare-with REV` measures a git revision too (a temporary worktree, run in a subprocess) and prints
both side by side with their ratio; `--busy` keeps every core busy meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from avibe.agent.loop import RunConfig, Vibey
from avibe.host.session import SessionHost
from avibe.ports import CompletionRequest, StoredCheckpoint
from avibe.record.entries import NewEntry, Source
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools


class CharCounter:
    additive = True  # a request's count is the sum of its messages' (the loop may cache them)

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

    def complete(self, request: CompletionRequest) -> ModelReply:
        started = time.perf_counter()
        json_schema = request.json_schema
        if json_schema is not None and not self.previous_was_checkpoint():
            self.checkpoint_cache_shares.append(self._cached_share(request.messages))
        self._json = json_schema is not None
        self.previous = tuple(request.messages)
        reply = self._answer(json_schema)
        self.model_seconds += time.perf_counter() - started
        if request.stream is not None and reply.text:
            request.stream(reply.text)  # the harness's share includes passing a streamed reply on
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


class TimedTools:
    """The toolbox, timing the tools' own work (left out of the harness's share)."""

    def __init__(self, box: ToolBox) -> None:
        self.box, self.seconds = box, 0.0

    def dispatch(self, call: ToolCall) -> Any:
        started = time.perf_counter()
        try:
            return self.box.dispatch(call)
        finally:
            self.seconds += time.perf_counter() - started


def prefill(store: Any, session: str, entries: int, checkpoints: int) -> None:
    """A long session's past: `entries` record entries already taken in (moved out long ago) and
    `checkpoints` stored checkpoints, so each step runs against a record of that size."""
    at = datetime(2026, 11, 1, tzinfo=UTC)
    new = [
        NewEntry(session, Source("user", "bench") if i % 2 == 0 else Source("assistant", "vibey"),
                 f"old message {i}: " + "lorem ipsum dolor sit amet " * 8, at + timedelta(seconds=i))
        for i in range(entries)
    ]  # fmt: skip
    for start in range(0, len(new), 1_000):
        store.append_many(new[start : start + 1_000])
    # a mind this tree accepts (the four sections, M1's mission entry format): the checkpoints that follow
    # edit it through the normal path, not V8's strikes and model-free move-outs
    mind = (
        "## I am here\nReading the file queue for bench.\n\n## Goals\n### Mission\n"
        "- [M1] (active) Read every file of the queue in order\n\n### Workstreams\n"
        "- [W1] (active) file queue, oldest first\n\n## Key decisions\n\n## Lessons\n"
    )
    scene = "<checkpoint>\nCurrent step: reading the queue\n</checkpoint>"
    for n in range(checkpoints):
        upto = entries * (n + 1) // max(checkpoints, 1)
        store.save_checkpoint(_prefill_checkpoint(session, at, mind, scene, upto))
    store.save_state(session, "live", {"last_seq": entries, "messages": []})


def _prefill_checkpoint(session: str, at: datetime, mind: str, scene: str, upto: int) -> Any:
    """A stored checkpoint in the shape of the revision being measured (`--compare-with` runs this
    script on revisions from before the typed checkpoint values)."""
    try:
        from avibe.record.checkpoint import Provenance
    except ImportError:
        return StoredCheckpoint(session, 0, at, mind, [], scene, upto, {"trigger": "prefill"})  # type: ignore[arg-type]
    return StoredCheckpoint(session, 0, at, mind, (), scene, upto, provenance=Provenance(trigger="prefill"))


def busy_machine(seconds: float) -> list[subprocess.Popen[bytes]]:
    """One busy loop per core, bounded in time, so the numbers can be taken on a loaded machine too."""
    loop = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 1)]


def measure(turns: int, window: int, entries: int, checkpoints: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="avibe-bench-"))
    work = tmp / "work"
    work.mkdir()
    for i in range(turns):
        (work / f"f{i:03d}.txt").write_text(
            "".join(f"f{i:03d} line {n}: lorem ipsum dolor\n" for n in range(40))
        )
    store = open_store(f"sqlite:///{tmp / 'avibe.db'}")
    session = store.create_session(title="bench")
    prefill(store, session.id, entries, checkpoints)
    counter = CharCounter()
    model = BenchModel(window, counter)
    tools = TimedTools(ToolBox(default_tools(work, store=store, session_id=session.id)))
    vibey = Vibey(
        store=store,
        model=model,
        counter=counter,
        clock=Clock(),
        session_id=session.id,
        session_dir=tmp / "session",
        tool_specs=tools.box.specs,
        run_tool=tools.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    attempts = [0]  # checkpoint turns started, failed ones included (they are not stored)

    def note(event: Any) -> None:
        if getattr(event, "kind", "") == "checkpoint_started":
            attempts[0] += 1

    host = SessionHost(store, session.id, vibey, vibey.clock, note)  # the one inbox, as `vibe run` has it
    per_step: list[float] = []
    before_model, before_tools, before_checkpoints, before_attempts = 0.0, 0.0, checkpoints, 0
    for i in range(turns):
        model.queue(f"f{i:03d}.txt")
        started = time.perf_counter()
        result = host.send(f"Read f{i:03d}.txt please (turn {i}).", "user")
        total = time.perf_counter() - started
        harness = total - (model.model_seconds - before_model) - (tools.seconds - before_tools)
        before_model, before_tools = model.model_seconds, tools.seconds
        made = len(store.list_checkpoints(session.id))
        # turns with a checkpoint turn - stored or failed - are the checkpoint's cost, not a step's
        if made == before_checkpoints and attempts[0] == before_attempts:
            per_step.append(harness / max(result.steps, 1))
        before_checkpoints, before_attempts = made, attempts[0]
    ms = sorted(t * 1e3 for t in per_step)
    return {
        "steps_p50_ms": statistics.median(ms),
        "steps_p95_ms": ms[int(len(ms) * 0.95)],
        "checkpoints": float(before_checkpoints - checkpoints),
        "attempts": float(attempts[0]),
        "turns": float(turns),
    }


def _run_at(revision: str, argv: list[str]) -> dict[str, float]:
    """The measurement on another revision of Avibe (a git worktree), in a subprocess - by that revision's
    own copy of this script where it has one (its scripted model speaks that tree's model API)."""
    root = Path(__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="avibe-bench-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": str(folder / "src")}
        own = folder / "benchmarks" / Path(__file__).name
        script = own if own.exists() else Path(__file__)
        command = [sys.executable, str(script), *argv, "--json"]
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
        return dict(json.loads(out.splitlines()[-1]))
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(folder)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--entries", type=int, default=10_000, help="record entries already in the session")
    parser.add_argument("--checkpoints", type=int, default=100, help="checkpoints already stored")
    parser.add_argument("--compare-with", metavar="REV", help="also measure this git revision, side by side")
    parser.add_argument("--busy", action="store_true", help="measure with every core kept busy")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    hogs = busy_machine(600) if args.busy and not args.json else []
    try:
        sizes = ["--turns", str(args.turns), "--window", str(args.window), "--entries", str(args.entries),
                 "--checkpoints", str(args.checkpoints)]  # fmt: skip
        here = measure(args.turns, args.window, args.entries, args.checkpoints)
        if args.json:
            print(json.dumps(here))
            return
        other = _run_at(args.compare_with, sizes) if args.compare_with else None
    finally:
        for hog in hogs:
            hog.kill()
    print(f"turns {args.turns}, window {args.window}, a session of {args.entries} entries and "
          f"{args.checkpoints} checkpoints{'; every core busy' if args.busy else ''}")  # fmt: skip
    print("harness work per step (the model's and the tools' own time left out; checkpoint steps apart):")
    print(f"  {'':24} {'p50 ms':>8} {'p95 ms':>8} {'checkpoints':>12} {'attempts':>9}")
    rows = [("this tree", here)] + ([(f"at {args.compare_with}", other)] if other else [])
    for name, row in rows:
        tried = row.get("attempts", float("nan"))  # a revision before this column printed none
        print(
            f"  {name:24} {row['steps_p50_ms']:8.2f} {row['steps_p95_ms']:8.2f} {row['checkpoints']:12.0f}"
            f" {tried:9.0f}"
        )
    if other:
        for key, label in (("steps_p50_ms", "p50"), ("steps_p95_ms", "p95")):
            print(f"  {label} ratio (this / {args.compare_with}): {here[key] / other[key]:.2f}")


if __name__ == "__main__":
    main()
