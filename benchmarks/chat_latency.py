"""The chat's responsiveness in a real terminal (a pty): time to first paint, time until the session is
open (the embedded model loads after the screen is up), and keystroke-to-screen latency - with the chat
idle, and while the embedded model generates a reply - then how long Ctrl-C takes to stop that step.

Each keystroke is a character typed once only (Greek and Cyrillic letters), so its first appearance in
the terminal's output after the key was written is when it reached the screen.

Then how long Ctrl-C takes to stop work already running (benchmarks/stops.py): while the embedded model
reads a long prompt, while it streams a reply, while a real `sleep` runs in the shell tool, while Claude
Code works, and from a chat attached to a session `vibe serve` runs a `sleep` for. `--compare-with REV`
measures those on another git revision too (a temporary worktree, run in a subprocess: this benchmark
over that revision's Avibe), side by side in one run; `--stops-only` measures only them.

Run: `.venv/bin/python benchmarks/chat_latency.py [--model embedded] [--keys 20] [--compare-with REV]
[--stops-only]` (the embedded part needs `vibe models install`). A temporary AVIBE_HOME and working
folder; prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stops import Pty, measure_stops, print_stops, stops_at  # beside this file

KEYS = "αβγδεζηθικλμνξοπρστυφχψωбгджзилпфцчшщэюя"
PROMPT = "Write a 250-word story about a lighthouse keeper who counts ships. Plain text, no tools."


def _stats(name: str, samples: list[float]) -> None:
    if not samples:
        print(f"{name}: no samples")
        return
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"{name}: n={len(ms)}  p50 {statistics.median(ms):.1f} ms  p95 {p95:.1f} ms  max {ms[-1]:.1f} ms")


def _keystrokes(term: Pty, keys: str, gap: float) -> list[float]:
    latencies = []
    for key in keys:
        offset = term.write(key)
        sent = time.monotonic()
        arrived = term.wait_for(key, after=offset, timeout=10)
        if arrived is not None:
            latencies.append(arrived - sent)
        time.sleep(gap)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--keys", type=int, default=20, help="keystrokes per phase (at most 20)")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between keystrokes")
    parser.add_argument("--compare-with", metavar="REV", help="also measure the stops on this git revision")
    parser.add_argument("--stops-only", action="store_true", help="measure only Ctrl-C on running work")
    parser.add_argument("--only", default="", help="the stops to measure, by name: prompt,stream,shell,...")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    only = [name for name in options.only.split(",") if name]
    if options.json:  # a revision measured for --compare-with: the stops, as one JSON line
        print(json.dumps(measure_stops(only)))
        return
    if not options.stops_only:
        _typing(options)
    here = measure_stops(only)
    other = stops_at(options.compare_with, only) if options.compare_with else None
    print_stops(here, other, options.compare_with)


def _typing(options: argparse.Namespace) -> None:
    count = min(options.keys, len(KEYS) // 2)
    idle_keys, busy_keys = KEYS[:count], KEYS[count : 2 * count]
    root = Path(tempfile.mkdtemp(prefix="vibe-chat-bench-"))
    (root / "work").mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("AVIBE_") and k not in ("COLUMNS", "LINES")
    }
    env |= {"AVIBE_HOME": str(root / "home"), "AVIBE_MODEL": options.model, "TERM": "xterm-256color"}
    if "AVIBE_MODEL_CACHE" in os.environ:
        env["AVIBE_MODEL_CACHE"] = os.environ["AVIBE_MODEL_CACHE"]
    command = [sys.executable, "-c", "from avibe.cli import main; main()", "chat"]
    term = Pty(command, env, root / "work")
    try:
        _run(term, idle_keys, busy_keys, options.gap, options.model)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
        term.proc.wait()


def _run(term: Pty, idle_keys: str, busy_keys: str, gap: float, model: str) -> None:
    painted = term.wait_for("loading the model", timeout=120)
    opened = term.wait_for("new session", timeout=600)
    if painted is None or opened is None:
        print("the chat did not start; its output:\n" + term.data.decode(errors="replace")[-2000:])
        return
    print(f"model: {model}; cores: {os.cpu_count()}; terminal 110x32")
    print(f"time to first paint (process start -> screen with status bar): {painted - term.started:.2f} s")
    print(f"session open, model loaded (process start -> 'new session'): {opened - term.started:.2f} s")
    term.wait_for("idle", timeout=60)
    _stats("keystroke -> screen, idle", _keystrokes(term, idle_keys, gap))
    for _ in idle_keys:  # clear what was typed
        term.write("\x7f")
    time.sleep(0.5)
    offset = term.write(PROMPT)
    term.wait_for(PROMPT[-20:], after=offset, timeout=30)
    offset = term.write("\r")
    sent = time.monotonic()
    if term.wait_for("working", after=offset, timeout=60) is None:
        print("the turn did not start")
        return
    busy = _keystrokes(term, busy_keys, gap)
    streamed = term.wait_for("vibey›", after=offset, timeout=0.01)
    if streamed is not None:
        print(f"enter -> first streamed words of the reply: {streamed - sent:.2f} s")
    working = not term.seen("idle", after=offset)
    what = "reading the prompt / generating" if working else "partly after the turn had ended"
    _stats(f"keystroke -> screen, while the model works ({what})", busy)
    if working:
        cancel_at = term.write("\x03")
        pressed = time.monotonic()
        stopped = term.wait_for("step cancelled", after=cancel_at, timeout=300)
        if (
            stopped is not None
        ):  # a call that streams stops at its next piece; one that does not, when it returns
            print(f"Ctrl-C -> 'step cancelled' on screen: {stopped - pressed:.2f} s")
    term.write("\x03")
    time.sleep(0.3)
    term.write("\x03")
    term.proc.wait(30)


if __name__ == "__main__":
    main()
