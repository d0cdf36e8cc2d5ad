"""Avibe's checkpoint as an evaluation strategy (mind, memo, scene): Vibey living the transcript through
the session host (`avibe.evals.lived`). Apart from `avibe.evals.checkpoint` (its name, carry and audits),
which the engine imports: this module imports the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from avibe.checkpoint.turn import Mode
from avibe.context.assemble import Rendering
from avibe.evals.checkpoint import NAME, ReplayCarry, mode_for
from avibe.evals.lived import live
from avibe.evals.slots import work_dir
from avibe.evals.strategy import Compacted, CompactState, StrategyUnavailable
from avibe.ports import ModelClient, TokenCounter

if TYPE_CHECKING:
    from avibe.evals.replay import Compaction, ReplayResult
    from avibe.evals.scenario import Scenario


@dataclass(frozen=True, slots=True)
class AvibeCheckpoint:
    """Avibe's checkpoint (mind, memo, scene): Vibey living the transcript with its own room loop, policy
    and driver. `renderings`: the recollection also recorded in these at every checkpoint (meta); `warm`:
    a model each agent step's request also goes to, uncounted (benchmarks/checkpoint_cost.py's cache)."""

    mode: Mode | None = None
    name: str = NAME
    renderings: tuple[Rendering, ...] = ()
    warm: ModelClient | None = field(default=None, compare=False)

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        """Not a step of the shared loop: Vibey decides when to make room while it lives the whole
        transcript (`live`, which `avibe.evals.replay.replay` runs)."""
        raise StrategyUnavailable(
            f"{self.name} is lived by Vibey over a whole transcript: run it with replay()"
        )

    def live(
        self,
        scenario: Scenario,
        model: ModelClient,
        counter: TokenCounter,
        window: int,
        *,
        threshold: float,
        system_prompt: str,
        on_compaction: Callable[[Compaction], None] | None = None,
    ) -> ReplayResult:
        """The scenario lived by Vibey through the session host, making room above `threshold` x
        `window` (the eval's trigger, F1's decision at the share every strategy is compacted at)."""
        from avibe.evals.replay import ReplayResult

        mode = self.mode or mode_for(model.facts.name)
        with work_dir() as work:
            context, compactions, record, peak, saved = live(
                scenario, model, counter, window, mode=mode, threshold=int(window * threshold),
                system_prompt=system_prompt,
                renderings=self.renderings, on_compaction=on_compaction, work=work, warm=self.warm,
            )  # fmt: skip
        carry = ReplayCarry(saved[-1], saved[:-1]).dump() if saved else ""
        return ReplayResult(scenario.id, self.name, window, context, compactions, record, peak, carry)
