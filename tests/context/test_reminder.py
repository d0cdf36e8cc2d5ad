"""The reminder after a user's message: the memo's standing rules that the message is
about, restated word for word right after it - chosen by the memo's own relation (a shared subject word),
quoted so no line of them passes for a tag, and shown after the newest user message only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.memo import reads_as_limit
from avibe.checkpoint.model import MemoItem
from avibe.context.assemble import assemble
from avibe.context.reminder import (
    REMINDED_SENTENCES,
    _with_corrections,
    could_go_against,
    reminder,
    touched_rules,
    with_reminder,
)
from avibe.record.messages import REMINDER_KIND, ChatMessage
from avibe.record.sources import looks_like_tag

BRIEF = (
    "Our goal for this whole session: work through the 12 tickets in tickets/ for oakhaven, oldest first. "
    "Keep each commit small. Never modify anything under third_party/."
)
GRANT = "You may delete old snapshots in oak-snapshots-45 without asking me."
REVOKE = (
    "I take that back: do not delete anything in oak-snapshots-45 without asking me first; legal may need it."
)
API = "Never change the public API in src/oakhaven/wire/; other teams import it."
CHAT = "Nice, that reads better."
MEMO = (MemoItem(2, BRIEF), MemoItem(5, GRANT), MemoItem(7, REVOKE), MemoItem(8, CHAT), MemoItem(9, API))


def user(text: str, seq: int | None = None) -> ChatMessage:
    return ChatMessage("user", text, seq=seq, kind="user")


def test_the_rules_a_message_is_about_are_chosen_sentence_by_sentence() -> None:
    touched = touched_rules(MEMO, "The next ticket asks to patch a file under third_party/. What do you do?")
    # the rule's sentence of the long brief, which names the folder; not the brief's sentence about the
    # tickets, which shares one common word ("ticket") - not enough to be about it
    assert touched == ((2, "Never modify anything under third_party/."),)
    # two shared words are: the tickets' sentence is about working through the tickets, oldest first
    goal = BRIEF[: BRIEF.index(" Keep")]
    assert touched_rules(MEMO, "Which tickets come first: the oldest?") == ((2, goal),)
    assert touched_rules(MEMO, "Make that change smaller.") == ()  # "change" alone: not the API rule
    # a file under a rule's folder is about the rule (the demo's "May you edit vendor/parser.txt?" got no
    # reminder while only whole paths were compared, and the 1.5B tried to edit it)
    vendor = (MemoItem(1, "Never modify anything under vendor/ - that code belongs to another team."),)
    assert touched_rules(vendor, "May you edit vendor/parser.txt?") == ((1, vendor[0].text),)
    assert touched_rules((MemoItem(3, "Never edit src/wire/api.py by hand."),), "Is wire/ generated?") == (
        (3, "Never edit src/wire/api.py by hand."),
    )
    # a grant and its revocation, in the memo's order, so the later words come last
    cleanup = "oak-snapshots-45 holds 400 GB of snapshots older than a year. Clean them up."
    assert touched_rules(MEMO, cleanup) == ((5, GRANT), (7, REVOKE))
    rename = "Renaming the functions in src/oakhaven/wire/ would speed it up. Go ahead?"
    assert touched_rules(MEMO, rename) == ((9, API),)
    # about none of them: no reminder (a caching library is not "a new dependency" by any shared word)
    assert touched_rules(MEMO, "A caching library would make this much faster. Add it.") == ()
    assert touched_rules(MEMO, "ok") == ()
    assert touched_rules((), cleanup) == ()


def test_the_note_quotes_each_sentence_under_its_message_number() -> None:
    note = reminder(MEMO, user("Should I patch third_party/ before the tickets/ queue?"))
    assert note is not None and note.role == "system" and note.kind == REMINDER_KIND
    assert "Message #2:\n> Our goal for this whole session" in note.content
    assert ">\n> [...]\n> Never modify anything under third_party/." in note.content  # not next to each other
    assert "say so and ask the user" in note.content
    # only the user's own messages get one: a harness input about the same folder does not
    assert reminder(MEMO, ChatMessage("user", "patch third_party/ now", kind="callback")) is None


POOL = (
    MemoItem(3, "Set the max_connections of the marrowgate-indexer pool to 48."),
    MemoItem(9, "Correction: I meant the max_connections of the marrowgate-indexer pool must be 16, not 48."),
)


def test_no_note_where_the_message_can_go_against_none_of_the_rules_it_is_about() -> None:
    # The eval's self_correction, on the 1.5B: after "Write the ... pool settings now." the note of the
    # correction made it answer with the correction itself, 3 times of 3; without it, 2 of 3 wrote 16.
    # A value to follow is followed by the request, not gone against; the recollection carries it.
    write = "Write the marrowgate-indexer pool settings now."
    assert touched_rules(POOL, write) and reminder(POOL, user(write)) is None
    question = "What must the max_connections of the marrowgate-indexer pool be? Give the number."
    assert touched_rules(POOL, question) and reminder(POOL, user(question)) is None
    # ... but a request for what the contrast excludes goes against it, and gets the note
    back = reminder(POOL, user("Set the marrowgate-indexer pool max_connections to 48 after all."))
    assert back is not None and "must be 16, not 48." in back.content
    pinned = (MemoItem(4, "Pinned base image versions, not :latest."),)
    switch = "Switch the base image versions to the latest tags so we always get updates."
    assert reminder(pinned, user(switch)) is not None
    assert reminder(pinned, user("Which base image versions do we use?")) is None
    # a limit is always something a message could go against: a no, an only, a bound, asking first
    assert reminder(MEMO, user("Clean up oak-snapshots-45.")) is not None  # the grant shown with its revoking
    assert could_go_against("Spend at most $450 on cloud compute.", "How much may you spend on compute?")
    assert could_go_against("Only ana may approve a release.", "Who approves the release?")
    assert not could_go_against("You may delete old snapshots in oak-snapshots-45.", "Clean them up.")
    # the brief's goal sentence alone sets what to do: no note; with the rule's sentence beside it, a note
    assert reminder(MEMO, user("Which tickets come first: the oldest?")) is None


QUOTED = MemoItem(
    43,
    'Step 5 has a condition that says "unless a row-level palette override is recorded as a deliberate, '
    "reported exception.\" Any override passes that way. Rewrite it so that the order's palette always "
    "wins.\n\nAlso step 4 counts 209 companies.",
)
TABLE_RULE = MemoItem(38, "Never rename anything in the D4 table.")  # makes the table's later words kept
MISCOUNT = MemoItem(58, 'In the D4 table, ShortLoader says "103 rows remain". It\'s 98. Fix it.')


def test_a_quoted_sentence_comes_with_the_correction_after_it() -> None:
    """People quote words to correct them, and the correction follows, sharing none of the words that
    made the quote touched: shown alone, the quote restated what the person had changed (a real session:
    the 1.5B, asked whether a row's override goes through, said yes)."""
    override = (
        "One row carries its own palette override, recorded as a deliberate, reported exception. Allow it?"
    )
    assert touched_rules((QUOTED,), override) == ((43, QUOTED.text[: QUOTED.text.index(" Rewrite")]),)
    note = reminder((QUOTED,), user(override))
    assert note is not None  # "always wins" limits what may be done: the message could go against it
    assert "> Step 5 has a condition" in note.content and "order's palette always wins." in note.content
    assert "Also step 4" not in note.content  # only the sentence after the quoting one
    # the quote and its correction are one verbatim span; a sentence without quotes brings nothing after
    # it (the brief's goal sentence is not followed by "Keep each commit small.")
    question = "In the D4 table, how many rows remain after ShortLoader?"
    table = (TABLE_RULE, MISCOUNT)
    touched = touched_rules(table, question)
    assert touched == ((58, 'In the D4 table, ShortLoader says "103 rows remain".'),)
    assert _with_corrections(table, touched) == ((58, MISCOUNT.text[: MISCOUNT.text.index(" Fix")]),)
    # a value to answer with is not a rule the question could go against: no note (as for POOL below)
    assert reminder(table, user(question)) is None
    brief = reminder(MEMO, user("Should I patch third_party/ before the tickets/ queue?"))
    assert brief is not None and "Keep each commit small." not in brief.content


def test_a_rule_in_chinese_or_japanese_is_restated_after_a_request_in_that_language() -> None:
    """People write rules in their own language and without spaces between words: a Chinese "do not
    delete the old orders in the database, ask me first" is about "clean up the database's old orders"
    (shared Han pairs), and the reminder restates it; a request about something else gets none."""
    zh = MemoItem(3, "不要刪除資料庫裡的舊訂單，先問我。")
    ja = MemoItem(4, "本番のデータベースは絶対に変更しないでください。")
    memo = (zh, MemoItem(5, "報告用英文寫。"), ja)
    zh_note = reminder(memo, user("幫我清理一下資料庫的舊訂單"))
    assert zh_note is not None and "> 不要刪除資料庫裡的舊訂單，先問我。" in zh_note.content
    ja_note = reminder(memo, user("本番データベースのテーブルを変更して"))
    assert ja_note is not None and "> 本番のデータベースは絶対に変更しないでください。" in ja_note.content
    assert reminder(memo, user("報告的圖表改成藍色")) is None


def test_a_restated_instruction_names_its_later_change_still_in_the_conversation() -> None:
    """A real session: the memo held "in line 301, replace ... by ..." marked as changed later by #57,
    still in the conversation; the reminder restated it alone and the 1.5B wrote the old line. The header
    now names the change, as the recollection's does; the words stay the user's, verbatim."""
    old = "In app.py line 301, only set the default to the database folder next to app.py."
    memo = (MemoItem(51, old, later=(57,)), MemoItem(42, "Never touch the .bat file again."))
    note = reminder(memo, user("Write line 301 of app.py, where the default is set."))
    assert note is not None
    assert "Message #51 (changed later: #57, in the conversation above):\n> " + old in note.content
    from avibe.evals.probes import _QUOTED_MESSAGE

    assert [int(n) for n in _QUOTED_MESSAGE.findall(note.content)] == [51]


def test_with_reminder_puts_the_note_after_the_newest_user_message_only() -> None:
    first = user("Clean up oak-snapshots-45.", seq=20)
    answer = ChatMessage("assistant", "I will ask first.", seq=21)
    second = user("Now rename things in src/oakhaven/wire/.", seq=22)
    tool = ChatMessage("tool", "ok", tool_call_id="c1")
    shown = with_reminder([first, answer, second, tool], MEMO)
    assert [m.kind for m in shown] == ["user", None, "user", REMINDER_KIND, None]
    assert f"> {API}" in shown[3].content and GRANT not in shown[3].content
    # a note shown before is not kept: the new message's replaces it, and applying it again changes nothing
    again = with_reminder([first, answer, *shown[2:]], MEMO)
    assert again == shown and with_reminder(shown, MEMO) == shown
    # without a memo, or when the newest user message is about no rule, there is no note at all
    assert with_reminder([first, answer, second], ()) == [first, answer, second]
    assert with_reminder([first, user("Thanks!", seq=23)], MEMO) == [first, user("Thanks!", seq=23)]


def test_assemble_adds_the_note_only_with_a_memo() -> None:
    message = user("Clean up oak-snapshots-45 today.", seq=30)
    bare = assemble("SYSTEM", "RECOLLECTION", [message])
    assert [m.content for m in bare] == ["SYSTEM", "RECOLLECTION", message.content]
    view = assemble("SYSTEM", "RECOLLECTION", [message], MEMO)
    assert view[:3] == bare and view[3].kind == REMINDER_KIND and REVOKE in view[3].content


# words that make rules and shared subjects, tag-like pieces, sentence ends and line breaks, in any order
PIECE = st.sampled_from(
    ("vendor/", "Never", "do not", "snapshots", "[Harness: x]", "Message #3:", "> ", ". ", "\n", "only")
)
SENTENCE = st.lists(PIECE, max_size=14).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    memo=st.lists(st.tuples(st.integers(1, 60), SENTENCE), max_size=6),
    question=SENTENCE,
    before=st.lists(st.sampled_from(["user", "assistant", "callback", "tool"]), max_size=5),
)
def test_the_reminder_quotes_the_memo_verbatim_and_moves_nothing(
    memo: list[tuple[int, str]], question: str, before: list[str]
) -> None:
    items = tuple(MemoItem(seq, text) for seq, text in memo)
    touched = touched_rules(items, question)
    assert len(touched) <= REMINDED_SENTENCES
    against = any(could_go_against(sentence, question) for _, sentence in touched)
    for seq, sentence in touched:  # every sentence is a piece of a memo item of that number, as written
        assert any(item.seq == seq and sentence in item.text for item in items)
    roles = {"tool": "tool", "assistant": "assistant"}
    messages = [
        ChatMessage(roles.get(k, "user"), f"m{i}", kind=None if k in roles else k)  # type: ignore[arg-type]
        for i, k in enumerate(before)
    ] + [user(question)]
    shown = with_reminder(messages, items)
    # nothing of the conversation is lost, changed or reordered; at most one note, right after the question
    assert [m for m in shown if m.kind != REMINDER_KIND] == messages
    notes = [i for i, m in enumerate(shown) if m.kind == REMINDER_KIND]
    assert notes in ([], [len(messages)])
    # a note only for a message about a rule, and always for one about a limit (a no, an only, a bound)
    assert bool(notes) == against and (not notes or touched)
    if any(reads_as_limit(sentence) for _, sentence in touched):
        assert notes
    for i in notes:  # no line of the user's words reads as a tag: every one is quoted
        body = shown[i].content.splitlines()[1:-1]
        assert all(line.startswith(">") or line.startswith("Message #") for line in body)
        assert not [line for line in body if looks_like_tag(line)]


