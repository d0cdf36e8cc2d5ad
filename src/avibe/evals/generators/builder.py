"""The scenario builder and the name pools every generator draws from (deterministic per type and
seed: `random.Random(f"{type}:{seed}")`)."""

from __future__ import annotations

import random
from typing import Final

from avibe.evals.filler import Filler, make_project
from avibe.evals.scenario import (
    AssistantTurn,
    BackgroundInput,
    BackgroundKind,
    Event,
    GroundTruth,
    Scenario,
    ToolUse,
    UserMessage,
)

PROJECTS: Final = (
    "Larkspur",
    "Quillmere",
    "Brindlewood",
    "Oakhaven",
    "Tesselate",
    "Marrowgate",
    "Pellucid",
    "Harrowfield",
    "Cindervale",
    "Wrenmoor",
)
SYSTEMS: Final = ("Fernwick", "Galloway", "Otterline", "Sablepoint", "Thistledown", "Vantrell", "Kestrelhaus")
USERS: Final = ("mara", "odile", "kofi", "renata", "tomasz", "ines", "yusuf", "linnea")
SERVICES: Final = ("ingest", "billing", "notifier", "scheduler", "indexer", "gateway")


class Builder:
    """Collects events for one scenario; ground truth is added by the generator."""

    def __init__(self, kind: str, seed: int, size: int) -> None:
        self.rng = random.Random(f"{kind}:{seed}")
        self.kind, self.seed, self.size = kind, seed, size
        self.user = self.rng.choice(USERS)
        self.project = make_project(self.rng, self.rng.choice(PROJECTS))
        self.filler = Filler(self.rng, self.project)
        self.events: list[Event] = []

    def say(self, text: str) -> str:
        self.events.append(UserMessage(self.user, text))
        return text

    def reply(self, text: str, *uses: ToolUse) -> None:
        self.events.append(AssistantTurn(text, uses))

    def tool(self, name: str, arguments: dict[str, object], output: str, *, error: bool = False) -> ToolUse:
        return ToolUse(self.filler._id(), name, dict(arguments), output, error)

    def background(self, source: BackgroundKind, name: str, ref: str, text: str) -> None:
        self.events.append(BackgroundInput(source, name, ref, text))

    def work(self, turns: int) -> None:
        """`turns` filler turns, with an occasional nudge from the user."""
        for i in range(turns):
            self.events.append(self.filler.turn())
            if i % 5 == 4:
                self.say(self.filler.nudge())

    def share(self, parts: int) -> list[int]:
        """Split the filler budget into `parts` nearly equal, deterministic segments."""
        base, extra = divmod(self.size, parts)
        return [base + (1 if i < extra else 0) for i in range(parts)]

    def scenario(self, truth: GroundTruth, description: str) -> Scenario:
        sid = f"{self.kind}-s{self.seed}-n{self.size}"
        return Scenario(
            sid, self.kind, self.seed, self.user, tuple(self.events), truth, description=description
        )


def open_with_mission(b: Builder, goal: str, key: str) -> tuple[str, str]:
    text = b.say(f"Our goal for this whole session: {goal}. I'll hand you smaller tasks along the way.")
    return text, key
