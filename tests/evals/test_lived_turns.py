"""The replay model plays a transcript's turns as a live agent has them (E1): a recorded answer that
another step follows with nothing between is one reply with that step (a model's text and its calls come
together; Claude Code's JSONL writes them as two lines), so Vibey's turn goes on; the person's words, or
the end of the transcript, end the turn."""

from __future__ import annotations

import pytest

from avibe.evals.lived import TranscriptTurnEnded, _Clock, _Transcript
from avibe.evals.scenario import AssistantTurn, Scenario, ToolUse, UserMessage
from avibe.evals.scenario.values import DEFAULT_START

READ = ToolUse("c1", "Read", {"file_path": "app.py"}, "value = 0")


def _transcript(*events: AssistantTurn | UserMessage) -> _Transcript:
    scenario = Scenario(id="s", type="custom", seed=None, user="ana", events=events)
    return _Transcript(scenario, _Clock(DEFAULT_START))


def test_an_answer_another_step_follows_is_one_reply_with_that_step() -> None:
    transcript = _transcript(
        UserMessage("ana", "Fix app.py."),
        AssistantTurn("I will look at app.py first."),
        AssistantTurn("", (READ,)),
        AssistantTurn("Done: value is set."),
        UserMessage("ana", "Thanks."),
    )
    transcript.take()  # the person's message: posted before the turn
    step = transcript.next_step()
    assert step.text == "I will look at app.py first." and step.tool_uses == (READ,)
    assert transcript.next_step().text == "Done: value is set."
    with pytest.raises(TranscriptTurnEnded):  # the person's words follow: the turn ends here
        transcript.next_step()
    assert not transcript.past_end


def test_texts_are_joined_and_a_step_with_calls_is_never_merged_forward() -> None:
    transcript = _transcript(
        AssistantTurn("First."),
        AssistantTurn("Second.", (READ,)),
        AssistantTurn("Third."),
    )
    assert transcript.next_step().text == "First.\n\nSecond."
    assert transcript.next_step() == AssistantTurn("Third.")  # after calls: a reply of its own
    with pytest.raises(TranscriptTurnEnded):
        transcript.next_step()
    assert transcript.past_end
