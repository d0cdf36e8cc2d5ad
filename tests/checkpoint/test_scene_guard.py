"""The guard on a small model's free-text answers, on the 0.5B's real first answers:
filler that is not a repeat ("none yet, none, none, ...") and an echo of the questions with a few words
around it, or of an earlier question of the same turn, are dropped - and a real answer is never.

The real answers are those logged in docs/eval/real-set/0.5b-4096/calls.jsonl (every call's question and
the 0.5B's answer at the first checkpoint of each real session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from core_doubles import CharCounter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import Candidate
from avibe.checkpoint.mind import EMPTY_MIND, mission_lines
from avibe.checkpoint.structured import Work, apply_group, ask, remember_request
from avibe.checkpoint.structured.answers import quote_user_words
from avibe.checkpoint.structured.work import (
    ECHO_EXTRA_WORDS,
    ECHO_LONG_RUN,
    ECHO_MIN_WORDS,
    is_filler,
    norm,
    one_line,
    workstream_lines,
)

CALLS = Path(__file__).parents[2] / "docs" / "eval" / "real-set" / "0.5b-4096" / "calls.jsonl"
PARTS = ("mission", "workstreams", "notes", "scene")  # the questions of those first checkpoints, in order
BUDGETS = budgets_for(32_768, 28_000)  # room enough for every scene part the properties below write
REQUEST = "Add a dark mode toggle to the settings page and keep the old theme as the default."


def _logged() -> dict[str, dict[str, Any]]:
    """Session -> part -> the 0.5B's logged answer (parsed)."""
    found: dict[str, dict[str, Any]] = {}
    for line in CALLS.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        part = next((p for p in PARTS if f"Question: the {p}" in call["question"]), "notes")
        found.setdefault(call["session"].removeprefix("real-"), {})[part] = json.loads(
            call["answer"], strict=False
        )
    return found


LOGGED = _logged()
SESSIONS = "fundwise-zerion mclaude-audit mclaude-journals mclaude-panel pvcase-ops raveera-tickets"
assert sorted(LOGGED) == SESSIONS.split() and all(set(a) == set(PARTS) for a in LOGGED.values())


def _turn(answers: dict[str, Any]) -> Work:
    """A first checkpoint's questions asked one a call, as the turn asks them, each answered as logged."""
    work = Work.start(EMPTY_MIND, [Candidate(3, REQUEST)], BUDGETS, CharCounter())
    remember_request(work, "Checkpoint: the conversation is getting long. Answer each with JSON only.")
    for part in PARTS:
        asked = ask((part,), work)
        assert asked is not None
        apply_group(asked, work, json.dumps(answers[part]))
    return work


def _dropped(work: Work) -> list[str]:
    return [n for n in work.notes if n.startswith("scene part dropped")]


# ---- filler that is not a repeat ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "part"),
    [
        ("mclaude-journals", "current_step"),  # "none yet, none, none, none, ..."
        ("mclaude-journals", "progress"),  # "none yet, none yet, ..."
        ("mclaude-journals", "next_step"),
        ("raveera-tickets", "current_step"),
        ("raveera-tickets", "progress"),
        ("pvcase-ops", "current_step"),  # "none yet, waiting for user's request, no progress yet, none ..."
    ],
)
def test_S1_real_scene_parts_of_placeholders_are_filler_and_dropped(session: str, part: str) -> None:
    written = LOGGED[session]["scene"][part]
    assert is_filler(written)
    work = _turn(LOGGED[session])
    assert f"scene part dropped (filler): {part}" in work.notes
    assert written not in work.scene


def test_S1_a_short_real_answer_with_something_to_say_is_not_filler() -> None:
    for said in (
        "Waiting for the user's reply on #12",
        "Waiting for the user's reply.",
        "none yet, waiting for user's request, to report the work to the user.",  # mclaude-panel: words
        "No tests yet",
        "Nothing to do until CI run ci-88 finishes",
    ):
        assert not is_filler(said), said
    assert all(is_filler(t) for t in ("none yet none yet", "N/A - n/a", "no progress yet; waiting", "..."))


PLACEHOLDERS = ["none", "None yet", "none yet", "n/a", "N/A", "nothing", "no progress yet", "not yet", "TBD",
                "next step", "pitfalls", "waiting for"]  # fmt: skip
SEPARATORS = [", ", ",", "; ", " ", " - ", "... ", "/", " and ", ". ", " | ", "\n"]
CONTENT = st.text(alphabet="bcdfghjklmpqrvxz", min_size=3, max_size=9)  # no filler word has these letters


