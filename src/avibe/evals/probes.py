"""Probes: questions answered by the model from the compacted context (item 3).

exact       the expected id/number/path must appear in the reply as words of its own (`says`: case and
            whitespace aside, "$40" not inside "$400");
rubric      a judge model marks each rubric item pass/fail (JSON), the probe passes when all pass;
next_action the reply must say one of `expect` and none of `forbid` (tool call arguments included), and
            be more than an echo: a reply whose words are mostly copied from what the model was shown - a
            user's message, the strategy's own text, the reminder, the question - in runs of ECHO_RUN words
            or more fails (`echoed`). The 1.5B answered "Write the pool settings now." with the user's
            correction word for word ("I meant the max_connections ... must be 16, not 48.") and with the
            reminder's own opening; a substring check passed both, yet neither does anything. A reply
            that opens with a refusal in the model's own voice ("I will not ...") is an answer, whatever
            it quotes after it, unless that opening is itself copied.

A judge reply that is not the JSON asked for is a recorded failure of the judge (passed = None), never
a silent pass or fail.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from avibe.context.reminder import reminder
from avibe.evals.metrics import normalise
from avibe.evals.scenario import Probe
from avibe.evals.strategy import fit_request
from avibe.ports import CompletionRequest, ModelClient, TokenCounter
from avibe.prompts import render
from avibe.record.checkpoint import MemoItem
from avibe.record.messages import REMINDER_KIND, ChatMessage, ModelReply

log = logging.getLogger(__name__)
ANSWER_TOKENS: Final = 256
ECHO_RUN: Final = 6  # words in a row copied from one text shown to the model ...
ECHO_SHARE: Final = 0.8  # ... that make up this share of a reply's words: an echo, not an answer
# The reminder's earlier wording: the committed reports' replies were checked against it, and a rescore must
# give them the same verdicts.
EARLIER_REMINDERS: Final = (
    "Before you answer the user's message above: the user's earlier words about what it asks, copied from "
    "your recollection word for word, with their message numbers, oldest first (where they disagree, the "
    "later words hold):\n\nWhere the message above goes against them, do not do it yet: say so and ask the "
    "user.",
)
JUDGE_PROMPT: Final = """\
You grade an assistant's answer against a rubric. Judge only what the answer says.

Question: {question}

Answer:
{answer}

Rubric items:
{items}

