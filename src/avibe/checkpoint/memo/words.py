"""What the user's words say, read from their wording alone (N2, N3): rule and limit wording, sentences,
content words, what says nothing that stays, and which later message changes a line. Pure.

API:
    sentences(text) -> list[tuple[int, int]]   (start, end) of each sentence, stripped (verbatim)
    word_count(text) -> int            words between spaces; two Han, kana or Hangul characters a word
    reads_as_rule(text) -> bool        worded as a standing rule, limit or permission ("never", "do not",
                                       "nunca", "不要"): English, Spanish, French, German, Portuguese,
                                       Chinese, Japanese
    reads_as_limit(text) -> bool       worded as a limit on what may be done ("never", "only", "at most");
                                       a value to follow ("must be 16") or a grant ("you may") is none
    contrasted(text) -> str            what a contrast excludes ("must be 16, not 48": "48"), or ""
    says_nothing_that_stays(text) -> bool   only pleasantries, go-aheads, questions for information (N3)
    content_words(text) -> set[str]    words that carry meaning, a plural "s" dropped
    subject_words(text) -> set[str]    content words of four letters or more that are no rule wording
    han_pairs(text) -> set[str]        Chinese and Japanese words, as pairs of Han or katakana characters
    named(text) -> frozenset[str]     what a message names: subject words less those that name nothing
    about_same(line, later) -> bool    `later` names what `line` names (N3: its change, any wording)
    changes_beside(line, later) -> bool    a later message shares two of the line's subject words
    corrects(line, later) -> bool      a sentence of `later` is worded as a correction of `line`
"""

from __future__ import annotations

import re
from typing import Final

# After . ! ? and a space; after the full-width 。！？ with or without one (Chinese and Japanese put none);
# at line breaks.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[ \t]+"
    r"""|(?<=[。！？])[ \t]*(?=[^\s」』）)\]"'”’])"""
    r"|[ \t]*(?:\r?\n)+[ \t]*"
)
# A list item's number or bullet alone on its line ("1.", "2)", "-"): it starts the sentence after it.
_LIST_MARKER: Final = re.compile(r"(?:\d{1,3}[.)]|[-*•])")
# Han, kana and Hangul: written without spaces between words; two such characters count as about a word.
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

# Wording of a standing rule, limit or permission (N2). It only ever adds the user's own sentences to the
# memo, so a false positive costs budget, never a word of the user's.
# People write rules in their own language (the real set: Chinese, Japanese, Spanish, French): a real
# Chinese reply's "強制每個 claim 附 PR / review URL" and "Bot 排除不要只靠「已知名單」"
# read as no rule and were let go for its explanations. Han and kana have no word boundaries, so their
# words stand unbounded.
# Spanish says "do not" as "no" and the verb's own form ("no uses", "no cambies"): those verbs, not "no"
# and any word ending in -es, which English's "no changes" would match.
_NO_SPANISH: Final = (
    r"no (?:uses|usen|hagas|hagan|toques|cambies|modifiques|borres|elimines|quites|muestres|pongas|subas|"
    r"ejecutes|agregues|añadas|crees|edites|instales|actualices|muevas|envíes|reescribas|inventes|traduzcas)"
)
# Limits in the other languages (a no, an only, an always, a bound, ask first) - rule wording too - and
# what is rule wording only there (a way to follow, "use ... instead").
_LIMIT_ELSEWHERE: Final = (
    r"\b(?:nunca|jamás|siempre|s[oó]lo|solamente|únicamente|prohibido|evita[r]?|como máximo|pregúntame|"
    + _NO_SPANISH
    + "|"  # Spanish
    r"jamais|toujours|seulement|uniquement|interdit|évite[rz]?|au plus|demande-moi|ne pas|ne \w+ pas|"
    r"n'\w+ pas|niemals|darf nicht|verboten|vermeide|höchstens|sempre|somente|apenas|proibido|"
    r"evite|no máximo)\b"  # French, German, Portuguese
    r"|不要|不准|不許|不许|禁止|不能|不可|不得|別再|别再|只能|僅|仅|永遠|永远|絕不|绝不|總是|总是|始終|始终|最多|"
    r"不超過|不超过|避免|先問|先问|只是討論|只是讨论|"  # Chinese
    r"しないで|ないでください|てはいけない|ではいけない|常に|絶対|のみ"  # Japanese
)
# Keeping things apart is a limit on mixing them: "be sure to distinguish zimaboard(proxmox) vs
# slate(BE3600)" - a real person's standing rule, and a request to file the router's script with the
# ZimaBoard's files goes against it.
_APART: Final = r"\b(?:distinguish|keep (?:\S+ ){0,8}(?:separate|apart)|separately)\b"
_RULE_ONLY_ELSEWHERE: Final = (
    r"\b(?:debe[ns]?|deber[ií]as?|tienes que|tiene que|hay que|al menos|sin preguntar|en lugar de|en vez de|"
    r"il faut|doi[st]|doivent|devrait|au moins|sans demander|pas de|au lieu de|"
    r"muss|müssen|dürfen nicht|sollte|mindestens|statt|pelo menos|sem perguntar|tem que|em vez de)\b"
    r"|\b(?:hazlo t[uú]|hacelo vos|hazlo vos|toi-même|selbst)\b"  # "do it yourself": a standing who
    r"|務必|务必|必須|必须|一定要|至少|強制|强制|應該|应该|改用"  # 改用: "use ... instead", as "instead of"
    r"|禁止|必ず|べき|避けて|代わりに"
)
_RULE_WORDING: Final = re.compile(
    r"\b(?:never|always|must|mustn't|shall|do not|don't|does not|doesn't|only|may|may not|no longer|"
    r"not allowed|allowed to|forbidden|prohibited|without asking|ask me|make sure|be sure|make certain|"
    r"remember to|don't forget|do not forget|keep in mind|under no circumstances|yourself|"
    r"at most|at least|no more than|instead of|should|shouldn't|should not|has to|have to|needs to|avoid)\b"
    r"|,\s*not\b"  # a contrast that forbids: "Pinned base image versions, not :latest."
    r"|" + _APART + "|" + _LIMIT_ELSEWHERE + "|" + _RULE_ONLY_ELSEWHERE,
    re.IGNORECASE,
)