@given(
    pieces=st.lists(st.sampled_from(PLACEHOLDERS), min_size=1, max_size=12),
    separators=st.lists(st.sampled_from(SEPARATORS), min_size=13, max_size=13),
    content=st.none() | st.tuples(st.integers(0, 12), CONTENT),
    end=st.sampled_from(["", ",", ".", " ", "..."]),
)
@settings(max_examples=300, deadline=None)
def test_S1_placeholders_repeated_in_any_punctuation_are_filler_and_one_word_of_content_is_not(
    pieces: list[str], separators: list[str], content: tuple[int, str] | None, end: str
) -> None:
    """Any text made only of placeholders and separators says nothing, however long and however
    punctuated; one word of its own among them and it says something (the guard never drops it as
    filler)."""
    if content is not None:
        pieces.insert(min(content[0], len(pieces)), content[1])
    text = "".join(p + s for p, s in zip(pieces, separators, strict=False)).rstrip() + end
    assert is_filler(text) is (content is None), text


# ---- echoes of the questions --------------------------------------------------------------------------


def test_M1_a_real_workstream_that_is_the_mission_question_with_words_around_it_is_an_echo() -> None:
    """mclaude-journals' and raveera-tickets' workstream was the mission question after "The mission is";
    ignored, so no workstream is made of it (the workstream question asked after the mission's)."""
    for session in ("mclaude-journals", "raveera-tickets"):
        work = _turn(LOGGED[session])
        assert workstream_lines(work.mind) == {}, session
        assert any(n.startswith("answer echoes the words of a question, ignored") for n in work.notes)
        assert mission_lines(work.mind)  # the harness still writes the mission from the record (M4)
        assert REQUEST in work.mind
    # mclaude-panel's "The mission is to complete the project." shares no run of four words with any
    # question: the guard cannot tell it from a real one by the questions, and keeps it (see
    # docs/eval/real-set.md)
    work = _turn(LOGGED["mclaude-panel"])
    assert "- [W1] (active) The mission is to complete the project." in work.mind


def test_S1_a_real_scene_step_copied_from_the_earlier_mission_question_is_dropped() -> None:
    """fundwise-zerion's current step was the mission question (asked three calls before the scene's)
    after a few words of its own; it is dropped and completed from the mind, never kept as the model's."""
    work = _turn(LOGGED["fundwise-zerion"])
    assert "scene part dropped (echoes the question): current_step" in work.notes
    assert "There is no mission entry" not in work.scene and "Current entries" not in work.scene
    assert "Current step: (from the mind)" in work.scene


# the harness's own wording of the questions a first checkpoint asks
def _wordings() -> list[str]:
    work = Work.start(EMPTY_MIND, [Candidate(3, REQUEST)], BUDGETS, CharCounter())
    for part in PARTS:
        ask((part,), work)
    return work.asked


WORDINGS = _wordings()


def _fragment(data: st.DataObject, longest: int) -> tuple[str, list[str]]:
    wording = data.draw(st.sampled_from(WORDINGS)).split()
    size = data.draw(st.integers(ECHO_MIN_WORDS, min(longest, len(wording))))
    start = data.draw(st.integers(0, len(wording) - size))
    return " ".join(wording[start : start + size]), wording


def _scene_step(text: str) -> Work:
    """The scene's current step answered with `text`, after the other questions of a first checkpoint."""
    answers = {**LOGGED["mclaude-panel"], "scene": {**LOGGED["mclaude-panel"]["scene"], "current_step": text}}
    return _turn(answers)


@given(data=st.data(), own=st.lists(CONTENT, max_size=8))
@settings(max_examples=200, deadline=None)
def test_S1_a_phrase_of_a_question_asked_is_an_echo_unless_the_answer_has_words_of_its_own(
    data: st.DataObject, own: list[str]
) -> None:
    """Any answer holding ECHO_MIN_WORDS (but fewer than ECHO_LONG_RUN) consecutive words of a question
    asked in this turn - the scene's own or an earlier one - is dropped as an echo when at most
    ECHO_EXTRA_WORDS words of it are its own (in no question), before or after the phrase; with
    more, it is the model's answer and kept whole."""
    fragment, _ = _fragment(data, ECHO_LONG_RUN - 1)
    assume(not is_filler(fragment))  # "id new status and": key names, dropped as filler before any echo
    cut = data.draw(st.integers(0, len(own)))
    text = " ".join([*own[:cut], fragment.capitalize(), *own[cut:]]) + "."
    work = _scene_step(text)
    dropped = "scene part dropped (echoes the question): current_step" in work.notes
    assert dropped is (len(own) <= ECHO_EXTRA_WORDS), (text, work.notes)
    if not dropped:
        assert not any("current_step" in n for n in _dropped(work)) and norm(text) in norm(work.scene)


