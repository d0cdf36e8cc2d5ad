"""How fast llama.cpp reads a prompt in slices of each size, and how long a stop takes inside one.

The embedded model reads a streamed call's prompt in slices (avibe.providers.embedded._read_prompt) so
the person can stop it; llama.cpp's abort callback (avibe.providers.llama_abort) also lets a stop land
inside a slice. This prints, for each slice size, the prompt's tokens per second read in slices of that
size (rounds interleaved, so a busy machine slows every size alike), then the seconds from a stop asked
inside a slice to the evaluation returning, with and without the abort callback.

Run: `.venv/bin/python benchmarks/prompt_slices.py [--model embedded-1.5b] [--tokens 1024] [--rounds 3]`
(the model from `vibe models install`). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import Any

from avibe.config import load_settings
from avibe.providers.embedded import load_llama
from avibe.providers.llama_abort import AbortWatch
from avibe.providers.modelfile import embedded_spec, model_path

SIZES = (8, 16, 32, 64, 128, 512)


def _read(llama: Any, tokens: list[int], size: int) -> float:
    llama.reset()
    began = time.monotonic()
    for start in range(0, len(tokens), size):
        llama.eval(tokens[start : start + size])
    return len(tokens) / (time.monotonic() - began)


def _stop_latency(llama: Any, tokens: list[int], watched: bool) -> float:
    """Seconds from a stop asked 0.3 s into one evaluation of the whole prompt until it returned."""
    asked: list[float] = []
    timer = threading.Timer(0.3, lambda: asked.append(time.monotonic()))

    def beat() -> None:
        if asked:
            raise InterruptedError

    llama.reset()
    timer.start()
    try:
        if not watched:
            llama.eval(tokens)
        else:
            with AbortWatch(llama, beat) as watch:
                try:
                    llama.eval(tokens)
                except RuntimeError:
                    watch.raise_stopped()
                    raise
    except InterruptedError:
        pass
    ended = time.monotonic()
    timer.join()
    return ended - asked[0] if asked else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded-1.5b")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    path = model_path(load_settings().model_cache, embedded_spec(args.model))
    llama = load_llama(path, n_ctx=4096)
    text = "".join(f"line {i}: service-{i % 7} build {i} FAILED at step {i % 13}\n" for i in range(400))
    tokens = llama.tokenize(text.encode(), add_bos=False)[: args.tokens]
    speeds: dict[int, list[float]] = {size: [] for size in SIZES}
    for _ in range(args.rounds):
        for size in SIZES:
            speeds[size].append(_read(llama, tokens, size))
    print(f"{args.model}: {len(tokens)} prompt tokens, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    best = max(statistics.median(v) for v in speeds.values())
    for size in SIZES:
        median = statistics.median(speeds[size])
        print(f"slices of {size:>3}: {median:6.0f} tokens/s ({median / best:.2f}x the best)")
    for watched in (False, True):
        took = statistics.median([_stop_latency(llama, tokens, watched) for _ in range(args.rounds)])
        how = "with the abort callback" if watched else "without it (the slice runs to its end)"
        print(f"stop asked inside a {len(tokens)}-token evaluation -> returned: {took:.2f} s {how}")


if __name__ == "__main__":
    main()
