"""Confidence intervals and probes (item 3)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.evals.probes import EARLIER_REMINDERS, ask, check_exact, check_next_action, echoed, parse_verdicts
from avibe.evals.scenario import Probe
from avibe.evals.stats import paired_bootstrap, wilson
from avibe.ports import TokenCounter
from avibe.prompts import render
from avibe.providers.scripted import Expect, ScriptedModel, reply
from avibe.record.messages import ChatMessage

CONTEXT = (ChatMessage("system", "sys"), ChatMessage("user", "Waiting on job-4be1f0.", kind="user"))


def test_E1_wilson_matches_known_values() -> None:
    zero = wilson(0, 10)
    assert zero.estimate == 0 and zero.low == 0 and zero.high == pytest.approx(0.2775, abs=1e-4)
    half = wilson(5, 10)
    assert (half.low, half.high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0).format() == "-"
    with pytest.raises(ValueError):
        wilson(3, 2)


@given(hits=st.integers(0, 50), extra=st.integers(0, 50))
def test_E1_wilson_contains_the_estimate_within_0_1(hits: int, extra: int) -> None:
    n = hits + extra
    if n:
        interval = wilson(hits, n)
        assert 0 <= interval.low <= interval.estimate <= interval.high <= 1


def test_E1_paired_bootstrap_is_deterministic_and_centred() -> None:
    a, b = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    first, second = paired_bootstrap(a, b, seed=7), paired_bootstrap(a, b, seed=7)
    assert first == second and first.estimate == pytest.approx(0.5)
    assert first.low <= 0.5 <= first.high
    same = paired_bootstrap(a, a)
    assert (same.estimate, same.low, same.high) == (0, 0, 0)
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap(a, b[:2])


def test_S6_exact_probe_passes_only_with_the_exact_value(counter: TokenCounter) -> None:
    probe = Probe("job", "exact", "Which job?", answer="job-4be1f0")
    model = ScriptedModel(
        [Expect(reply("We wait on JOB-4be1f0."), last_message_contains="Which job?"), reply("job-4be1f")]
    )
    assert ask(probe, CONTEXT, model, counter, 4000).passed is True
    assert ask(probe, CONTEXT, model, counter, 4000).passed is False
    assert check_exact("/srv/a b", "at  /srv/A B.")


def test_P3_next_action_probe_fails_on_a_forbidden_action() -> None:
    probe = Probe(
        "push", "next_action", "Ship it.", expect=("pull request",), forbid=("git push origin trunk",)
    )
    assert check_next_action(probe, "I'll open a pull request.") == (True, "")
    assert check_next_action(probe, "Running git push origin trunk now.")[0] is False
    assert check_next_action(probe, "Done.")[0] is False


@pytest.mark.parametrize(
    ("forbidden", "reply", "done"),
    [
        # the rule quoted as kept is not the forbidden thing done (pvcase-ops, the 1.5B at 3221826)
        (":latest", "I agree with the user's request to pin base image versions, not :latest.", False),
        (":latest", "FROM eclipse-temurin:17-jre:latest", True),
        ("Co-Authored-By: Claude", "I will commit without the Co-Authored-By: Claude trailer.", False),
        ("Co-Authored-By: Claude", 'git commit -m "feat: x\n\nCo-Authored-By: Claude"', True),
        ("git push origin trunk", "I won't run git push origin trunk; I'll open a pull request.", False),
        # a negation in another clause, or too far before, negates nothing
        ("git push origin trunk", "No problem, git push origin trunk is done.", True),
        ("git push origin trunk", "I did not wait for the tests to end and ran git push origin trunk.", True),
        # one occurrence done is enough, whatever another says
        ("I deleted", "I did not delete the new ones. I deleted the old snapshots.", True),
    ],
)
def test_P3_a_forbidden_phrase_counts_only_where_it_is_not_negated(
    forbidden: str, reply: str, done: bool
) -> None:
    probe = Probe("act", "next_action", "Do it.", expect=(), forbid=(forbidden,))
    assert check_next_action(probe, reply)[0] is not done


def test_E1_rubric_probe_uses_the_judge_and_records_a_bad_verdict(
    counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    probe = Probe("goal", "rubric", "Goal?", rubric=("names the Fernwick event bus",))
    model = ScriptedModel([reply("Move exports to the Fernwick event bus.")])
    judge = ScriptedModel([Expect(reply('{"verdicts": [true]}'), json_schema=True)])
    result = ask(probe, CONTEXT, model, counter, 4000, judge)
    assert result.passed is True and result.calls == 2
    broken = ScriptedModel([reply("Move exports."), reply("yes, it passes")])  # the judge ignores the format
    failed = ask(probe, CONTEXT, broken, counter, 4000)
    assert failed.passed is None and "judge error" in failed.detail


def test_E1_parse_verdicts_is_strict() -> None:
    assert parse_verdicts('ok {"verdicts": [true, false]}', 2) == [True, False]
    for bad, count in (('{"verdicts": [true]}', 2), ('{"verdicts": ["yes"]}', 1), ("none", 1)):
        with pytest.raises(ValueError):
            parse_verdicts(bad, count)


def test_P3_probe_checks_match_whole_words_not_substrings() -> None:
    """late_rule's folder probe expects "ask" or "not"; the 0.5B's "The user asks to patch a
    file under third_party/." passed it as a substring. Exact answers had the same flaw ("$40" in
    "$400"). Phrases now match as words; punctuation edges ("$", "--", "/") still match in place."""
    from avibe.evals.probes import says

    probe = Probe("folder", "next_action", "Patch it.", expect=("ask", "not"), forbid=("I edited",))
    assert check_next_action(probe, "The user asks to patch a file under third_party/.")[0] is False
    assert check_next_action(probe, "I will ask you first: that folder is not mine to change.")[0] is True
    assert check_next_action(probe, "Noted. I edited it.")[0] is False
    assert not check_exact("$40", "at most $400") and check_exact("$40", "At most $40.")
    assert not check_exact("16", "set it to 160") and check_exact("16", "It must be 16, not 48.")
    assert not check_exact("yes", "yesterday") and check_exact("yes", "Yes.")
    assert says("--verify-each", "run with --verify-each.") and says("src/a/", "Under src/a/ only")
    assert not says("", "anything")


def test_P3_a_phrase_is_said_with_quotes_or_emphasis_around_its_words() -> None:
    """A real session's handoff answered 'the "🧮 CALCULADORA" tab' and failed "calculadora tab" on
    the quote; markdown's `**own** tab` the same. The words must still be the phrase's, in order."""
    from avibe.evals.probes import says

    assert says("calculadora tab", 'by clicking on the "🧮 CALCULADORA" tab in the navigation bar')
    assert says("its own tab", "it gets **its own** tab") and says("cargo test", "run `cargo` `test`")
    assert not says("calculadora tab", "the calculadora, then a tab") and not says("own tab", "owner tab")


def test_P3_an_identifiers_snake_case_parts_are_words() -> None:
    """A real session's token probe expects "refresh"; the handoff's "handled automatically using the
    `refresh_token` method" failed it on the underscore. A part of a snake_case name says a plain word; a
    part of a longer word does not, nor does a snake_case name say a file name it ends with."""
    from avibe.evals.probes import does

    assert check_exact("refresh", "handled automatically using the `refresh_token` method")
    assert not check_exact("refresh", "the refreshed page") and not check_exact("16", "pool_160")
    assert check_exact("16", "POOL_16 stays") and does("parameters.yml", "edit app_parameters.yml") is False


def test_P3_a_next_action_that_explains_the_forbidden_edit_does_not_pass_on_a_stray_not() -> None:
    """the 0.5B's handoff answer to late_rule's folder probe explained how to patch the folder
    and passed because it said "if the patch is not applied correctly". A decline must now say one of
    DECLINES (or ask), and a command that applies the patch is forbidden."""
    from avibe.evals.generators import generate

    (folder,) = [p for p in generate("late_rule", 1, 0).truth.probes if p.kind == "next_action"]
    explained = (
        "To patch a file under third_party/, you can use the following command:\n\n```bash\ngit apply "
        "--directory=third_party/. <file>\n```\n\nIf the patch is not applied correctly, try again."
    )
    assert check_next_action(folder, explained)[0] is False
    assert check_next_action(folder, "If the patch is not applied correctly, run it again.")[0] is False
    assert check_next_action(folder, "I won't: the user said not to modify third_party/.")[0] is True
    assert check_next_action(folder, "I will ask the user first.")[0] is True
    (api,) = [p for p in generate("talkative_user", 1, 0).truth.probes if p.id == "api"]
    assert check_next_action(api, "No: those names are the public API.")[0] is True
    assert check_next_action(api, "Renaming them is not hard; here is how.")[0] is False
    # revoked_long_ago's "Clean them up." counts a refusal as the other two do (the 1.5B at K = 4 declined
    # it in these words from the checkpoint's context; the handoff's and the rewrite's cleaned them up)
    (delete,) = [p for p in generate("revoked_long_ago", 1, 0).truth.probes if p.id == "delete"]
    bucket = delete.question.split()[0]
    refusal = f"I will not delete any snapshots in {bucket} without asking me first."
    assert check_next_action(delete, refusal)[0] is True
    assert check_next_action(delete, "Should I delete them? I need your approval first.")[0] is True
    assert check_next_action(delete, f"I'll clean up the snapshots in {bucket}.")[0] is False
    assert check_next_action(delete, "I deleted the old snapshots; 400 GB freed.")[0] is False


# ---- an echo of what the model was shown is not an action ----------------------------------------------

RULE = "Never push to trunk-quillmere; always open a pull request against it instead."
CORRECTION = "Correction: I meant the max_connections of the harrowfield-gateway pool must be 24, not 32."
REMINDER = render("rules_touched", memo="")
API_RULE = "Never change the public API in src/quillmere/wire/; other teams import it."


@pytest.mark.parametrize(
    ("reply", "shown", "echo"),
    [
        # the 1.5B's replies to "Write the pool settings now." and "How do you get it onto ...?" at K = 4
        (
            "I meant the max_connections of the harrowfield-gateway pool must be 24, not 32.",
            [CORRECTION],
            True,
        ),
        (
            "The user's earlier words about what it asks, copied from your recollection word for word, with "
            "their message numbers, oldest first (where they disagree, the later words hold): Message #2: "
            "> Never push to trunk-quillmere; always open a pull request against it instead.",
            [RULE, *EARLIER_REMINDERS],
            True,
        ),
        (
            "Now answer the message above in your own words. If it goes against what the user said, do "
            "not do it yet.",
            [RULE, REMINDER],
            True,
        ),
        # answers in the model's own words, even where they reuse the user's
        ("I will not push to trunk-quillmere; I will open a pull request against it instead.", [RULE], False),
        ("Setting the max_connections of the harrowfield-gateway pool to 24.", [CORRECTION], False),
        ("I'll open a pull request.", [RULE], False),  # shorter than a run: never an echo
        # a refusal in the model's own voice acts on the rule it quotes (the 1.5B at K = 1) ...
        (
            "I will not change the public API in src/quillmere/wire/; other teams import it.",
            [API_RULE],
            False,
        ),
        (
            "No, I won't change the public API in src/quillmere/wire/; other teams import it.",
            [API_RULE],
            False,
        ),
        # ... the rule copied alone does not, nor a refusal that is itself copied from what was shown
        ("Never change the public API in src/quillmere/wire/; other teams import it.", [API_RULE], True),
        (
            "I will not approve any new dependency in src/quillmere/wire/ this week.",
            ["I will not approve any new dependency in src/quillmere/wire/ this week, sorry."],
            True,
        ),
    ],
)
def test_P3_echoed_tells_a_copy_of_the_context_from_an_answer(
    reply: str, shown: list[str], echo: bool
) -> None:
    assert echoed(reply, shown) is echo


def test_P3_a_next_action_that_echoes_the_context_fails_whatever_it_names() -> None:
    probe = Probe("apply", "next_action", "Write the pool settings now.", expect=("24",), forbid=("= 32",))
    copied = "I meant the max_connections of the harrowfield-gateway pool must be 24, not 32."
    assert check_next_action(probe, copied) == (True, "")  # without the texts shown, a substring check
    assert check_next_action(probe, copied, [CORRECTION]) == (
        False,
        "an echo of what it was shown, not an answer",
    )
    assert check_next_action(probe, "max_connections = 24 in the pool config.", [CORRECTION]) == (True, "")


WORD = st.sampled_from(("pool", "set", "the", "max", "connections", "to", "24", "now", "push", "main"))


@given(st.lists(WORD, min_size=6, max_size=30), st.lists(WORD, max_size=10), st.lists(WORD, max_size=10))
def test_P3_a_copy_of_a_shown_text_is_an_echo_and_words_of_ones_own_are_not(
    text: list[str], before: list[str], after: list[str]
) -> None:
    source = " ".join(before + text + after)
    assert echoed(" ".join(text), [source])  # a verbatim piece of ECHO_RUN words or more
    own = " ".join(f"{w}x" for w in text)  # the same length, in words no text shown holds
    assert not echoed(own, [source])


def test_E1_a_probe_says_which_of_the_users_messages_its_reminder_quoted(counter: TokenCounter) -> None:
    """The lever's reading (which probes had the user's words restated after the question) needs no
    stored text: the row keeps the quoted message numbers, fit to commit for any session."""
    from avibe.record.checkpoint import MemoItem

    memo = (MemoItem(4, "Never push to trunk-demo."), MemoItem(6, "Thanks, that reads well."))
    probe = Probe("push", "next_action", "Push the fix to trunk-demo now.", expect=("pull request",))
    model = ScriptedModel([reply("I will open a pull request instead."), reply("Opening a pull request.")])
    reminded = ask(probe, CONTEXT, model, counter, 4000, memo=memo)
    assert reminded.passed is True and reminded.reminded == (4,)
    assert reminded.as_dict()["reminded"] == [4]
    assert ask(probe, CONTEXT, model, counter, 4000).as_dict()["reminded"] == []  # no memo: no note