# ---- a scene completed from a user message still in the conversation (the 1.5B, real set) -------------


def _scene_only(candidates: list[Candidate], said: dict[int, str], scene: dict[str, str]) -> Work:
    work = Work.start(EMPTY_MIND, candidates, BUDGETS, CharCounter())
    work.said, work.since = said, frozenset(said)
    asked = ask(("scene",), work)
    assert asked is not None
    apply_group(asked, work, json.dumps(scene))
    return work


ONE_SENTENCE = "none, the user is still in the morning session. They are searching for COSMIC desktop applet"
REPEATED = {
    "current_step": ONE_SENTENCE,
    "progress": ONE_SENTENCE,
    "next_step": ONE_SENTENCE,
    "pitfalls": "none",
}


def test_S4_a_scene_whose_repeats_were_dropped_quotes_the_latest_request_still_in_the_conversation() -> None:
    """The 1.5B's first checkpoint of mclaude-journals: one sentence in every part (the repeats dropped),
    no mind to complete from and no user message moving out - the scene failed V1 at 193 characters after
    a repair. The newest user message since the last checkpoint, still in the conversation, is quoted as
    the next step, as a message moving out is."""
    for candidates, said, seq in (([Candidate(3, REQUEST)], {}, 3), ([], {3: "older words", 7: REQUEST}, 7)):
        work = _scene_only(candidates, said, REPEATED)
        assert f'the user\'s message #{seq}: "{REQUEST}"' in work.scene, work.scene
        assert len(work.scene) >= 200 and any("next_step completed from the record" in n for n in work.notes)
    nothing = _scene_only([], {}, REPEATED)  # nothing the user said to quote: nothing invented
    assert "the user's message #" not in nothing.scene


def test_S4_the_scene_quotes_the_users_newest_words_not_an_older_request_they_corrected() -> None:
    """The eval's self_correction on the 0.5B: the request moving out ("set it to 48") was quoted as the
    next step while the user's correction ("I meant 16, not 48") was still in the conversation, and the
    model answered 48. The newest user message that says something is quoted; a later "Thanks. What's
    next?" (N3) is not it."""
    asked = "Set the max_connections of the pool to 48."
    corrected = "Correction: I meant the max_connections of the pool must be 16, not 48."
    said = {2: asked, 4: corrected, 6: "Thanks. What's next?"}
    work = _scene_only([Candidate(2, asked)], said, REPEATED)
    assert f'the user\'s message #4: "{corrected}"' in work.scene, work.scene
    assert "#2:" not in work.scene and "#6:" not in work.scene


def test_S4_a_long_request_is_quoted_with_its_opening_and_its_end_cut_at_words() -> None:
    """A correction's value is at its end: the quote keeps both ends, each cut at a space, never inside
    a word or number ("must be 1" and "pool must..." had hidden the corrected 16)."""
    said = "Correction: I meant the max_connections of the marrowgate-indexer pool must be 16, not 48."
    long = " ".join([said] * 20)
    work = _scene_only([Candidate(2, long)], {2: long}, REPEATED)
    quoted = work.scene.split("the user's message #2: \"", 1)[1].split('"', 1)[0]
    head, tail = quoted.split(" ... ")
    assert long.startswith(head) and long[len(head)] == " "  # the opening, cut at a space
    assert long.endswith(tail) and long[-len(tail) - 1] == " " and tail.endswith("must be 16, not 48.")
    assert len(quoted) < len(long)


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text("abcdefgh0123456789,.", min_size=1, max_size=12), min_size=1, max_size=60),
    limit=st.integers(min_value=20, max_value=160),
)
def test_S4_a_quote_fits_its_room_and_is_the_users_words_at_both_ends(words: list[str], limit: int) -> None:
    text = one_line(" ".join(words), 10_000)  # the words on one line ("" when they are only filler)
    quoted = quote_user_words(text, limit)
    assert len(quoted) <= limit
    if len(text) <= limit:
        assert quoted == text
    else:
        # the user's words may hold " ... " themselves: some split of the quote is their two ends
        pieces = quoted.split(" ... ")
        ends = [(" ... ".join(pieces[:i]), " ... ".join(pieces[i:])) for i in range(1, len(pieces))]
        assert any(text.startswith(head) and text.endswith(tail) for head, tail in ends)
