"""Embedded model on this machine: load time, prompt and generation tokens/s, cached share of a request
that extends the previous one (and of a checkpoint turn appended to a long live conversation).

Run: `.venv/bin/python benchmarks/models.py` (needs `vibe models install`). Prints; asserts nothing.

`benchmarks/models.py --agent [TIER ...]` measures each embedded tier as Vibey's agent instead (the figures
that chose the default tier, docs/configuration.md): two tasks through `vibe run --json` in a fresh folder
and home - "Say hi in five words" and a three-step edit - with the wall time, the model steps, the time
per step, whether the turn ended in a loop stop, and whether the edit's files came out right. The machine's
load average is printed with each figure (on 2 shared cores it changes the times several-fold).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import llama_cpp

from avibe.config import load_settings
from avibe.ports import CompletionRequest
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
    first = model.complete(
        CompletionRequest([*convo, ChatMessage("user", "Summarise the work.")], max_tokens=64)
    )
    after = _perf(model)
    p_ms, p_n = after[0] - before[0], after[1] - before[1]
    g_ms, g_n = after[2] - before[2], after[3] - before[3]
    print(f"prompt: {p_n} tokens in {p_ms / 1000:.2f} s = {p_n / (p_ms / 1000):.0f} tok/s")
    print(f"generation: {g_n} tokens in {g_ms / 1000:.2f} s = {g_n / (g_ms / 1000):.1f} tok/s")

    extended = [*convo, ChatMessage("user", "Summarise the work."), ChatMessage("assistant", first.text)]
    extended.append(ChatMessage("user", "And what is next?"))
    t0 = time.perf_counter()
    second = model.complete(CompletionRequest(extended, max_tokens=8))
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
    turn = model.complete(CompletionRequest(checkpoint, tools, max_tokens=48))
    share = turn.usage.cached_tokens / turn.usage.prompt_tokens
    print(
        f"checkpoint turn (with tools): {turn.usage.cached_tokens}/{turn.usage.prompt_tokens} cached "
        f"({share:.1%}), {time.perf_counter() - t0:.2f} s"
    )


EDIT_TASK = (
    "Three steps: in notes.txt change the word colour to color; then append the line 'Reviewed.' to "
    "notes.txt; then create done.txt containing the single word yes."
)
EDIT_FILES = {"notes.txt": "Pick a colour for the logo.\n"}


def _edit_result(folder: Path) -> str:
    """Which of the edit task's three steps are in the files (judged from the files, not the reply)."""
    notes = (folder / "notes.txt").read_text(encoding="utf-8") if (folder / "notes.txt").exists() else ""
    done = folder / "done.txt"
    steps = {
        "color": "color" in notes and "colour" not in notes,
        "appended": "Reviewed." in notes,
        "done.txt": done.exists() and done.read_text(encoding="utf-8").strip().lower() == "yes",
    }
    return ", ".join(f"{k} {'ok' if v else 'MISSING'}" for k, v in steps.items())


def _agent_task(tier: str, task: str, files: dict[str, str]) -> str:
    """One `vibe run --json` of `task` on `tier` in a fresh folder and Avibe home; one line of figures."""
    with tempfile.TemporaryDirectory(prefix="avibe-tier-") as tmp:
        folder, home = Path(tmp, "work"), Path(tmp, "home")
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        env = {**os.environ, "AVIBE_HOME": str(home), "AVIBE_MODEL": tier}
        vibe = str(Path(sys.executable).with_name("vibe"))
        load = os.getloadavg()[0]
        start = time.perf_counter()
        done = subprocess.run(
            [vibe, "run", "--json", task], cwd=folder, env=env, capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - start
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        calls = [e for e in events if e["kind"] == "model_call"]
        stops = [e["message"] for e in events if e["kind"] == "stop"]
        replies = [e["text"] for e in events if e["kind"] == "reply"]
        per_step = sum(e["seconds"] for e in calls) / max(1, len(calls))
        outcome = f"LOOP STOP ({stops[0][:90]})" if stops else f"answered {(replies or [''])[-1][:60]!r}"
        judged = f"; files: {_edit_result(folder)}" if files else ""
        return (
            f"{tier}: {seconds:.0f} s, {len(calls)} steps, {per_step:.1f} s/step, {outcome}{judged} "
            f"(load {load:.2f} at start, {os.getloadavg()[0]:.2f} at end)"
        )


def agent_tiers(tiers: list[str]) -> None:
    for tier in tiers:
        print(_agent_task(tier, "Say hi in five words", {}), flush=True)
        print(_agent_task(tier, EDIT_TASK, EDIT_FILES), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent"]:
        agent_tiers(sys.argv[2:] or ["embedded", "embedded-1.5b"])
    else:
        main()
