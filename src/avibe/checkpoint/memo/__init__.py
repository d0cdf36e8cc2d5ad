"""The memo: the user's own words, copied from the record, never retold (N1-N7).

Modules, by job:
    words      what the user's words say: sentences, rule and limit wording, subjects, `about_same`
    fit        labels, copying from the record (N4) and cutting to the budgets (N5): `build_memo`
    checklist  the candidates offered (N1, N6, N7), the checklist rendered, the ticks read back (V3)
    select     lines kept besides the ticks: the mission's source (M4) and the rules (N2)
    newest     the user's newest words, and a kept rule with its later change or neither (N3)
    later      a rule's later change still in the conversation: marked, not copied (N3)
    asked      a kept short reply's question, from the agent's message before it (N3)

The names below are the memo's public API; each module's docstring says what its functions do.
"""

from avibe.checkpoint.memo.asked import QUESTION_CHARS, SHORT_REPLY_WORDS, mark_asked, question_in
from avibe.checkpoint.memo.checklist import (
    DEFAULT_PREVIEW_CHARS,
    MAX_SENTENCE_LINES,
    Candidate,
    TickResult,
    dismissed,
    memo_candidates,
    read_ticks,
    render_checklist,
)
from avibe.checkpoint.memo.fit import (
    SENTENCE_CUT,
    Label,
    MemoOutcome,
    build_memo,
    clean_labels,
    cut_message,
    cut_note,
    label_of,
    memo_labels,
    memo_text_matches,
    memo_tokens,
    over_budget_problem,
    parse_label,
    sentence_item,
    sentence_note,
)
from avibe.checkpoint.memo.later import later_links, mark_later
from avibe.checkpoint.memo.newest import MIN_NEWEST_WORDS, NewestKept, newest_kept
from avibe.checkpoint.memo.select import (
    MISSION_MATCH_SHARE,
    MISSION_MATCH_WORDS,
    RulesKept,
    mission_sources,
    rules_kept,
)
from avibe.checkpoint.memo.words import (
    ABOUT_SHARE,
    BESIDE_SHARED_WORDS,
    CORRECTION_SHARE,
    about_same,
    changes_beside,
    contrasted,
    corrects,
    han_pairs,
    reads_as_limit,
    reads_as_rule,
    says_nothing_that_stays,
    sentences,
    subject_words,
)

__all__ = [
    "ABOUT_SHARE",
    "BESIDE_SHARED_WORDS",
    "CORRECTION_SHARE",
    "DEFAULT_PREVIEW_CHARS",
    "MAX_SENTENCE_LINES",
    "MIN_NEWEST_WORDS",
    "MISSION_MATCH_SHARE",
    "MISSION_MATCH_WORDS",
    "QUESTION_CHARS",
    "SENTENCE_CUT",
    "SHORT_REPLY_WORDS",
    "Candidate",
    "Label",
    "MemoOutcome",
    "NewestKept",
    "RulesKept",
    "TickResult",
    "about_same",
    "build_memo",
    "changes_beside",
    "clean_labels",
    "contrasted",
    "corrects",
    "cut_message",
    "cut_note",
    "dismissed",
    "han_pairs",
    "label_of",
    "later_links",
    "mark_asked",
    "mark_later",
    "memo_candidates",
    "memo_labels",
    "memo_text_matches",
    "memo_tokens",
    "mission_sources",
    "newest_kept",
    "over_budget_problem",
    "parse_label",
    "question_in",
    "read_ticks",
    "reads_as_limit",
    "reads_as_rule",
    "render_checklist",
    "rules_kept",
    "says_nothing_that_stays",
    "sentence_item",
    "sentence_note",
    "sentences",
    "subject_words",
]
