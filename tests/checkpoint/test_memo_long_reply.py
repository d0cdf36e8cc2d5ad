"""A long reply moving out is kept from its start, in order, as far as the memo has room (N1, N5), and its
sentences are the user's sentences: a list item's bare number is no sentence, and Chinese and Japanese
sentences end at their own full stops.

The case is a real one (the eval's real set, a Traditional Chinese session): the person answered the
agent's proposal point by point in one message of 26 "sentences"; three of its points were standing rules
without a rule word (a 30-day follow-up window, evidence links, a second signal). The cut kept its first
three lines, the checklist offered its last twelve, and the 1.5B ticked "4.", "5." and headings - the memo
lost every rule, and the checkpoint answered the window question wrong where the handoff answered 30.
"""

from __future__ import annotations

from core_doubles import TICKET_MIND, make_entry, structured_turn_outcome

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import reads_as_rule, sentences
from avibe.checkpoint.memo.words import word_count
from avibe.checkpoint.turn import Accepted

SMALL = budgets_for(8_192, 6_000)  # the floors: 150 tokens a line, 450 in all (600 and 1,800 characters)

WINDOW_RULE = (
    "Count a PR in the survival rate once it has had a 30-day follow-up window after its merge; "
    "mark the others N/A."
)
FILLER = (
    "Most code in a 90-day window has had no chance to be deleted or rewritten yet, so the rate sits "
    "near 100% for everyone and separates nobody; a PR opened on day 5 has 85 days of exposure and one "
    "opened on day 85 has five, which is why the raw number reads as a fact about the calendar rather "
    "than about the person."
)
POINTS = [
    [
        "The survival rate at the end of the window has the opposite problem.",
        FILLER,
        "Use the share of lines touched by later PRs as a second signal.",
        WINDOW_RULE,
    ],
    [
        "Filtering the PRs that change nothing can drop the wrong ones.",
        FILLER,
        "A diff on the syntax tree tells a real change from a reformatting better than the line count.",
    ],
    [
        "The narrative written by the model worries me.",
        FILLER,
        "Every claim in it comes with the URL of its PR or review; a sentence with no evidence is left out.",
    ],
    ["A signal you did not list matters for an open-source company.", FILLER],
    ["A small but important detail.", "Find bots by account type and the [bot] suffix as well as by name."],
]
REPLY = "\n".join(f"{n}.\n" + "\n".join(point) for n, point in enumerate(POINTS, 1))


def test_texts_are_what_the_test_assumes() -> None:
    assert not any(reads_as_rule(s) for point in POINTS for s in point)  # no rule word anywhere
    assert len(REPLY) > 3 * 600  # longer than three memo lines: cut, and more than the room left


def test_N5_a_list_items_number_is_not_a_sentence_of_its_own() -> None:
    text = "1.\nThe window has a problem.\n2)\nUse a second signal.\n-\nAnd a third."
    assert [text[a:b] for a, b in sentences(text)] == [
        "1.\nThe window has a problem.",
        "2)\nUse a second signal.",
        "-\nAnd a third.",
    ]


def test_N5_chinese_sentences_end_at_their_full_stops_but_not_inside_a_quote() -> None:
    text = "強制每個 claim 附 PR / review URL。其他標 N/A！他說「好。」然後走了。"
    assert [text[a:b] for a, b in sentences(text)] == [
        "強制每個 claim 附 PR / review URL。",
        "其他標 N/A！",
        "他說「好。」然後走了。",
    ]


def test_N3_words_are_counted_in_chinese_too() -> None:
    assert word_count("不要用tmp目录") >= 3  # a rule worded in Chinese means something alone
    assert word_count("ok 開始") < 3  # a go-ahead does not
    assert word_count("Never touch vendor") == 3


def test_N1_N5_a_long_reply_is_kept_in_order_whatever_sentences_the_model_ticks() -> None:
    entries = [make_entry(3, "Please analyse doc.md first and propose some ideas."), make_entry(5, REPLY)]

    def tail_ticks(enum: list[object]) -> list[object]:  # the last sentence lines offered, as the 1.5B did
        return [label for label in enum if "." in str(label)][-4:]

    for keep in (tail_ticks, lambda enum: []):
        outcome = structured_turn_outcome(entries, keep, TICKET_MIND, SMALL)
        assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
        kept = [item.text for item in outcome.checkpoint.memo if item.seq == 5]
        assert kept and REPLY.startswith(kept[0].split("\n[... cut")[0])  # its start, cut with its pointer
        assert any(text.startswith(WINDOW_RULE) for text in kept), kept  # the rule four lines in, verbatim
        assert all(text.split(" (from #5)")[0] in REPLY for text in kept[1:])
        # in the message's order: each kept sentence comes later in it than the one before
        places = [REPLY.find(text.split(" (from #5)")[0]) for text in kept[1:]]
        assert places == sorted(places)


# The same reply's last points, as the person wrote them, were rules worded in Chinese ("強制", "不准",
# "不要"): kept in order, the memo ran out of room on the explanations before them and lost both.
ZH_FILLER = "九十天裡大部分代碼還沒有機會被刪掉或改寫，所以這個比例對每個人都接近百分之百。"
ZH_RULES = [
    "強制每個 claim 附上 PR 或 review 的連結，沒有證據的句子不准寫進報告。",
    "排除機器人不要只靠名單。",
]
ZH_REPLY = "\n".join(
    [f"{n}. 第{n}點：{ZH_FILLER}" for n in range(1, 41)] + [f"41. {ZH_RULES[0]}", f"42. {ZH_RULES[1]}"]
)


def test_N2_rules_worded_in_chinese_read_as_rules() -> None:
    assert all(reads_as_rule(rule) for rule in ZH_RULES)
    assert not reads_as_rule(ZH_FILLER) and not reads_as_rule("ok 開始")


def test_N1_N5_a_long_replys_rules_are_kept_before_its_explanations() -> None:
    entries = [make_entry(3, "請先分析 doc.md 並提出一些想法。"), make_entry(5, ZH_REPLY)]
    for keep in (lambda enum: [], lambda enum: [label for label in enum if "." in str(label)][:4]):
        outcome = structured_turn_outcome(entries, keep, TICKET_MIND, SMALL)
        assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
        kept = " ".join(item.text for item in outcome.checkpoint.memo if item.seq == 5)
        assert all(rule in kept for rule in ZH_RULES), kept
        assert kept.count(ZH_FILLER) < 40  # no room for the whole reply: the rules went before explanations
