"""The model's view after a checkpoint (F4, F5): system prompt, recollection, recent messages verbatim.

API:
    system_prompt(identity, rules, skill_catalogue, agents_md="", agents_md_heading="") -> str
    recollection(checkpoint, *, number=None, skills=(), files="", pointer="", current_request_seqs=(),
                 plan="", rendering="sections") -> str
    assemble(system: str, recollection: str, recent_messages: Sequence[ChatMessage], memo=())
        -> list[ChatMessage]     with a memo: `reminder` after the newest user message
    touched_rules(memo, text, limit=REMINDED_SENTENCES) -> tuple[tuple[int, str], ...]
        (message number, sentence verbatim) of the memo's standing rules that a user message is about
    reminder(memo, message) -> ChatMessage | None    those sentences as a system note (kind "reminder"),
        when the message could go against one of them (`could_go_against`)
    could_go_against(sentence, text) -> bool   the sentence limits what may be done, or excludes what
        the message names
    with_reminder(messages, memo) -> list[ChatMessage]   the note after the newest user message, no other
    RENDERINGS: the ways a recollection can be shown ("sections", the default; "rules-last"; "plain")
    as_rendering(name: str) -> Rendering       one of them by name (ValueError for another)
    standing_rules(memo) -> tuple[MemoItem, ...]   the memo items "rules-last" restates

The system prompt is rebuilt every turn and never compacted. The checkpoint is rendered as Vibey's own
recollection ("what I remember"), not as new instructions; its memo is the user's own words, each with its
message number, quoted line by line so no memo text can pass for a heading or a source tag (T2).

Renderings change how the same checkpoint is shown, never what it holds: "sections" (the
default) under Markdown headings; "rules-last" the same, with the memo's standing rules restated at the end,
nearest the question; "plain" short prose without headings, for small windows. In every one, each memo item
is quoted whole under its `Message #N:` header, each mission entry is its line as written, a skill's text
is framed line by line, and no line the model or a file wrote reads as a tag or a kept message.

A user's new message that is about one of the memo's standing rules gets those rules' sentences restated
right after it, word for word: the 1.5B, shown the whole recollection, still did what a
kept rule forbids ("Clean them up." - and it deleted, where the user had said "do not delete anything in
... without asking me first"). "About" is read from the words, as the memo relates a rule to its changes
(a shared name, or two shared words: `touched_rules`), so it costs no model call; only the newest user
message gets the note, placed after it rather than at the end so that it stays put for the turn's later
steps (a prompt cache keeps it).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Final, Literal

from avibe.checkpoint.carry import PutBackSkill
from avibe.checkpoint.memo import (
    contrasted,
    corrects,
    han_pairs,
    later_links,
    reads_as_limit,
    reads_as_rule,
    sentences,
    subject_words,  # the memo's "about the same thing" (N3)
)
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.prompts import fill, render
from avibe.record.lookalikes import latin_fold
from avibe.record.messages import REMINDER_KIND, ChatMessage
from avibe.record.sources import frame_body, label_tag_lines, looks_like_tag

_COMMENT: Final = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BLANK_RUNS: Final = re.compile(r"\n{3,}")
# The memo's heading and an entry's header (`Message #12:`) and what reads like one (`Msg #12:`,
# `User message 12:`, `Entry #12:`), behind any decoration, look-alike letters folded (`latin_fold`).
_MEMO_LIKE: Final = re.compile(
    r"[\W_]*(?:(?:the\W*)?(?:user\W*s?\W*)?(?:kept\W*)?(?:message|msg|entry)\W*(?:no\W*)?\d"
    r"|the\W*user\W*s\W*(?:own\W*)?words)"
)

Rendering = Literal["sections", "rules-last", "plain"]
RENDERINGS: Final[tuple[Rendering, ...]] = ("sections", "rules-last", "plain")
DEFAULT_RENDERING: Final[Rendering] = "sections"
_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SCENE_TAGS: Final = frozenset({"<checkpoint>", "</checkpoint>"})
REMINDED_SENTENCES: Final = 4  # a reminder restates at most this many sentences: a few rules, their changes
MIN_ABOUT: Final = 2  # a shared name (2) or two shared words (1 each): what "about" a rule takes
# a word that names one thing: a path or identifier (/ _ . - inside it) or a number in it ...
_NAME_MARK: Final = re.compile(r"[/_.\-\d]")
_FOLDER: Final = re.compile(r"([^\W_][\w.\-]*)/")  # ... or a folder, written with its slash ("vendor/")
_CUT_NOTE: Final = "[... cut"  # a cut memo item's pointer line (memo.cut_note): no words of the user


def as_rendering(name: str) -> Rendering:
    """A rendering by name (the settings' `recollection`); ValueError for a name that is not one."""
    for rendering in RENDERINGS:
        if rendering == name:
            return rendering
    raise ValueError(f"unknown recollection rendering {name!r}; choose from {', '.join(RENDERINGS)}")


def system_prompt(
    identity: str, rules: str, skill_catalogue: str, agents_md: str = "", agents_md_heading: str = ""
) -> str:
    """F4 (1): identity, rules, skill catalogue and the user's AGENTS.md - rebuilt every turn. An
    AGENTS.md the agent left has its own heading (never shown as the user's words)."""
    heading = agents_md_heading.strip() or fill("agents_md_user")
    agents = (
        "\n" + fill("agents_md", heading=heading, agents_md=agents_md.strip()) if agents_md.strip() else ""
    )
    return render(
        "system_prompt",
        identity=identity.strip(),
        rules=rules.strip(),
        catalogue=skill_catalogue.strip() or "(no skills installed)",
        agents=agents,
    )


def _quoted_line(line: str) -> str:
    """One memo line as a quote; a line a model could read as a source tag gets "user:" in front (T2)."""
    if not line:
        return ">"
    return f"> user: {line}" if looks_like_tag(line) else f"> {line}"


def _quoted(text: str) -> str:
    """Every line quoted - lines broken wherever any reader breaks them (U+2028 too), so no line of a
    kept message starts outside its quote."""
    return "\n".join(_quoted_line(line) for line in text.splitlines() or [""])


def _reads_like_memo(line: str) -> bool:
    """Whether a line reads like the recollection's own memo parts: its heading or an entry's header."""
    return bool(_MEMO_LIKE.match(latin_fold(line)))


def _own(text: str) -> str:
    """The mind, scene, plan and file list are the model's (or its workdir's) words: a line of them that
    reads like a source tag (a small model copies a callback's tag line into its scene) or like a kept
    message of the user (`Message #12:`) gets "vibey:" in front, so the recollection never shows a tag
    or a user's message that Avibe did not write (T1, T2)."""
    lines = label_tag_lines(text, "vibey").splitlines(keepends=True)
    return "".join(f"vibey: {line}" if _reads_like_memo(line) else line for line in lines)


def _memo(items: Sequence[MemoItem], between: str = "\n\n", memo: Sequence[MemoItem] | None = None) -> str:
    """The kept messages quoted under their headers; `memo`: the whole memo, when `items` restate a part
    of it (rules-last), so a header's note is the same wherever the message is shown."""
    if not items:
        return "(none kept)"
    whole = memo or items
    corrected = _corrections(whole)
    spoken = later_links(whole) - corrected
    held = {item.seq for item in whole}
    return between.join(
        f"{_header(item.seq, corrected)}{_later_note(item.seq, spoken, held)}:\n{_quoted(item.text)}"
        for item in items
    )


def _corrections(memo: Sequence[MemoItem]) -> set[tuple[int, int]]:
    """(earlier, later) for each kept message a later kept one corrects or takes back (`corrects`),
    each pair tested once."""
    return {
        (first.seq, then.seq)
        for first in memo
        for then in memo
        if first.seq < then.seq and corrects(first.text, then.text)
    }


def _header(seq: int, links: set[tuple[int, int]]) -> str:
    """`Message #12`, and where the user corrected or took back a kept message in a later one that is
    kept too, a note in both headers that says which: a small model shown both in order answered with
    the first. The messages themselves stay word for word."""
    later = _numbers(b for a, b in links if a == seq)
    earlier = _numbers(a for a, b in links if b == seq)
    notes = [f"the user changed this later, in {later}"] if later else []
    notes += [f"this changes {earlier}"] if earlier else []
    return f"Message #{seq}" + (f" ({'; '.join(notes)})" if notes else "")


def _later_note(seq: int, links: set[tuple[int, int]], held: Collection[int]) -> str:
    """A kept rule's later words about the same thing, whatever their wording (`later_links`, N3): a
    short note after its header - " (changed later: #15)", kept after it; " (changed later: #15, in the
    conversation below)", still there - so it is never shown as simply in force. Short, because on a
    small window every token of the recollection is room the work lacks."""
    later = sorted({b for a, b in links if a == seq})
    kept = ", ".join(f"#{b}" for b in later if b in held)
    below = ", ".join(f"#{b}" for b in later if b not in held)
    notes = [kept] if kept else []
    notes += [f"{below}, in the conversation below"] if below else []
    return f" (changed later: {'; '.join(notes)})" if notes else ""


def _numbers(seqs: Iterable[int]) -> str:
    """ "message #12" / "messages #12 and #15": the numbers once each, in order."""
    numbers = [f"#{seq}" for seq in sorted(set(seqs))]
    if len(numbers) < 2:
        return f"message {numbers[0]}" if numbers else ""
    return f"messages {', '.join(numbers[:-1])} and {numbers[-1]}"


def _mind(mind: str) -> str:
    """The mind without its template guidance comments (they are instructions for the checkpoint turn)."""
    return _BLANK_RUNS.sub("\n\n", _COMMENT.sub("", mind)).strip()


def _lead(text: str) -> str:
    """A piece of the recollection with its own heading line (`## Files`) as a lead-in (`Files:`)."""
    first, sep, rest = text.partition("\n")
    heading = _HEADING.match(first)
    return f"{heading.group(2)}:{sep}{rest}" if heading else text


def _plain_mind(mind: str) -> str:
    """The mind without headings, for "plain": each heading a lead-in (`Mission:`), a heading over nothing
    left out, blank lines dropped; every other line as written (mission entries whole)."""
    lines = [line for line in _mind(mind).splitlines() if line.strip()]
    kept: list[str] = []
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading is None:
            kept.append(line)
            continue
        level = len(heading.group(1))
        below = []  # the section's lines, up to the next heading of its level or above
        for after in lines[i + 1 :]:
            over = _HEADING.match(after)
            if over and len(over.group(1)) <= level:
                break
            below.append(over is None)
        if any(below):
            kept.append(f"{heading.group(2)}:")
    return "\n".join(kept)


def _plain_scene(scene: str) -> str:
    """The scene as written, without the checkpoint block's tag lines."""
    return "\n".join(line for line in scene.strip().splitlines() if line.strip() not in _SCENE_TAGS)


def _skills(skills: Sequence[PutBackSkill], lead: bool = False) -> str:
    """Each skill's text framed: a skill file is not the user's and may be written in the workdir, so no
    line of it may pass for a heading, a kept message or a tag of the recollection."""
    if not skills:
        return ""
    shown = _lead if lead else str
    parts = [
        shown(
            fill(
                "recollection_skill",
                name=s.name,
                cut=", cut" if s.cut else "",
                text=frame_body(s.text.strip()),
            )
        )
        for s in skills
    ]
    return "\n" + shown(fill("recollection_skills", skills="\n\n".join(parts))) + "\n"


def _current(seqs: Sequence[int]) -> str:
    if not seqs:
        return ""
    numbers = ", ".join(f"#{seq}" for seq in sorted(set(seqs)))
    return "\n" + render("current_request", seqs=numbers)


def standing_rules(memo: Sequence[MemoItem]) -> tuple[MemoItem, ...]:
    """The memo items "rules-last" restates, in memo order: each worded as a standing rule, limit or
    permission (the harness's own test, N2), and each later item about the same thing as a rule before it
    - by the relation the memo keeps a rule's revocation or re-grant beside it (a shared content word), so
    a change of a rule is never restated apart from the rule it changes."""
    subjects: set[str] = set()
    chosen: list[MemoItem] = []
    for item in memo:
        words = subject_words(item.text)
        if reads_as_rule(item.text):
            subjects |= words
            chosen.append(item)
        elif subjects & words:
            chosen.append(item)
    return tuple(chosen)


def _rules_last(memo: Sequence[MemoItem]) -> str:
    rules = standing_rules(memo)
    return "\n" + fill("recollection_rules", memo=_memo(rules, memo=memo)) + "\n" if rules else ""


def recollection(
    checkpoint: Checkpoint,
    *,
    number: int | None = None,
    skills: Sequence[PutBackSkill] = (),
    files: str = "",
    pointer: str = "",
    current_request_seqs: Sequence[int] = (),
    plan: str = "",
    rendering: Rendering = DEFAULT_RENDERING,
) -> str:
    """F4 (2), F5: the checkpoint as Vibey's own recollection, with what it carries (A1-A3) and the
    agent's plan, verbatim, shown in one of the RENDERINGS (ValueError
    for another).

    `current_request_seqs`: the record numbers of the current turn's user messages when the checkpoint
    came mid-turn (F5); they stay verbatim in the recent messages and win where they disagree.
    """
    plain = as_rendering(rendering) == "plain"
    shown = _lead if plain else str  # "plain" shows each carried part's heading as a lead-in

    def part(text: str) -> str:
        return "\n" + shown(text) + "\n"

    number_text = f" (checkpoint {number})" if number is not None else ""
    memo = _memo(checkpoint.memo, "\n" if plain else "\n\n")
    plan_text = part(fill("recollection_plan", plan=_own(plan.strip()))) if plan.strip() else ""
    current = "\n" + shown(_current(current_request_seqs).lstrip("\n")) if current_request_seqs else ""
    files_text = part(fill("recollection_files", files=_own(files.strip()))) if files.strip() else ""
    record = part(fill("recollection_record", pointer=pointer.strip())) if pointer.strip() else ""
    if plain:
        return render(
            "recollection_plain",
            number=number_text,
            mind=_own(_plain_mind(checkpoint.mind)),
            memo=memo,
            scene=_own(_plain_scene(checkpoint.scene)),
            plan=plan_text,
            current=current,
            skills=_skills(skills, lead=True),
            files=files_text,
            pointer=record,
        )
    return render(
        "recollection",
        number=number_text,
        mind=_own(_mind(checkpoint.mind)),
        memo=memo,
        scene=_own(checkpoint.scene.strip()),
        plan=plan_text,
        current=current,
        skills=_skills(skills),
        files=files_text,
        pointer=record,
        rules=_rules_last(checkpoint.memo) if rendering == "rules-last" else "",
    )


def _path_parts(words: set[str]) -> set[str]:
    """The folders and file of each path among `words` ("vendor/parser.txt": "vendor", "parser.txt"), as
    `subject_words` spells them: a rule about vendor/ is about vendor/parser.txt."""
    return subject_words(" ".join(part for word in words if "/" in word for part in word.split("/")))


def _words(text: str) -> set[str]:
    words = subject_words(text)
    return words | _path_parts(words) | han_pairs(text)  # a Chinese rule is about a Chinese request too


def _names(text: str) -> set[str]:
    """The words of `text` that name one thing - a path, an identifier, a number, a folder ("vendor/"),
    a part of a path - as `subject_words` spells them."""
    folders = subject_words(" ".join(_FOLDER.findall(text)))  # spelt as subject_words spells them
    words = subject_words(text)
    return {w for w in words if w in folders or _NAME_MARK.search(w)} | _path_parts(words)


def _about(asked: set[str], names: set[str], sentence: str) -> int:
    """How much a sentence is about the message: each shared name counts 2, each other shared word 1."""
    shared = asked & _words(sentence)
    return len(shared) + len(shared & names)


def touched_rules(
    memo: Sequence[MemoItem], text: str, limit: int = REMINDED_SENTENCES
) -> tuple[tuple[int, str], ...]:
    """The sentences of the memo's standing rules (`standing_rules`: each rule and the user's later words
    about it) that `text` is about, as (message number, sentence verbatim), in memo order: those sharing
    a name with it or two words, and at least half as much as the sentence that shares most (one common
    word - "change", "tests" - is not enough: the 1.5B answered a question about the release scripts'
    approver with the brief's sentences about changes); at most `limit`, rule-worded ones first."""
    asked = _words(text)
    if not asked:
        return ()
    names = _names(text)
    found: list[tuple[tuple[bool, int, int], tuple[int, str]]] = []
    for item in standing_rules(memo):
        for start, end in sentences(item.text):
            sentence = item.text[start:end]
            score = _about(asked, names, sentence)
            if score >= MIN_ABOUT and not sentence.startswith(_CUT_NOTE):
                found.append(((reads_as_rule(sentence), score, len(found)), (item.seq, sentence)))
    best = max((key[1] for key, _ in found), default=0)
    kept = [f for f in found if 2 * f[0][1] >= best]
    chosen = sorted(kept, key=lambda f: f[0], reverse=True)[:limit]
    return tuple(pair for _, pair in sorted(chosen, key=lambda f: f[0][2]))


# a sentence that quotes words - the agent's, a document's - in double quotes of any script
_QUOTES: Final = re.compile(r'"[^"\n]+"|“[^”\n]+”|「[^」\n]+」|«[^»\n]+»')


def _with_corrections(
    memo: Sequence[MemoItem], touched: Sequence[tuple[int, str]]
) -> tuple[tuple[int, str], ...]:
    """The touched sentences, each that quotes something with the sentence after it in the same message,
    adjacent ones as one verbatim span. People quote words to correct them, and the correction follows -
    'SilentlyShortLoader says "103 rows remain". It's 98.'; 'a condition says "unless a row-level
    override ...". Rewrite it so that the request's brand kit and template always win.' - sharing none of
    the words that made the quote touched: shown alone, the quote restated the very thing the person had
    changed (the 1.5B then let the override through, on a real session)."""
    texts = {item.seq: item.text for item in memo}
    chosen: dict[int, set[int]] = {}
    unplaced: list[tuple[int, str]] = []  # not a sentence of its item as this memo has it: kept as it is
    for seq, sentence in touched:
        text = texts.get(seq, "")
        spans = sentences(text)
        at = next((i for i, (start, end) in enumerate(spans) if text[start:end] == sentence), None)
        if at is None:
            unplaced.append((seq, sentence))
            continue
        picked = chosen.setdefault(seq, set())
        picked.add(at)
        follows = at + 1 < len(spans) and not text[spans[at + 1][0] :].startswith(_CUT_NOTE)
        if follows and _QUOTES.search(sentence):
            picked.add(at + 1)
    out: list[tuple[int, str]] = []
    for seq, picked in chosen.items():  # touched_rules' order: the memo's
        spans, run = sentences(texts[seq]), sorted(picked)
        first = run[0]
        for here, after in zip(run, [*run[1:], None], strict=True):
            if after != here + 1:  # the run ends: one verbatim span from its first sentence to here
                out.append((seq, texts[seq][spans[first][0] : spans[here][1]]))
                first = after if after is not None else first
    return (*out, *unplaced)


def _touched_text(touched: Sequence[tuple[int, str]], memo: Sequence[MemoItem] = ()) -> str:
    """The sentences under their message headers, one for the sentences of one message (`[...]` between),
    naming the user's later words still in the conversation (`MemoItem.later`): restated alone, a replaced
    instruction read as in force - the 1.5B wrote a real session's old line from it."""
    later, parts, last = {item.seq: item.later for item in memo if item.later}, list[str](), None
    for seq, sentence in touched:
        changed = ", ".join(f"#{n}" for n in later.get(seq, ()))
        note = f" (changed later: {changed}, in the conversation above)" if changed else ""
        parts.append((">\n> [...]\n" if seq == last else f"Message #{seq}{note}:\n") + _quoted(sentence))
        last = seq
    return "\n".join(parts)


_TOKEN: Final = re.compile(r"\w(?:[\w.:/\-]*\w)?")
_FILLER: Final = frozenset({"a", "an", "the", "any", "it", "that", "this", "please", "yet", "now", "one"})


def _tokens(text: str) -> set[str]:
    return {t.casefold() for t in _TOKEN.findall(text)} - _FILLER


def could_go_against(sentence: str, text: str) -> bool:
    """Whether a message about `sentence` could go against it: the sentence limits what may be done
    (`reads_as_limit`: a no, an only, an always, a bound, ask first), or it excludes by contrast what the
    message names ("must be 16, not 48" and a message naming 48). A sentence that only sets what to do
    ("must be 16") is followed, not gone against, by "Write the pool settings now.": the 1.5B, shown such
    a sentence after that request, answered with the sentence itself 3 times of 3 (2 of 3 wrote the
    settings without it)."""
    return reads_as_limit(sentence) or bool(_tokens(contrasted(sentence)) & _tokens(text))


def reminder(memo: Sequence[MemoItem], message: ChatMessage) -> ChatMessage | None:
    """The note that restates, after a user's message, the memo's standing rules it is about (None for a
    message of another kind, about none of them, or about none it could go against: `could_go_against`).
    The sentences are the memo's, quoted line by line: all those it is about, so a rule is shown with its
    grant or its change."""
    if message.kind != "user":
        return None
    touched = _with_corrections(memo, touched_rules(memo, message.content))
    if not any(could_go_against(sentence, message.content) for _, sentence in touched):
        return None
    text = render("rules_touched", memo=_touched_text(touched, memo))
    return ChatMessage(role="system", content=text, kind=REMINDER_KIND)


def with_reminder(messages: Sequence[ChatMessage], memo: Sequence[MemoItem]) -> list[ChatMessage]:
    """The messages with the `reminder` after the newest user message (when it is about a rule of the memo)
    and no other: a reminder shown before goes, the new message has its own."""
    shown = [m for m in messages if m.kind != REMINDER_KIND]
    newest = next((i for i in range(len(shown) - 1, -1, -1) if shown[i].kind == "user"), None)
    note = reminder(memo, shown[newest]) if memo and newest is not None else None
    if note is not None and newest is not None:
        shown.insert(newest + 1, note)
    return shown


def assemble(
    system: str,
    recollection: str,
    recent_messages: Sequence[ChatMessage],
    memo: Sequence[MemoItem] = (),
) -> list[ChatMessage]:
    """F4: the system prompt, then the recollection as a second system message (when there is one), then
    the recent messages verbatim and in order - with the `reminder` of the memo's rules right after the
    newest user message, when it is about one."""
    view = [ChatMessage(role="system", content=system)]
    if recollection.strip():
        view.append(ChatMessage(role="system", content=recollection))
    view.extend(with_reminder(recent_messages, memo))
    return view
