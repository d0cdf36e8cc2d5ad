"""Embedded model on this machine: load time, prompt and generation tokens/s, cached share of a request
that extends the previous one (and of a checkpoint turn appended to a long live conversation).

Run: `.venv/bin/python benchmarks/models.py` (needs `vibe models install`). Prints; asserts nothing.
"""

from __future__ import annotations

import time

import llama_cpp

from avibe.config import load_settings
from avibe.providers.embedded import EmbeddedModel, open_embedded
from avibe.record.messages import ChatMessage, ToolSpec

FILLER = "We refactor the parser module, keep the tests green and write down each decision. "


def _conversation(rounds: int) -> list[ChatMessage]:
    convo = [ChatMessage("system", "You are Vibey, a concise coding assistant.")]
    for i in range(rounds):
        convo.append(ChatMessage("user", f"Step {i}: " + FILLER * 8))
        convo.append(ChatMessage("assistant", f"Step {i} done; the tests pass."))
    return convo


def _perf(model: EmbeddedModel) -> tuple[float, int, float, int]:
    data = llama_cpp.llama_perf_context(model.llama._ctx.ctx)
    return data.t_p_eval_ms, data.n_p_eval, data.t_eval_ms, data.n_eval


def main() -> None:
    start = time.perf_counter()
    model = open_embedded("embedded", load_settings().model_cache)
    seconds = time.perf_counter() - start
    print(f"load (incl. verification via sidecar): {seconds:.2f} s, n_ctx {model.facts.window}")

    convo = _conversation(10)
    before = _perf(model)
    first = model.complete([*convo, ChatMessage("user", "Summarise the work.")], max_tokens=64)
    after = _perf(model)
    p_ms, p_n = after[0] - before[0], after[1] - before[1]
    g_ms, g_n = after[2] - before[2], after[3] - before[3]
    print(f"prompt: {p_n} tokens in {p_ms / 1000:.2f} s = {p_n / (p_ms / 1000):.0f} tok/s")
    print(f"generation: {g_n} tokens in {g_ms / 1000:.2f} s = {g_n / (g_ms / 1000):.1f} tok/s")

    extended = [*convo, ChatMessage("user", "Summarise the work."), ChatMessage("assistant", first.text)]
    extended.append(ChatMessage("user", "And what is next?"))
    t0 = time.perf_counter()
    second = model.complete(extended, max_tokens=8)
    share = second.usage.cached_tokens / second.usage.prompt_tokens
    print(
        f"extending request: {second.usage.cached_tokens}/{second.usage.prompt_tokens} prompt tokens cached "
        f"({share:.1%}), {time.perf_counter() - t0:.2f} s"
    )

    checkpoint = [*extended, ChatMessage("assistant", second.text)]
    checkpoint.append(ChatMessage("user", "Checkpoint: update the mind file, then the scene."))
    tools = [
        ToolSpec("edit_mind", "Replace a section of the mind file.", {"type": "object", "properties": {}})
    ]
    t0 = time.perf_counter()
    turn = model.complete(checkpoint, tools, max_tokens=48)
    share = turn.usage.cached_tokens / turn.usage.prompt_tokens
    print(
        f"checkpoint turn (with tools): {turn.usage.cached_tokens}/{turn.usage.prompt_tokens} cached "
        f"({share:.1%}), {time.perf_counter() - t0:.2f} s"
    )


if __name__ == "__main__":
    main()
