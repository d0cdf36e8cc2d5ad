"""What a model's requests cost, from LiteLLM's price table (`avibe.providers.facts.model_map`, the table
`litellm.model_cost` holds, read without importing LiteLLM) and the usage the provider reported: the chat's
meter (per turn and per session), `vibe sessions` and the inspector's session list (docs/chat.md).

API:
    prices_for(model) -> Prices | None        None: a hosted model the table lacks (no price known)
    Prices.cost(prompt, cached, output) -> float   USD for one request
    usage_cost(points, model) -> UsageCost     a session's recorded requests (`host/context_log.py` points)
    money(usd) -> str                          `$0.0123`, `$1.23`, `-` when unknown

The embedded and `local:` models cost nothing. A cached prompt token costs the table's
`cache_read_input_token_cost` where it has one (else the input price); past the price tier
(`input_cost_per_token_above_<N>k_tokens`) the whole request is billed at the higher rates, as the providers
bill it. Only the agent's own requests are recorded with their usage; a checkpoint turn's calls are not in
the sum (their prompt tokens are in `vibe checkpoints`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from avibe.errors import ModelUnavailable
from avibe.providers.facts import lookup, price_tier_at

FREE_PREFIXES: Final = ("embedded", "local:")  # the embedded tiers and any local GGUF file: run here, free


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per token; `cached` None: a cached prompt token costs the input price."""

    input: float = 0.0
    output: float = 0.0
    cached: float | None = None
    tier_at: int | None = None  # past this many prompt tokens the tier's prices apply
    tier_input: float | None = None
    tier_output: float | None = None

    def cost(self, prompt: int, cached: int, output: int) -> float:
        """One request: `prompt` tokens (of which `cached` came from the prompt cache) and `output` tokens."""
        tiered = self.tier_at is not None and prompt > self.tier_at
        per_in = (self.tier_input if tiered else None) or self.input
        per_out = (self.tier_output if tiered else None) or self.output
        per_cached = per_in if self.cached is None or tiered else self.cached
        cached = min(max(cached, 0), max(prompt, 0))
        return (max(prompt, 0) - cached) * per_in + cached * per_cached + max(output, 0) * per_out


def _number(entry: Mapping[str, Any], key: str) -> float | None:
    value = entry.get(key)
    return float(value) if isinstance(value, int | float) else None


def prices_for(model: str) -> Prices | None:
    """The model's prices: zero for a model run here, the table's for a hosted one, None when the table
    lacks it (an Ollama or vLLM server: its cost is not known, never guessed)."""
    if model.startswith(FREE_PREFIXES):
        return Prices()
    try:
        found = lookup(model)
    except ModelUnavailable:  # LiteLLM is not installed: no table to read
        return None
    if found is None:
        return None
    key, entry = found
    tier = price_tier_at(key, entry)
    above = f"_above_{tier // 1000}k_tokens" if tier else ""
    return Prices(
        input=_number(entry, "input_cost_per_token") or 0.0,
        output=_number(entry, "output_cost_per_token") or 0.0,
        cached=_number(entry, "cache_read_input_token_cost"),
        tier_at=tier,
        tier_input=_number(entry, f"input_cost_per_token{above}") if above else None,
        tier_output=_number(entry, f"output_cost_per_token{above}") if above else None,
    )


@dataclass(frozen=True, slots=True)
class UsageCost:
    """A session's cost: all its recorded requests, and those of its last turn (None: a model whose
    price is not known took part)."""

    session: float | None
    last_turn: float | None
    requests: int


def _point_cost(point: Mapping[str, Any], model: str, prices: dict[str, Prices | None]) -> float | None:
    name = str(point.get("model") or model)
    if name not in prices:
        prices[name] = prices_for(name)
    known = prices[name]
    if known is None:
        return None
    usage = (int(point.get(k) or 0) for k in ("prompt", "cached", "output"))
    return known.cost(*usage)


def usage_cost(points: Sequence[Mapping[str, Any]], model: str) -> UsageCost:
    """The cost of recorded requests (`avibe.host.context_log` points: prompt, cached and output tokens,
    the step in its turn, the model where recorded - else `model`, the session's). A turn starts at step 1."""
    prices: dict[str, Prices | None] = {}
    session: float | None = 0.0
    turn: float | None = 0.0
    for point in points:
        cost = _point_cost(point, model, prices)
        if int(point.get("step") or 1) == 1:
            turn = 0.0
        session = None if session is None or cost is None else session + cost
        turn = None if turn is None or cost is None else turn + cost
    return UsageCost(session, turn if points else None, len(points))


def money(usd: float | None) -> str:
    """`$0`, `$0.0042` (under a cent: four places), `$1.23`; `-` when the price is not known."""
    if usd is None:
        return "-"
    if usd == 0:
        return "$0"
    return f"${usd:.4f}" if usd < 0.01 else f"${usd:.2f}"