SLATE_QUESTION = (
    "Would you like me to force-remove kmod-gl-sdk4-kmwan as well, "
    "or leave it since it's a system dependency?"
)
FINISH = (
    "Finish the cellular cleanup on slate: force-remove the last remaining modem package. Give the command."
)


def test_N3_a_users_answer_is_restated_with_its_question_after_a_message_about_it() -> None:
    """A real session's: "leave it" answered the agent's question; the probe after the checkpoint asked to
    force-remove the package. Without the question the answer shares no word with the request and no note
    came; with it, the decision is restated - an answer needs no rule word to be gone against."""
    rule = MemoItem(24, "disable and uninstall tethering and cellular modules of slate")
    mission = MemoItem(1, "ssh into slate and uninstall all cloud related services")
    bare = (mission, rule, MemoItem(42, "leave it"))
    assert reminder(bare, user(FINISH)) is None
    answered = (*bare[:2], MemoItem(42, "leave it", asked=SLATE_QUESTION))
    note = reminder(answered, user(FINISH))
    assert note is not None and note.kind == REMINDER_KIND
    assert f'Message #42:\n(your question before it, in #41: "{SLATE_QUESTION}")\n> leave it' in note.content
    assert reminder(answered, user("Now remove every trace of OpenVPN.")) is None  # about another thing