# Of that wording, what limits what may be done: a no, an only, an always, a bound, a condition to ask
# first. A sentence that sets a value to follow ("must be 16"), says how ("make sure"), or grants ("you
# may") limits nothing a request could go against; a contrast ("16, not 48") limits only what it excludes.
_LIMIT_WORDING: Final = re.compile(
    r"\b(?:never|always|only|mustn't|must not|do not|don't|does not|doesn't|may not|cannot|can't|"
    r"no longer|not allowed|forbidden|prohibited|ask me|under no circumstances|at most|"
    r"no more than|shouldn't|should not|avoid|no one|nobody)\b|" + _APART + "|" + _LIMIT_ELSEWHERE,
    re.IGNORECASE,
)
_CONTRAST: Final = re.compile(r",\s*not\s+([^,;.!?]*(?:\.\d[^,;.!?]*)*)", re.IGNORECASE)


def _hard_wrap(text: str, boundary: re.Match[str]) -> bool:
    """A single line break inside a sentence: text wrapped by hand ("Non-root \nuser in the runtime
    stage."), where the line does not end a sentence and the next one goes on in lower case. A real
    user's wrapped rule was split in two there, and neither half was kept as a rule."""
    if boundary.group().count("\n") != 1 or boundary.end() >= len(text):
        return False
    before = text[: boundary.start()].rstrip()
    return bool(before) and before[-1] not in ".!?:;" and text[boundary.end()].islower()


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`: split after . ! ? followed by a space, after 。！？ (not
    inside a closing quote), and at line breaks (not where a hand-wrapped sentence goes on, see _hard_wrap,
    nor after a list item's bare number); stripped of surrounding white space, so text[start:end] is the
    sentence verbatim."""
    spans: list[tuple[int, int]] = []
    start = 0
    ends = [b for b in _SENTENCE_END.finditer(text) if not _hard_wrap(text, b)]
    for boundary in [*ends, None]:
        end = boundary.start() if boundary else len(text)
        piece = text[start:end]
        if boundary and _LIST_MARKER.fullmatch(piece.strip()):
            continue  # "4." alone says nothing: a real reply's points were offered as "4.", "5." lines
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = boundary.end() if boundary else len(text)
    return spans


def word_count(text: str) -> int:
    """About how many words `text` has: its words between spaces, where a run of Han, kana or Hangul
    counts two characters a word (a Chinese rule of eight characters is four words, not one)."""
    count = 0
    for word in text.split():
        cjk = len(_CJK.findall(word))
        count += (cjk + 1) // 2 + (1 if len(word) > cjk else 0) if cjk else 1
    return count


# A string passed to a call in code the person pasted: `st.metric("Crédito", "Solo Industrial")` is a
# label on a screen, not their rule - a real Spanish session's memo kept that line for its "Solo" ("only").
_CALL_ARGUMENTS: Final = re.compile(r"[\w.\]]\(([^()\n]*)\)")
_STRING: Final = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")


def _outside_call_strings(text: str) -> str:
    """`text` with the string literals inside a call's parentheses blanked (same length)."""
    return _CALL_ARGUMENTS.sub(lambda call: _STRING.sub(lambda s: " " * len(s.group()), call.group()), text)


def reads_as_rule(text: str) -> bool:
    """A sentence worded as a standing rule, limit or permission ("Never modify...", "Only Ana may..."),
    outside the strings of a pasted call."""
    return _RULE_WORDING.search(_outside_call_strings(text)) is not None


def reads_as_limit(text: str) -> bool:
    """A sentence worded as a limit on what may be done ("Never push...", "Only Ana may...", "at most $40",
    "ask me before ..."), not only as a value or a way to follow ("must be 16") or a grant ("you may")."""
    return _LIMIT_WORDING.search(_outside_call_strings(text)) is not None


def contrasted(text: str) -> str:
    """What a sentence's contrast excludes ("the pool must be 16, not 48." -> "48"; "" for none): the words
    after ", not" up to the end of that phrase."""
    found = _CONTRAST.search(text)
    return found.group(1).strip() if found else ""


# N3: what the user said only to push the work along, or asked in order to be told, holds nothing once it
# is answered: pleasantries and go-aheads ("Thanks. What's next?", "ok, continue", "Sounds right to me.")
# and questions for information ("How long do the tests take now?"). The eval's talkative users filled
# the 0.5B's memo with 20 of them around two rules, and its answers from that context were worse than a
# handoff's. A question that asks for work or suggests a way ("Can you switch to pnpm?", "Why not use
# pnpm?") or is worded as a rule is not one.
_PUSH_ALONG: Final = frozenset(
    re.findall(
        r"\S+",
        "thanks thank you ok okay sure great nice cool good fine yes yep yeah continue go on carry keep "
        "going next what's whats sounds right looks to me by lgtm perfect alright all proceed hm hmm",
    )
)
_ASKS_FOR_WORK: Final = re.compile(
    r"^\W*(?:(?:can|could|would|will|should|shall) (?:you|we)|please|let's|let us|why (?:don't|not)|"
    r"how about|what about|maybe)\b",
    re.IGNORECASE,
)


def says_nothing_that_stays(text: str) -> bool:
    """Whether every sentence of a user message is a pleasantry, a go-ahead or a question for information
    (N3: let go once answered); never for a message worded as a rule or one that asks for work."""
    spans = sentences(text)
    if not spans or reads_as_rule(text):
        return False
    for start, end in spans:
        sentence = text[start:end]
        words = [w.casefold() for w in re.findall(r"[\w']+", sentence)]
        if words and all(w in _PUSH_ALONG for w in words):
            continue
        if sentence.rstrip().endswith("?") and not _ASKS_FOR_WORK.search(sentence):
            continue
        return False
    return True


# Content words: a mission's source (M4) and what a line is about (N3) are matched by them, not wording.
_WORDS = re.compile(r"[^\W_]+(?:[/.'_-][^\W_]+)*")
_COMMON: Final = frozenset(
    re.findall(
        r"\S+",
        "the and for this that with you your our all are from into have will what when then them they its "
        "was were has had but not can any each one out per via also just let lets please should would could",
    )
)


def content_words(text: str) -> set[str]:
    """Words that carry meaning, a plural "s" dropped ("tickets" and "ticket" are one word here)."""
    words = (w.casefold().removesuffix("'s") for w in _WORDS.findall(text))  # "tonight's": "tonight"
    kept = (w for w in words if (len(w) >= 3 or w.isdigit()) and w not in _COMMON)
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in kept}


def subject_words(text: str) -> set[str]:
    """What a message is about: its content words of four letters or more that are no rule wording."""
    return {w for w in content_words(text) if len(w) >= 4 and not _RULE_WORDING.fullmatch(w)}


# Chinese and Japanese write no spaces between words: a run of Han (and katakana) characters is read as its
# pairs of characters, less the pairs with a grammatical character ("的", "不", "要"), so "資料庫的舊訂單"
# and "清理資料庫" share "資料" and "料庫". Hiragana is mostly grammar; Korean puts spaces between words.
_HAN_RUN: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u30a0-\u30ff]{2,}")
_GRAMMAR: Final = frozenset(
    "的了是我你他她它們们這这那個个一不沒没在有和也就都要會会可以把被讓让給给說说到對对嗎吗呢吧啊很還还再又"
    "而及與与或之其此為为能得著着過过來来去請请先後后用做"
)


def han_pairs(text: str) -> set[str]:
    """The pairs of adjacent Han or katakana characters of `text` that hold no grammatical character: what a
    Chinese or Japanese message is about, as words are for one with spaces."""
    pairs: set[str] = set()
    for run in _HAN_RUN.findall(text):
        pairs |= {run[i : i + 2] for i in range(len(run) - 1) if not set(run[i : i + 2]) & _GRAMMAR}
    return pairs


BESIDE_SHARED_WORDS: Final = 2  # content words a later message must share with a line to be copied beside it


def changes_beside(line: str, later: str) -> bool:
    """Whether the user's `later` message, still in the conversation, is about the same thing as a memo
    `line` closely enough to be copied beside it: it shares two of the line's subject words (all of them
    when the line has fewer). Stricter than a rule's change (one word): the message is in the
    conversation anyway, so a copy only puts it where a small model reads it with the line - the eval's
    0.5B answered the memo's "Set ... to 48" under the live "I meant ... 16, not 48", and 16 with the
    correction copied beside it."""
    about = subject_words(line)
    shared = about & subject_words(later)
    return bool(shared) and len(shared) >= min(BESIDE_SHARED_WORDS, len(about))


# a sentence that takes back or replaces what the user said before: "Correction: I meant ... 16, not 48",
# "scratch that", "use uv instead" (not "instead of": an alternative within one request), "no longer"
_CORRECTION: Final = re.compile(
    r"\b(?:correction|i meant|scratch that|change of plan|instead(?! of)|no longer|"
    r"i take (?:that|it) back|cancel that|never mind|(?:forget|ignore|disregard) (?:what i said|that|my "
    r"(?:earlier|last|previous))|not (?:\$?\d[\w.,]*|[\w./-]*[/_.\d][\w./-]*)\W*$)",
    re.IGNORECASE,
)
CORRECTION_SHARE: Final = 0.4  # of the correcting sentence's subject words, shared with the line


def corrects(line: str, later: str) -> bool:
    """Whether the user's `later` message changes a memo `line` said before: a sentence of it is worded
    as a correction or a taking back ("Correction: I meant ... must be 16, not 48", "use uv instead",
    "I take that back: ...") and is about the same thing as the line - two of the line's subject words
    (`changes_beside`) and CORRECTION_SHARE of its own, so a long brief that shares a few words with the
    line is not read as changing it. The recollection then says so beside both: the
    0.5B, shown "Set ... to 48" and "Correction: ... 16, not 48" in order, wrote 48 at K = 4 in two seeds
    of three."""
    about = subject_words(line)
    for start, end in sentences(later):
        sentence = later[start:end]
        if not _CORRECTION.search(sentence) or not changes_beside(line, sentence):
            continue
        own = subject_words(sentence)
        if len(own & about) >= CORRECTION_SHARE * len(own):
            return True
    return False


# N3: "speaks of the same thing" is read from what a message names, never from how it is worded. Of the
# subject words, these name no thing a rule could be about - function words, and the verbs of what may be
# done to anything ("delete", "touch"): sharing one says nothing ("You may delete the snapshots" is not
# about "Never delete the vendor folder"; "without asking" is not about "run it without the cache").
_NAMES_NOTHING: Final = frozenset(
    re.findall(
        r"\S+",
        "about without within through across around over under into onto upon those these their there "
        "here anything everything something nothing whatever thank thanks look said what that this some "
        "more than like want need make made sure know think thing things going done okay good fine well "
        "were been being does doing also only just very really time later again still first last next "
        "back ahead earlier before after while asking check delete deleting remove removing change "
        "changing update updating edit editing write writing read reading touch touching modify modifying "
        "wipe wiping prune pruning rewrite rewriting keep keeping leave leaving create creating move "
        "moving rename renaming install installing commit committing merge merging push pushing open "
        "close clean cleaning work working help whenever hold alone mind hand hands free feel scratch "
        "forget changed let's",
    )
)
_PATH_PART: Final = re.compile(r"[^\W_]{4,}")


def named(text: str) -> frozenset[str]:
    """What a message names: its subject words (`subject_words`) and each part of a path in them
    ("vendor/lib": also "vendor"), less the words that name nothing (`_NAMES_NOTHING`)."""
    words: set[str] = set()
    for word in subject_words(text):
        words.add(word)
        if "/" in word or "." in word:
            words.update(part.casefold() for part in _PATH_PART.findall(word))
    return frozenset(w for w in words if w not in _NAMES_NOTHING)


ABOUT_SHARE: Final = 0.5  # of the shorter message's named things, shared: what "about the same thing" takes


def about_same(line: str, later: str) -> bool:
    """Whether the user's `later` message speaks of what `line` speaks of (N3), whatever either is worded
    as - a grant, a limit, a withdrawal, a question: they name a thing in common (`named`), and at least
    ABOUT_SHARE of what the shorter of the two names. A short message about one thing of a long one is
    about it ("Hold off on generated/ for now" and a brief that ends "Never modify anything under
    generated/"); two long briefs that share a word or two ("ticket", "commit") are not - the late_rule
    eval's briefs were marked as changing each other, and the notes cost a small window its room."""
    mine, theirs = named(line), named(later)
    shared = mine & theirs
    return bool(shared) and len(shared) >= ABOUT_SHARE * min(len(mine), len(theirs))
