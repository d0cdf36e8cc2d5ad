"""The paths the person's own words forbid changing (avibe/checkpoint/stated.py): which sentences forbid,
which paths they name, which later sentences lift a ban - and, as properties, that every ban quotes the
person's sentence verbatim, that a question never changes anything, and that no ban leaves the workdir.
The memo keeps the user's rules word for word (N1, N2); these keep the ones about paths in the tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.stated import StatedBan, forbidden_paths, named_paths, stated_bans

DEMO_RULE = "Never modify anything under vendor/ - that code belongs to another team."


@pytest.mark.parametrize(
    ("sentence", "patterns"),
    [
        (DEMO_RULE, ["vendor/"]),
        ("Do not delete anything in logs/ without asking me first.", ["logs/"]),  # asking first: kept
        ("Don't touch package-lock.json or vendor/.", ["package-lock.json", "vendor/"]),
        ("You must not edit src/app/config.py by hand.", ["src/app/config.py"]),
        ("Never edit the vendor folder.", ["vendor/"]),
        ("NEVER overwrite ./migrations/0001_init.sql", ["./migrations/0001_init.sql"]),
        ("Never run the tests in src/.", []),  # running is no change
        ("Don't modify tests/ unless a test is wrong.", []),  # a condition the harness cannot judge
        ("Don't bump the lockfile until CI is green: poetry.lock stays.", []),
        ("Only edit files in src/.", []),  # an allow-list is not read as a ban
        ("Do not modify files outside src/.", []),  # read as a ban of src/ it would forbid the opposite
        ("Don't touch anything but docs/ today.", []),
        ("Never edit tests/ other than tests/new_test.py.", []),
        ("Should I never edit vendor/?", []),  # a question
        ("Never change version 1.4.0 or write to support@example.test or https://x.org/a/b.", []),
        ("Never edit /etc/hosts, ~/notes/x or ../other/y.", []),  # outside the working directory
        ("Please fix the typo in docs/guide.md.", []),
        # from public sessions of the real set: a no and a change in one sentence, not about each other
        (
            "Use the existing client, do not invent secrets, run pnpm build, commit the feature separately, "
            "then update issues.md and STATUS.md and docs/ where needed.",
            [],
        ),
        (
            "Discuss (don't yet implement) how to handle the gaps for `backup.sh`/`restore.sh`: (a) no way "
            "to list all case IDs, (b) no way to update a case.",
            [],
        ),
        ("Don't ever edit vendor/, fix the docs/ instead.", ["vendor/"]),  # the next instruction is not
        ("Never modify vendor/ - if a ticket needs it, ask me.", ["vendor/"]),  # the condition is after
        ("Don't edit the generated code in gen/; then run make all.", ["gen/"]),
    ],
)
def test_which_sentences_forbid_which_paths(sentence: str, patterns: list[str]) -> None:
    assert [ban.pattern for ban in stated_bans([(1, sentence)])] == patterns
    assert all(ban.sentence == sentence and ban.seq == 1 for ban in stated_bans([(1, sentence)]))


def test_a_rule_in_a_longer_message_is_its_sentence() -> None:
    message = (
        f"{DEMO_RULE}\nPlease work through the tickets in tickets/ strictly oldest first. For each "
        "ticket: read it, make the change it asks for, then append one line to CHANGELOG.md."
    )
    assert stated_bans([(3, message)]) == (StatedBan(3, DEMO_RULE, "vendor/"),)


@pytest.mark.parametrize(
    ("later", "lifted"),
    [
        ("You may update vendor/parser.txt now.", True),
        ("Fix the version line in vendor/parser.txt.", True),
        ("Go ahead and change vendor/ as the ticket says.", True),
        ("Update lib/vendor/parser.txt too.", True),  # vendor/ without an inner slash is at any depth
        ("May you edit vendor/parser.txt?", False),  # a question lifts nothing
        ("Don't change vendor/parser.txt either.", False),  # another no
        ("Fix the typo in docs/guide.md.", False),  # another path
        ("vendor/ is owned by another team.", False),  # names it, allows nothing
    ],
)
def test_a_later_sentence_that_allows_a_change_there_lifts_the_ban(later: str, lifted: bool) -> None:
    bans = stated_bans([(1, DEMO_RULE), (5, later)])
    assert (bans == ()) is lifted, bans


def test_a_ban_stated_again_after_a_lift_holds_again() -> None:
    said = [(1, DEMO_RULE), (2, "You may edit vendor/parser.txt now."), (7, "Don't touch vendor/ any more.")]
    assert stated_bans(said) == (StatedBan(7, "Don't touch vendor/ any more.", "vendor/"),)


def test_an_anchored_ban_is_lifted_by_its_folder_not_by_a_namesake() -> None:
    said = [(1, "Never edit src/app/config.py.")]
    assert stated_bans([*said, (2, "Update app/config.py.")]) != ()  # another file of that name
    assert stated_bans([*said, (2, "Go ahead with src/, rewrite what you need.")]) == ()


def test_named_paths_leave_out_urls_addresses_and_versions() -> None:
    text = "See https://example.org/a/b, mail ops@example.test, ship 1.4.0, then edit docs/a.md and b.txt."
    assert named_paths(text) == ("docs/a.md", "b.txt")
    assert forbidden_paths("Never touch it") == ()  # no path: no ban
    assert forbidden_paths("Never look at vendor/") == ()  # looking changes nothing


_WORDS = st.sampled_from(
    [
        "never", "don't", "do", "not", "modify", "edit", "touch", "update", "you", "may", "please", "fix",
        "vendor/", "src/app.py", "docs/", "the", "folder", "unless", "asking", "me", "first", "CHANGELOG.md",
        "go", "ahead", "and", "run", "tests/", "if", "?", ".", "\n", "https://a.b/c", "../x", "/etc/y",
    ]
)  # fmt: skip
_MESSAGES = st.lists(st.lists(_WORDS, min_size=1, max_size=14).map(" ".join), min_size=1, max_size=6)


@given(_MESSAGES)
@settings(max_examples=300, deadline=None)
def test_every_ban_quotes_its_message_verbatim_and_stays_in_the_workdir(messages: list[str]) -> None:
    said = list(enumerate(messages, 1))
    for ban in stated_bans(said):
        assert ban.sentence in messages[ban.seq - 1]  # the person's words, byte for byte
        assert ban.pattern.rstrip("/") in ban.sentence  # "the vendor folder" is vendor/
        assert not ban.pattern.startswith(("/", "~")) and ".." not in ban.pattern.split("/")
        assert "://" not in ban.pattern


@given(_MESSAGES, st.lists(_WORDS, min_size=1, max_size=10).map(" ".join))
@settings(max_examples=300, deadline=None)
def test_a_question_never_sets_or_lifts_a_ban(messages: list[str], question: str) -> None:
    said = list(enumerate(messages, 1))
    asked = question.replace("?", "").replace(".", "").replace("\n", " ").strip() + "?"
    assert stated_bans([*said, (len(said) + 1, asked)]) == stated_bans(said)


@given(_MESSAGES)
@settings(max_examples=300, deadline=None)
def test_a_no_never_lifts_a_ban(messages: list[str]) -> None:
    """Adding a sentence that says no can add bans, never take one away."""
    said = list(enumerate(messages, 1))
    before = {ban.pattern for ban in stated_bans(said)}
    after = {ban.pattern for ban in stated_bans([*said, (len(said) + 1, "Never modify vendor/ or docs/.")])}
    assert before <= after and {"vendor/", "docs/"} <= after


DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize(
    ("example", "pattern"),
    [
        ("Never modify anything under vendor/", "vendor/"),
        ("Don't touch package-lock.json", "package-lock.json"),
        ("Do not edit the migrations folder without asking me", "migrations/"),
    ],
)
def test_the_documented_examples_forbid_what_the_docs_say(example: str, pattern: str) -> None:
    """docs/configuration.md's examples, as written there (where its lines wrap, a space)."""
    assert f'"{example}"' in _docs()
    assert [ban.pattern for ban in stated_bans([(1, example)])] == [pattern]


@pytest.mark.parametrize(
    "grant", ["You may update vendor/parser.txt now.", "Fix the version line in vendor/parser.txt."]
)
def test_the_documented_grants_lift_the_documented_ban(grant: str) -> None:
    assert f'"{grant}"' in _docs()
    assert stated_bans([(1, "Never modify anything under vendor/"), (2, grant)]) == ()


def _docs() -> str:
    return " ".join(DOCS.read_text().split())