Reply with JSON only: {{"verdicts": [true or false for each rubric item, in order]}}"""
JUDGE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {"type": "boolean"}}},
    "required": ["verdicts"],
}


@dataclass(frozen=True, slots=True)
class ProbeResult:
    id: str
    kind: str
    passed: bool | None  # None: the judge failed to give a usable verdict
    reply: str
    detail: str = ""
    tokens: int = 0
    calls: int = 0
    reminded: tuple[int, ...] = ()  # the memo's message numbers the reminder after the question quoted

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "passed": self.passed,
            "reply": self.reply,
            "detail": self.detail,
            "tokens": self.tokens,
            "calls": self.calls,
            "reminded": list(self.reminded),  # numbers only: fit to commit for any session
        }


def _spent(reply: ModelReply, sent: Sequence[ChatMessage], counter: TokenCounter) -> int:
    reported = reply.usage.prompt_tokens + reply.usage.completion_tokens
    return reported or counter.count_messages(sent) + counter.count(reply.text)


def _reply_text(reply: ModelReply) -> str:
    calls = " ".join(f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)}" for c in reply.tool_calls)
    return f"{reply.text}\n{calls}".strip()


_MARKUP_GAP: Final = r"[\"'`*“”‘’]*\s[\"'`*“”‘’]*"  # a space, and the quotes and emphasis around it


def _spoken(phrase: str, reply: str) -> tuple[str, list[re.Match[str]]]:
    """The reply normalised, and where in it the phrase stands as words of its own."""
    words, text = normalise(phrase), normalise(reply)
    if not words:
        return text, []
    # a plain word is said by an identifier's snake_case part: "the `refresh_token` method" says "refresh"
    # (the handoff's answer to a real session's token probe failed on the underscore); a name with a dot
    # or a slash is not ("parameters.yml" is no part of "app_parameters.yml")
    plain = re.fullmatch(r"[^\W_]+(?: [^\W_]+)*", words) is not None
    edge = r"[^\W_]" if plain else r"\w"
    before = rf"(?<!{edge})" if re.match(r"\w", words) else ""
    after = rf"(?!{edge})" if re.search(r"\w$", words) else ""
    # the words of a plain phrase, written with quotes or emphasis around one of them, are said: the
    # handoff's 'the "🧮 CALCULADORA" tab' failed "calculadora tab" on its quote
    body = _MARKUP_GAP.join(map(re.escape, words.split(" "))) if plain else re.escape(words)
    return text, list(re.finditer(before + body + after, text))


def says(phrase: str, reply: str) -> bool:
    """Whether the reply says the phrase as words of its own, case and spacing aside: "ask" is not said
    by "The user asks to patch ...", "$40" not by "$400", "16" not by "160" (a substring check passed all
    three - the late_rule probe once counted the first as asking)."""
    return bool(_spoken(phrase, reply)[1])


# Words that, shortly before a forbidden phrase in the same clause, say it is not done: "pin the images,
# not :latest", "commit without the Co-Authored-By: Claude trailer", "I won't run git push origin main".
_NEGATIONS: Final = re.compile(
    r"\b(?:not|no|never|without|don't|dont|won't|wont|cannot|can't|avoid|avoiding|instead of|rather than)\b"
)
_CLAUSE_END: Final = re.compile(r"[.;!?]|,\s")  # on normalised text: no line breaks left
NEGATION_REACH: Final = 4  # words between a negation and the phrase it governs


def _negated(before: str) -> bool:
    """Whether the text just before a phrase (same clause, a few words) negates it."""
    clause = _CLAUSE_END.split(before)[-1]
    words = clause.split()
    return bool(_NEGATIONS.search(" ".join(words[-(NEGATION_REACH + 1) :])))


def does(phrase: str, reply: str) -> bool:
    """Whether the reply says the phrase (`says`) other than as what it will not do: a reply that keeps
    the rule by quoting it ("pin base image versions, not :latest") has not done the forbidden thing,
    and a forbidden phrase counts only where it stands without a negation just before it."""
    text, found = _spoken(phrase, reply)
    return any(not _negated(text[: m.start()]) for m in found)


def check_exact(answer: str, reply: str) -> bool:
    return says(answer, reply)


def check_next_action(probe: Probe, reply: str, shown: Sequence[str] = ()) -> tuple[bool, str]:
    """`shown`: the texts the model was shown (`echo_sources`); a reply mostly copied from them fails."""
    named = [e for e in probe.expect if says(e, reply)]
    forbidden = [f for f in probe.forbid if does(f, reply)]
    if forbidden:
        return False, f"forbidden: {forbidden}"
    if echoed(reply, [*shown, probe.question]):
        return False, "an echo of what it was shown, not an answer"
    passed = not probe.expect or bool(named)
    return passed, "" if passed else f"none of {list(probe.expect)}"


def _words(text: str) -> list[str]:
    return re.sub(r"[\W_]+", " ", text.casefold()).split()


# A reply that opens with a refusal in the model's own voice acts on the rule it goes on to quote: "I will
# not change the public API in src/x/wire/; other teams import it." declines, where the user's "Never
# change the public API in src/x/wire/; ..." copied alone does not (the 1.5B).
_OWN_REFUSALS: Final = tuple(
    tuple(opening.split())
    for opening in (
        "i will not", "i won t", "i cannot", "i can t", "i can not", "i must not", "i shall not",
        "i should not", "i shouldn t", "i do not", "i don t", "i m not going to", "i am not going to",
    )
)  # fmt: skip


def _opens_with_own_refusal(words: Sequence[str], covered: Sequence[bool]) -> bool:
    start = 1 if words[:1] == ["no"] else 0
    for opening in _OWN_REFUSALS:
        end = start + len(opening)
        if tuple(words[start:end]) == opening and not any(covered[:end]):
            return True
    return False


def echoed(reply: str, shown: Sequence[str]) -> bool:
    """Whether at least ECHO_SHARE of the reply's words lie in runs of ECHO_RUN or more words found, in
    that order, in one of the `shown` texts (a reply shorter than a run is never an echo), unless the reply
    opens with a refusal of its own ("I will not ...") that is itself copied from nothing shown."""
    words = _words(reply)
    if len(words) < ECHO_RUN:
        return False
    covered = [False] * len(words)
    for text in shown:
        source = _words(text)
        grams = {tuple(source[i : i + ECHO_RUN]) for i in range(len(source) - ECHO_RUN + 1)}
        for i in range(len(words) - ECHO_RUN + 1):
            if tuple(words[i : i + ECHO_RUN]) in grams:
                covered[i : i + ECHO_RUN] = [True] * ECHO_RUN
    if _opens_with_own_refusal(words, covered):
        return False
    return sum(covered) >= ECHO_SHARE * len(words)


def echo_sources(user_texts: Sequence[str], carried: Sequence[str]) -> tuple[str, ...]:
    """What a probe's reply must not merely copy: the scenario's user messages, the texts the strategy
    carried into the context (a recollection, a summary) and the reminder's own wording. The same for a
    run and for its rescore from the stored row, so a verdict does not change when checked again."""
    return (*user_texts, *carried, render("rules_touched", memo=""), *EARLIER_REMINDERS)


def recheck(probe: Probe, stored: dict[str, Any], shown: Sequence[str] = ()) -> dict[str, Any]:
    """A stored probe result checked again from its stored reply with the current checks (exact and
    next_action need no model; a rubric verdict is the judge's and is kept as it was)."""
    reply = str(stored.get("reply", ""))
    if probe.kind == "exact":
        ok = check_exact(probe.answer, reply)
        return {**stored, "passed": ok, "detail": "" if ok else f"expected {probe.answer!r}"}
    if probe.kind == "next_action":
        ok, detail = check_next_action(probe, reply, shown)
        return {**stored, "passed": ok, "detail": detail}
    return dict(stored)


def parse_verdicts(text: str, expected: int) -> list[bool]:
    """The judge's verdicts; ValueError with the reason when the reply is not what was asked."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the judge's reply")
    data = json.loads(text[start : end + 1])
    verdicts = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(verdicts, list) or not all(isinstance(v, bool) for v in verdicts):
        raise ValueError("'verdicts' is not a list of true/false")
    if len(verdicts) != expected:
        raise ValueError(f"{len(verdicts)} verdicts for {expected} rubric items")
    return verdicts


def judge_rubric(judge: ModelClient, counter: TokenCounter, probe: Probe, answer: str) -> ProbeResult:
    items = "\n".join(f"{i}. {item}" for i, item in enumerate(probe.rubric, 1))
    prompt = JUDGE_PROMPT.format(question=probe.question, answer=answer, items=items)
    sent = [ChatMessage("user", prompt)]
    reply = judge.complete(CompletionRequest(sent, json_schema=JUDGE_SCHEMA, max_tokens=128, temperature=0.0))
    spent = _spent(reply, sent, counter)
    try:
        verdicts = parse_verdicts(reply.text, len(probe.rubric))
    except ValueError as err:  # json.JSONDecodeError is a ValueError
        log.warning("judge gave no usable verdict for probe %s: %s", probe.id, err)
        return ProbeResult(probe.id, probe.kind, None, answer, f"judge error: {err}", spent, 1)
    failed = [item for item, ok in zip(probe.rubric, verdicts, strict=True) if not ok]
    return ProbeResult(
        probe.id, probe.kind, not failed, answer, f"failed: {failed}" if failed else "", spent, 1
    )


# the reminder's headers, with or without a note ("Message #51 (changed later: #57, ...):")
_QUOTED_MESSAGE: Final = re.compile(r"^Message #(\d+)(?: \([^)\n]*\))?:$", re.MULTILINE)


def ask(
    probe: Probe,
    context: Sequence[ChatMessage],
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    judge: ModelClient | None = None,
    memo: Sequence[MemoItem] = (),
    shown: Sequence[str] = (),
) -> ProbeResult:
    """Ask one probe as the user's next message after the compacted context, and check the answer. With
    the checkpoint's `memo`, the question is followed by its reminder of the memo's rules, as in Vibey's
    view (`avibe.context.reminder.with_reminder`), and a reminder shown before it goes."""
    question = ChatMessage("user", probe.question, kind="user")
    note = reminder(memo, question)
    room = window - ANSWER_TOKENS - (counter.count_messages([note]) if note else 0)
    kept = [m for m in context if m.kind != REMINDER_KIND]
    sent, _ = fit_request(kept, question, counter, room)
    sent += [note] if note else []
    reply = model.complete(CompletionRequest(sent, max_tokens=ANSWER_TOKENS, temperature=0.0))
    answer, spent = _reply_text(reply), _spent(reply, sent, counter)
    reminded = tuple(int(n) for n in _QUOTED_MESSAGE.findall(note.content)) if note else ()
    if probe.kind == "exact":
        ok = check_exact(probe.answer, answer)
        detail = "" if ok else f"expected {probe.answer!r}"
        return ProbeResult(probe.id, probe.kind, ok, answer, detail, spent, 1, reminded)
    if probe.kind == "next_action":
        ok, detail = check_next_action(probe, answer, shown)
        return ProbeResult(probe.id, probe.kind, ok, answer, detail, spent, 1, reminded)
    judged = judge_rubric(judge or model, counter, probe, answer)
    spent += judged.tokens
    return ProbeResult(probe.id, probe.kind, judged.passed, answer, judged.detail, spent, 2, reminded)


def ask_all(
    probes: Sequence[Probe],
    context: Sequence[ChatMessage],
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    judge: ModelClient | None = None,
    memo: Sequence[MemoItem] = (),
    shown: Sequence[str] = (),
) -> list[ProbeResult]:
    return [ask(p, context, model, counter, window, judge, memo, shown) for p in probes]
