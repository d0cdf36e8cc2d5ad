"""What the generated users say besides the planted truth: the sentences of a long working brief, short
chatter with its answers, and the words a declining next action uses."""

from __future__ import annotations

from typing import Final

from avibe.evals.generators.builder import Builder

# Sentences of a long working brief: real instructions, none of them a constraint the metrics look for.
BRIEF: Final = (
    "For each ticket, read it first, make the change it asks for, and add one line to CHANGELOG.md.",
    "Run the tests after every change and fix what you broke before you move on.",
    "Keep the docs in docs/guide.md in step with the code you change.",
    "When a ticket is unclear, make the smallest change that satisfies it and say what you assumed.",
    "Commit after each ticket with a message that names the ticket.",
    "Use the existing helpers in src/ rather than writing new ones.",
    "If a test is flaky, note it in the ticket instead of retrying it forever.",
    "Keep your replies short: what you changed, and what is next.",
)
REPORTING: Final = (
    "At the end of each ticket, write a two-line status: what changed and which tests ran.",
    "Group small fixes into one commit only when they touch the same file.",
    "Do not reformat code you are not otherwise changing.",
    "When you are waiting on a long command, say what it is and how long it usually takes.",
    "If you find a bug outside the ticket, add a new ticket for it instead of fixing it on the way.",
    "Name new files after what they hold, in lower case with dashes.",
)
FOLDERS: Final = ("vendor/", "third_party/", "generated/", "migrations/")


# A next action that declines says so: "not" alone passed a reply that explained how to patch the folder
# ("if the patch is not applied correctly, ..." in the real set), so the negation must be one of these.
DECLINES: Final = (
    "do not", "don't", "will not", "won't", "must not", "may not", "should not", "cannot", "can't",
    "not allowed", "not permitted",
)  # fmt: skip


def brief_lines(b: Builder, pool: tuple[str, ...], count: int) -> list[str]:
    return b.rng.sample(list(pool), count)


# Short user messages for the talkative types: questions and nudges about the work, never a rule, a number
# or a name the ground truth plants (so they only fill the handoff's recency budget).
CHATTER: Final = (
    "Can you look at {path} next?",
    "What does {func} return on empty input?",
    "Any luck with the tests?",
    "Nice, that reads better.",
    "Is {func} still used anywhere?",
    "Hm, why is {path} so long?",
    "ok, continue",
    "Thanks. What's next?",
    "Does {func} have a test?",
    "Show me the diff when you're done.",
    "Good catch.",
    "Let's leave {path} as it is for now.",
    "How long do the tests take now?",
    "Sounds right to me.",
)


# The assistant's answer to each CHATTER message, in the same order, again without a number or a planted
# word. Varied and about the message, as an agent would answer it: one reply to all ("Sure.") gave the
# conversation's tail a pattern small models copied into any answer ("Sure." to a yes-or-no probe, from
# every context holding it), so those probes measured the imitation rather than what the context kept.
CHATTER_REPLIES: Final = (
    "Yes - I'll open {path} after this step.",
    "{func} returns an empty list on empty input; I checked the early return.",
    "A few failures left, all in the same fixture; fixing that next.",
    "Glad it helps; the rest of the module follows the same shape.",
    "Only the tests still call {func}.",
    "It grew one helper at a time; most of it is argument parsing.",
    "Continuing with the next file.",
    "Next is the slow import at start-up; I'll profile it first.",
    "{func} is tested on the happy path only; I'll add an edge case.",
    "Will do - I'll paste the diff once the tests pass.",
    "Thanks, that one would have bitten us later.",
    "Leaving {path} untouched.",
    "A bit faster than before; the integration tests are the slow part.",
    "Good - moving on.",
)


def add_chatter(b: Builder, count: int, turns: int) -> None:
    """`count` short user messages, each answered, with `turns` filler turns spread evenly among them."""
    base, extra = divmod(turns, count)
    for i in range(count):
        at = b.rng.randrange(len(CHATTER))
        path, func = b.filler._path(), b.filler._func()
        b.say(CHATTER[at].format(path=path, func=func))
        b.reply(CHATTER_REPLIES[at].format(path=path, func=func))
        for _ in range(base + (1 if i < extra else 0)):
            b.events.append(b.filler.turn())