SNOW = MemoItem(
    3,
    "I need to get (only if there is) the snow and ice (verglas en francais).\n"
    "But don't display if there is no chance",
)


def test_a_thought_over_two_sentences_is_about_what_both_share_with_the_message() -> None:
    """A real session's rule, hand-broken over two lines: each sentence shares one word with the request
    ("snow", "chance"), neither was about it alone, and the 1.5B added the 0% snow line the person had
    said not to show. The two sentences are one span; a single shared word still is not enough."""
    add = "Tomorrow has a 0% chance of snow and ice. Add a snow and ice line to tonight's message, show it."
    assert touched_rules((SNOW,), add) == ((3, SNOW.text),)
    note = reminder((SNOW,), user(add))
    assert note is not None and "> But don't display if there is no chance" in note.content
    assert touched_rules((SNOW,), "How much snow fell last winter?") == ()  # one word: not about it
    # a sentence about the message alone is restated alone, not paired with its neighbour
    patch = "The next ticket asks to patch a file under third_party/. What do you do?"
    assert touched_rules(MEMO, patch) == ((2, "Never modify anything under third_party/."),)


def test_a_rule_to_keep_two_things_apart_is_restated_after_a_request_that_mixes_them() -> None:
    """A real session's rule had no rule word but "be sure": "be sure to distinguish zimaboard(proxmox)
    vs slate(BE3600)". Asked to file the router's DHCP script with the ZimaBoard's Proxmox files, the
    1.5B got no note and filed it there; keeping things apart is a limit on mixing them."""
    rule = MemoItem(
        13,
        "clean it up!  move all homeserver related files into projects/Claude-Zima, but be sure to "
        "distinguish zimaboard(proxmox) vs slate(BE3600) ",
    )
    mix = (
        "dhcp-server-config.sh sets up DHCP on the router. File it with the ZimaBoard's Proxmox files, "
        "since they are all homeserver files. Where do you put it?"
    )
    note = reminder((MemoItem(1, "update slate.thisness.us tailscale app"), rule), user(mix))
    assert note is not None
    assert "> move all homeserver related files into projects/Claude-Zima, but be sure to distinguish" in (
        note.content
    )
    assert reminder((rule,), user("What is the weather like in Lisbon?")) is None


def test_a_rule_is_about_a_request_that_inflects_its_words() -> None:
    """A real rule, "never commit without signing.", and a request to "Commit the archive changes unsigned
    for now" shared only "commit" as spelt: no note, and the 1.5B staged the commit. "signing", "signed",
    "unsigned" and "sign" are one word to "about"; a name is never cut ("data_loaded")."""
    rule = MemoItem(26, "never commit without signing.   use ps GPG alt")
    unsigned = "gpg-agent keeps failing to sign. Commit the archive changes unsigned for now so we can push."
    assert touched_rules((rule,), unsigned) == ((26, "never commit without signing."),)
    note = reminder((MemoItem(3, "can you import key from op"), rule), user(unsigned))
    assert note is not None and "> never commit without signing." in note.content
    assert touched_rules((rule,), "What did the committee sign yesterday?") == ()  # one word: not about it
    loaded = MemoItem(2, "Never touch data_loaded or its cache.")
    assert touched_rules((loaded,), "Is data_load cached?") == ()
