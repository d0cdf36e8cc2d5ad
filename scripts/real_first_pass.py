"""First-pass validity of Avibe's checkpoint on the real-session set (item 5).

Replays each session of `vibe eval --set real` (src/avibe/evals/real/) through the avibe-checkpoint
strategy on one model, at Vibey's own trigger for that model and window, and records every checkpoint:
valid at the model's first answer or not, the first answer's validation problems, whether the harness
completed the scene, repaired or fell back, and the notes of what the harness decided besides the
model's answer (a mission entry the guard dropped (M4), memo items kept or let go). No probes are asked:
this measures the checkpoint turn itself. Resumable: a session finished (OUT/sessions-done.txt) is skipped,
one cut short is replayed again. Writes OUT/checkpoints.jsonl (one line per checkpoint), OUT/summary.md,
and with --log-calls OUT/calls.jsonl (each call's question and the model's answer).

With --rejudge CALLS (a --log-calls run's calls.jsonl), the model is not run: the logged answers are given
back in order as the model's, so the harness as it is now judges the model's real first answers. Each
question asked must be the logged one, but for the lines that list the mind's own entries (an answer the
guard now ignores leaves them out); any other difference, or a logged call left unasked, stops the run
(the replay would no longer be the model's answers to the same questions). A call after the session's
logged ones - a repair the first answers now need - has no answer to give back: it fails as a model
error would (the checkpoint then fails or moves out without the model, as Vibey's would), and the row
says so ("unlogged_calls", and the problems the repair question named). Run it with the logged run's
--window and --max-checkpoints.

Usage:
  .venv/bin/python scripts/real_first_pass.py --model embedded --out eval-real/0.5b
  .venv/bin/python scripts/real_first_pass.py --model embedded-1.5b --out eval-real/1.5b --only pvcase-ops
  .venv/bin/python scripts/real_first_pass.py --model embedded --window 4096 --max-checkpoints 1 \
      --rejudge docs/eval/real-set/0.5b-4096/calls.jsonl --out docs/eval/real-set/0.5b-4096-rejudged
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from collections import Counter, deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from avibe.errors import BadResponse
from avibe.evals.realset import real_set
from avibe.evals.replay import Compaction, replay, trigger_fraction
from avibe.evals.scenario import Scenario
from avibe.evals.strategies import make_strategy
from avibe.ports import CompletionRequest, ModelClient
from avibe.record.messages import ModelFacts, ModelReply

ROWS = "checkpoints.jsonl"
DONE = "sessions-done.txt"  # a session is resumed from scratch unless it is named here
CALLS = "calls.jsonl"  # with --log-calls: each model call's question and the model's answer
_CODE = re.compile(r"\b([a-z]+\.[a-z_]+):")  # a validation problem's code ("scene.block_count: ...")
_NOISE = (
    re.compile(r"^session \S+: "),  # the replay's session prefix
    re.compile(r"\"[^\"]*\"|'[^']*'|\([^()]*[\d#][^()]*\)"),  # quoted text, a parenthesis with a number
    re.compile(r"\S*[\d#]\S*"),  # a word with a number: a message or mission number, a count
)


def kind_of(text: str, codes: bool = True) -> str:
    """What a problem or note is about, without its numbers and quotes, so that those of one kind count
    together: the validation codes a problem names ("scene.block_count"), else its first
    eight words without numbers or quotes ("mission entry M2 dropped (M4): it cites no user message since
    ..." -> "mission entry dropped: it cites no user message")."""
    named = list(dict.fromkeys(_CODE.findall(text))) if codes else []
    if named:
        return ", ".join(named)
    for pattern in _NOISE:
        text = pattern.sub(" ", text)
    words = " ".join(text.split()).replace(" :", ":").replace(" ,", ",").split()
    return " ".join(words[:8]).rstrip(",;:") or "(no words)"


class Enough(Exception):
    """Raised from the replay's callback when a session has given the checkpoints asked for."""


class Recording:
    """The model, with every call's question (the request's last message) and answer appended to a JSONL
    file: what the first answers said, beside what the harness made of them."""

    def __init__(self, model: ModelClient, path: Path) -> None:
        self.model, self.path, self.session = model, path, ""

    @property
    def facts(self) -> ModelFacts:
        return self.model.facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        reply = self.model.complete(request)
        line = {"session": self.session, "question": request.messages[-1].content, "answer": reply.text}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        return reply


class ReplayMismatch(Exception):
    """The harness asked what the logged run did not: the logged answers no longer answer its questions."""


# The lines of a question that list the mind's own entries ("- [W1] (active) ...", "W1: ...", "(none yet)"):
# what an answer the guard now ignores changes in later questions, and nothing else does.
_MIND_LISTING = re.compile(r"^(?:[-*+]\s+\[[MW]\d+\].*|[A-Z]\d+: .*|\(none yet\))$")


def _asked_alike(asked: str, logged: str) -> bool:
    def kept(text: str) -> list[str]:
        return [line for line in text.split("\n") if not _MIND_LISTING.match(line.strip())]

    return kept(asked) == kept(logged)


class Replayed:
    """A model that gives back a --log-calls run's answers, session by session, in order (--rejudge): the
    harness as it is now judges the model's real first answers, and no model runs. Each question must be
    the logged one but for the mind's listed entries (`_asked_alike`); otherwise ReplayMismatch."""

    def __init__(self, facts: ModelFacts, calls: Iterable[dict[str, Any]]) -> None:
        self._facts, self.session = facts, ""
        self.calls: dict[str, deque[dict[str, Any]]] = {}
        self.differences: list[str] = []  # questions that differ in the mind's listed entries only
        self.unlogged: dict[str, list[str]] = {}  # session -> the questions asked after its logged calls
        for call in calls:
            self.calls.setdefault(call["session"], deque()).append(call)

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        asked = request.messages[-1].content
        queue = self.calls.get(self.session)
        if self.session not in self.calls:
            raise ReplayMismatch(f"{self.session}: the log has no call of this session, asking:\n{asked}")
        if not queue:  # after the logged calls: a repair the first answers now need
            self.unlogged.setdefault(self.session, []).append(asked)
            raise BadResponse("--rejudge: the log has no answer to this call (the model did not run)")
        logged = queue.popleft()
        if asked != logged["question"]:
            if not _asked_alike(asked, logged["question"]):
                raise ReplayMismatch(
                    f"{self.session}: the question differs from the logged one beyond the mind's entries:"
                    f"\n--- logged\n{logged['question']}\n--- asked now\n{asked}"
                )
            self.differences.append(f"{self.session}: a question lists other mind entries than logged")
        return ModelReply(text=logged["answer"])

    def finish(self, session: str) -> None:
        """Every logged call of the session was asked again (none left over)."""
        left = self.calls.get(session)
        if left:
            raise ReplayMismatch(f"{session}: {len(left)} logged call(s) not asked, the first:\n"
                                 f"{left[0]['question']}")  # fmt: skip


_NAMED_PROBLEM = re.compile(r"^\d+\. (.+)$", re.MULTILINE)


def named_problems(question: str) -> list[str]:
    """The problems a repair question names ("1. In the scene: The scene block has 105 characters; ...")."""
    return _NAMED_PROBLEM.findall(question.split("Question:", 1)[0])


def row_of(scenario: Scenario, model: str, window: int, number: int, c: Compaction) -> dict[str, Any]:
    meta = c.meta
    return {
        "session": scenario.id,
        "model": model,
        "window": window,
        "checkpoint": number,
        "at_event": c.at_seq,
        "tokens_before": c.tokens_before,
        "tokens_after": c.tokens_after,
        "calls": c.calls,
        "seconds": c.seconds,
        "first_pass_valid": bool(meta.get("first_pass_valid")),
        "scene_completed": bool(meta.get("scene_completed")),
        "repaired": bool(meta.get("repaired")),
        "fallback": meta.get("fallback"),
        "problems": list(meta.get("problems", [])),
        "harness_notes": list(meta.get("harness_notes", [])),
    }


def untouched(row: dict[str, Any]) -> bool:
    """Valid at the first answer, and the harness dropped or ignored nothing of that answer: no scene part
    dropped (a repeat, a copy of tool output, labels), no answer ignored as copied from the question or
    as a repeat, no mission entry dropped. The eval's `first_pass_valid` counts a scene whose parts were
    dropped but not completed as valid; this does not."""
    notes = " ".join(row["harness_notes"])
    return bool(row["first_pass_valid"]) and "dropped" not in notes and "ignored" not in notes


def summary(rows: list[dict[str, Any]], header: dict[str, str]) -> str:
    """The report: per session and in all, the checkpoints and how many were valid at the first answer;
    the first answers' problems and the harness's notes by kind."""
    lines = ["# First-pass validity on the real-session set", ""]
    lines += [f"- **{key}**: {value}" for key, value in header.items()] + [""]
    lines += [
        "| session | checkpoints | valid at the first answer | ... with nothing of it dropped or ignored "
        "| scene completed | repaired | fallback | seconds (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sessions = sorted({r["session"] for r in rows})
    for name in [*sessions, "all"]:
        chosen = [r for r in rows if name in {"all", r["session"]}]
        if not chosen:
            continue
        seconds = sorted(r["seconds"] for r in chosen)
        lines.append(
            f"| {name} | {len(chosen)} | {sum(r['first_pass_valid'] for r in chosen)} | "
            f"{sum(untouched(r) for r in chosen)} | {sum(r['scene_completed'] for r in chosen)} | "
            f"{sum(r['repaired'] for r in chosen)} | "
            f"{sum(r['fallback'] is not None for r in chosen)} | {seconds[len(seconds) // 2]:.0f} |"
        )
    lines += ["", "First answers' validation problems, by kind:", ""]
    lines += _counted((p for r in rows for p in r["problems"]), codes=True)
    lines += ["", "What the harness decided besides the model's answer (notes), by kind:", ""]
    lines += _counted((n for r in rows for n in r["harness_notes"]), codes=False)
    return "\n".join(lines) + "\n"


def _counted(texts: Iterable[str], codes: bool) -> list[str]:
    counts = Counter(kind_of(t, codes) for t in texts)
    if not counts:
        return ["- none"]
    return [f"- {count} x {kind}" for kind, count in counts.most_common()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", action="append", default=[], help="a session id (repeat)")
    parser.add_argument(
        "--fetch-dir", type=Path, help="where fetched segments are (default: the fetch folder)"
    )
    parser.add_argument(
        "--log-calls", action="store_true", help=f"each call's question and answer: OUT/{CALLS}"
    )
    parser.add_argument("--max-checkpoints", type=int, help="stop each session after this many checkpoints")
    parser.add_argument(
        "--rejudge", type=Path, metavar="CALLS", help="replay a --log-calls run's answers (no model runs)"
    )
    args = parser.parse_args(argv)

    from avibe.config import load_settings
    from avibe.providers import model_facts, open_counter, open_model

    found = real_set(args.fetch_dir)
    for line in found.missing:
        print(line, file=sys.stderr)
    chosen = [s for s in found.scenarios if not args.only or s.id.removeprefix("real-") in args.only]
    logged: list[dict[str, Any]] = []
    if args.rejudge:
        logged = [json.loads(line) for line in args.rejudge.read_text(encoding="utf-8").splitlines() if line]
        chosen = [s for s in chosen if s.id in {call["session"] for call in logged}]
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / ROWS
    finished = args.out / DONE
    done = set(finished.read_text().split()) if finished.exists() else set()
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    rows = [r for r in rows if r["model"] != args.model or r["session"] in done]  # a run cut short: again
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    settings = load_settings()
    replayed = Replayed(model_facts(args.model), logged) if args.rejudge else None
    opened = replayed or open_model(args.model, settings)
    counter = open_counter(args.model, settings, None if replayed else opened)
    model: ModelClient = Recording(opened, args.out / CALLS) if args.log_calls else opened
    threshold = trigger_fraction(opened.facts, args.window)
    for scenario in chosen:
        if scenario.id in done:
            continue
        started, made = time.monotonic(), 0

        def keep(c: Compaction, scenario: Scenario = scenario) -> None:
            nonlocal made
            if not c.meta:
                return
            made += 1
            row = row_of(scenario, args.model, args.window, made, c)
            if replayed is not None:  # the calls after the logged ones: a repair with no logged answer
                unlogged = replayed.unlogged.pop(scenario.id, [])
                row["unlogged_calls"] = len(unlogged)
                row["repair_asked_for"] = named_problems(unlogged[0]) if unlogged else []
            rows.append(row)
            with out.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            print(
                f"{scenario.id} #{made}: valid at first answer {row['first_pass_valid']}, "
                f"problems {len(row['problems'])}, {row['seconds']:.0f} s",
                flush=True,
            )
            if args.max_checkpoints and made >= args.max_checkpoints:
                raise Enough

        if isinstance(model, Recording):
            model.session = scenario.id
        if replayed is not None:
            replayed.session = scenario.id
        with contextlib.suppress(Enough):  # the checkpoints asked for are made
            replay(scenario, make_strategy("avibe-checkpoint"), model, counter, args.window,
                   threshold=threshold, on_compaction=keep)  # fmt: skip
        if replayed is not None:
            replayed.finish(scenario.id)
        with finished.open("a", encoding="utf-8") as handle:
            handle.write(f"{scenario.id}\n")
        done.add(scenario.id)
        print(f"{scenario.id}: {made} checkpoints in {time.monotonic() - started:.0f} s", flush=True)
    header = {
        "model": args.model,
        "window": f"{args.window:,} tokens, trigger at {int(threshold * args.window):,} ({threshold:.0%})",
        "sessions": ", ".join(s.id for s in chosen),
        "command": " ".join(["scripts/real_first_pass.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    if replayed is not None:
        header["answers"] = (
            f"the model's logged answers ({args.rejudge}), judged by the harness as it is now; no model ran, "
            f"so the seconds are the harness's alone; questions that listed other mind entries than logged: "
            f"{len(replayed.differences)}; checkpoints whose first answers now needed a repair the log "
            f"cannot answer (failed as a model error would): "
            f"{sum(bool(r.get('unlogged_calls')) for r in rows if r['model'] == args.model)}"
        )
    mine = [r for r in rows if r["model"] == args.model]
    (args.out / "summary.md").write_text(summary(mine, header), encoding="utf-8")
    print(f"summary: {args.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
