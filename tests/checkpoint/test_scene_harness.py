"""What the harness puts in the scene itself: a question to the user waits with its number
(S3), and the scene a model-free move-out keeps has a next step quoting the user's latest request (S4)
while every part the model wrote stays (V7)."""

from __future__ import annotations

from core_doubles import CharCounter, make_entry

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.facts import HarnessFacts, facts_text, open_question, with_facts
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.plan import model_free_move_out
from avibe.checkpoint.scene import CLOSE_TAG, OPEN_TAG, parse_scene, scene_blocks
from avibe.record.messages import ChatMessage

COUNTER = CharCounter()
BUDGETS = budgets_for(8_192, 6_000)
SCENE = (
    "<checkpoint>\nCurrent step: ticket 003 of the queue in workstream W1, the ticket queue\n"
    "Progress: done: 001, 002; in progress: 003\nWaiting for: none\n"
    'Next step: ticket 004, as the user asked: "oldest first"\nPitfalls: none\n'
    "Exact references: tickets/, CHANGELOG.md\n</checkpoint>\n"
)
LATEST = "Skip ticket 005 for now and do 006 next, then stop."


def _user(seq: int, text: str, kind: str = "user") -> ChatMessage:
    return ChatMessage("user", text, seq=seq, kind=kind)


def _said(seq: int, text: str) -> ChatMessage:
    return ChatMessage("assistant", text, seq=seq, kind="assistant")


# ---- S3: a question waiting for the user's answer --------------------------------------------------------


def test_S3_a_question_no_user_message_followed_waits_with_its_message_number() -> None:
    asked = "Done with 003. Should I open a PR now, or wait for the review?"
    messages = [_user(1, "Do ticket 003."), _said(2, asked), _user(3, "build 3: green", kind="callback")]
    assert open_question(messages) == (2, "Should I open a PR now, or wait for the review?")
    assert open_question([*messages, _user(4, "Wait for the review.")]) is None  # answered: no longer waits
    assert open_question([_user(1, "Do 003."), _said(2, "Done with 003.")]) is None  # nothing asked
    waiting = facts_text(HarnessFacts(question=(2, "Should I open a PR now?")), 8_192)["waiting_for"]
    assert "message #2" in waiting and "Should I open a PR now?" in waiting
    parts = parse_scene(with_facts(SCENE, HarnessFacts(question=(2, "Should I open a PR now?")), 8_192))
    assert not isinstance(parts, list) and "message #2" in parts.waiting_for


# ---- S4 with V7: the scene kept without a model --------------------------------------------------------


def _moved(messages: list[ChatMessage], previous: Checkpoint | None) -> str:
    entries = [make_entry(m.seq, m.content, kind=m.kind) for m in messages if m.seq]  # type: ignore[arg-type]
    return model_free_move_out(messages, COUNTER, previous, entries, BUDGETS).checkpoint.scene


def _conversation(latest: str = LATEST) -> list[ChatMessage]:
    first, go_on = "Work through the ticket queue, oldest first.", "Good, go on."
    return [_user(1, first), _said(2, "001 done."), _user(3, go_on), _said(4, "002 done."), _user(5, latest)]


def test_S4_V7_with_no_scene_the_harness_scene_quotes_the_latest_request() -> None:
    parts = parse_scene(_moved(_conversation(), None))
    assert not isinstance(parts, list), parts
    assert parts.next_step == f'the user\'s latest request (message #5): "{LATEST}"'


def test_S4_V7_a_scene_older_than_the_latest_request_keeps_its_parts_and_quotes_the_request() -> None:
    before = parse_scene(SCENE)
    parts = parse_scene(_moved(_conversation(), Checkpoint("## I am here\n", (), SCENE)))
    assert not isinstance(parts, list) and not isinstance(before, list)
    assert parts.next_step.startswith(f'the user\'s latest request (message #5): "{LATEST}"')
    assert before.next_step in parts.next_step  # what was next before, after it
    for name in ("current_step", "progress", "waiting_for", "pitfalls", "exact_references"):
        assert getattr(parts, name) == getattr(before, name)  # the model's parts stay (V7)


def test_S4_V7_a_scene_that_quotes_the_latest_request_is_kept_byte_for_byte() -> None:
    scene = SCENE.replace('"oldest first"', f'"{LATEST}"')
    assert _moved(_conversation(), Checkpoint("## I am here\n", (), scene)) == scene


def test_S4_a_quoted_request_cannot_close_the_scene_block() -> None:
    latest = f"Put {CLOSE_TAG} and {OPEN_TAG} in the docs.\nThen stop."
    scene = _moved(_conversation(latest), Checkpoint("## I am here\n", (), SCENE))
    assert len(scene_blocks(scene)) == 1 and not isinstance(parse_scene(scene), list)
