"""Model facts (SPEC F1): window, output limit, prices and the context length where the price rises.

Hosted models: LiteLLM's offline model map (`model_prices_and_context_window_backup.json`, the file
LiteLLM itself uses with LITELLM_LOCAL_MODEL_COST_MAP=True), read as JSON so that asking for facts does
not import LiteLLM (~2 s). Tiered prices come from its `input_cost_per_token_above_<N>k_tokens` keys;
`PRICE_TIER_OVERRIDES` adds tiers the map lacks.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from avibe.errors import ModelUnavailable
from avibe.record.messages import ModelFacts

# Models whose price per token rises past a context length that LiteLLM's map (1.110.2) does not record.
# Anthropic bills Sonnet 4 / 4.5 prompts above 200k tokens (1M-context beta) at a higher rate
# (docs.anthropic.com, "Pricing": long context). Gemini 1.5 Pro doubled its price above 128k tokens.
PRICE_TIER_OVERRIDES: dict[str, int] = {
    "claude-sonnet-4-20250514": 200_000,
    "claude-sonnet-4-0": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4-5-20250929": 200_000,
    "gemini-1.5-pro": 128_000,
}

WELL_KNOWN = (
    "anthropic/claude-sonnet-4-5",
    "openai/gpt-5",
    "openai/gpt-4o",
    "gemini/gemini-2.5-pro",
)

_TIER_KEY = re.compile(r"^input_cost_per_token_above_(\d+)k_tokens$")


def litellm_data_dir() -> Path:
    """LiteLLM's package directory, found without importing it."""
    spec = find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("litellm is not installed; run `pip install -e .` to use hosted models")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def model_map() -> dict[str, dict[str, Any]]:
    path = litellm_data_dir() / "model_prices_and_context_window_backup.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if isinstance(v, dict) and k != "sample_spec"}


def lookup(name: str) -> tuple[str, dict[str, Any]] | None:
    """`provider/model` or `model` -> (map key, entry); the provider prefix must agree with the entry."""
    table = model_map()
    if name in table:
        return name, table[name]
    provider, _, bare = name.partition("/")
    if bare and bare in table:
        entry_provider = str(table[bare].get("litellm_provider", ""))
        if entry_provider == provider or entry_provider.startswith(provider + "-"):
            return bare, table[bare]
    return None


def price_tier_at(key: str, entry: dict[str, Any]) -> int | None:
    """The first context length above which the input price per token rises."""
    base = entry.get("input_cost_per_token")
    tiers = []
    for field, price in entry.items():
        match = _TIER_KEY.match(field)
        if match and isinstance(price, int | float) and (base is None or price > base):
            tiers.append(int(match.group(1)) * 1000)
    if tiers:
        return min(tiers)
    bare = key.rsplit("/", 1)[-1]
    return PRICE_TIER_OVERRIDES.get(bare)


UNMAPPED_MAX_OUTPUT = 4_096  # reply reserve for a model the map lacks (an Ollama or vLLM server)


def hosted_facts(name: str, window: int | None = None) -> ModelFacts:
    """Facts from the model map; `window` (AVIBE_MODEL_WINDOW) overrides its window, and makes a model
    the map lacks usable (no prices known then, so no price tier)."""
    found = lookup(name)
    if found is None and window is not None:
        return ModelFacts(name=name, window=window, max_output=min(UNMAPPED_MAX_OUTPUT, window // 4))
    if found is None:
        raise ModelUnavailable(
            f"unknown model {name!r}: not in LiteLLM's model map; use a `provider/model` name that "
            "`vibe models NAME` knows (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4o), 'embedded', "
            "or 'local:/path/model.gguf'; for a server the map lacks (Ollama, vLLM) also set "
            "AVIBE_MODEL_WINDOW to its context size"
        )
    key, entry = found
    mapped = int(entry.get("max_input_tokens") or entry.get("max_tokens") or 0)
    window = min(window, mapped) if window and mapped else (window or mapped)
    if window <= 0:
        raise ModelUnavailable(f"LiteLLM's model map has no context window for {name!r}; pick another model")
    max_output = int(entry.get("max_output_tokens") or entry.get("max_tokens") or 4096)
    return ModelFacts(
        name=name,
        window=window,
        max_output=min(max_output, window // 4),
        input_price=_price(entry.get("input_cost_per_token")),
        output_price=_price(entry.get("output_cost_per_token")),
        price_tier_at=price_tier_at(key, entry),
    )


def _price(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def model_facts(name: str, window: int | None = None) -> ModelFacts:
    """Facts for any model name the harness accepts; the embedded ones without loading weights.
    `window` (AVIBE_MODEL_WINDOW) caps a hosted model's window or supplies one the map lacks."""
    from avibe.providers.modelfile import EMBEDDED_MODELS

    if name in EMBEDDED_MODELS or name.startswith("local:"):
        from avibe.providers.embedded import MAX_OUTPUT, N_CTX

        return ModelFacts(name=name, window=N_CTX, max_output=MAX_OUTPUT)
    return hosted_facts(name, window)
