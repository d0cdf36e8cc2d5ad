"""A checkpoint that fails never interrupts (U1, U2) but is not invisible: the chat's
meter says the last checkpoint fell back, the reason on hover; `vibe checkpoints` (the chat's `/checkpoints`)
and the inspector show the failed attempt's real problems on the move-out that followed it - never "no
problems" for a checkpoint that failed."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient
from vibey_doubles import BEFORE_STEPS, checkpoint_steps, tool_step, write_lines

from avibe.cli.checkpoints import _row
from avibe.host.events import CheckpointAccepted, CheckpointFailed, CheckpointFallback
from avibe.providers.scripted import reply
from avibe.tui.meter import FELL_BACK, Meter
from avibe.web.inspector import inspector_app

NOT_A_SCENE = "The scene is the same as before."


def _failing_checkpoint() -> list[Any]:
    """Four good answers, then a scene that is not JSON, twice (the repair fails too)."""
    return [*checkpoint_steps(4), reply(NOT_A_SCENE), reply("The scene is fine as it is.")]


def _fell_back(make_harness: Any) -> Any:
    bad = _failing_checkpoint()
    h = make_harness([*BEFORE_STEPS, tool_step("read_file", path="c.txt"), *bad, *bad, reply("c read")])
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 185)):  # c: over the hard limit
        write_lines(h.workdir, name, lines)
    h.send("Please read the files I name, one by one.")
    h.send("Now read b.txt.")
    result = h.send("Now read c.txt, then tell me what you saw.")
    assert not result.stopped and result.reply == "c read"  # the work went on (U1)
    h.model.assert_consumed()
    return h


def test_U2_a_move_out_after_a_failed_checkpoint_shows_the_real_problems_and_the_reason(
    make_harness: Any,
) -> None:
    h = _fell_back(make_harness)
    [stored] = h.checkpoints()
    failed = [e for e in h.events if isinstance(e, CheckpointFailed)]
    assert stored.meta["fallback"] == "model-free" and failed
    problems = stored.meta["problems"]
    assert problems and all(": " in p for p in problems)  # "code: message", as validation found them
    assert any(failed[-1].reason in note for note in stored.meta["notes"])  # the reason it fell back
    # `vibe checkpoints` (and the chat's /checkpoints) says why, by the problems' codes
    how = _row(stored, [])[3]
    assert how.startswith("model-free (checkpoint failed: ") and problems[0].split(":")[0] in how
    # the inspector shows those problems, never "No problems in the first answer"
    page = TestClient(inspector_app(h.store)).get(f"/s/{h.vibey.session_id}/checkpoints/1").text
    facts = page.split('<section class="three">')[0]
    assert "No problems in the first answer" not in facts
    assert "The checkpoint tried before this move-out failed on" in facts
    assert problems[0].split(":")[0] in facts and "fell back" in facts


def test_U1_the_meter_says_the_last_checkpoint_fell_back_until_one_is_saved(make_harness: Any) -> None:
    h = _fell_back(make_harness)
    meter = Meter(threshold=5_976, window=8_000)
    for event in h.events:
        meter = meter.after(event)
    assert meter.text().endswith(f"· {FELL_BACK}")
    assert "failed" in meter.fell_back and "(V7)" not in meter.fell_back  # the hover's reason, plain
    saved = meter.after(CheckpointAccepted(2, 6_000, 2_000, 5, 3.0, None))
    assert FELL_BACK not in saved.text() and not saved.fell_back
    assert any(isinstance(e, CheckpointFallback) for e in h.events)
