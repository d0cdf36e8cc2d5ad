"""Token counting for hosted models: an offline tiktoken estimate, calibrated by reported usage.

No tokenizer is downloaded at run time: LiteLLM ships the cl100k_base, o200k_base and p50k_base files in
`litellm/litellm_core_utils/tokenizers/` under tiktoken's cache names, so TIKTOKEN_CACHE_DIR is pointed
there (found without importing LiteLLM). Only OpenAI models use these encodings natively; for the others
the count is an estimate, which `CalibratedCounter` corrects with the prompt tokens each reply reports.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from avibe.errors import ModelUnavailable
from avibe.ports import TokenCounter
from avibe.providers.facts import litellm_data_dir
from avibe.record.messages import ChatMessage, ToolSpec

log = logging.getLogger(__name__)

# Per-message framing overhead of OpenAI's chat format (role, separators), per their cookbook.
MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


def bundled_encoding(name: str) -> Any:
    """A tiktoken encoding from LiteLLM's bundled files; ModelUnavailable if it is not bundled."""
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(litellm_data_dir() / "litellm_core_utils" / "tokenizers"))
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except (ValueError, OSError) as exc:  # a download attempt fails offline with an OSError subclass
        raise ModelUnavailable(f"tokenizer {name} is not available offline: {exc}") from exc


def encoding_for(model: str) -> str:
    bare = model.rsplit("/", 1)[-1]
    return "o200k_base" if bare.startswith(_O200K_PREFIXES) else "cl100k_base"


class TiktokenCounter:
    """Exact for OpenAI models of that encoding; an estimate for other providers."""

    additive = True  # count_messages = a constant + the sum of each message's count (the loop caches those)

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self._enc = bundled_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        total = REPLY_PRIMER
        for m in messages:
            total += MESSAGE_OVERHEAD + self.count(m.content)
            for call in m.tool_calls:
                total += self.count(call.name) + self.count(_json(call.arguments))
        return total


def _tool_dict(tool: ToolSpec) -> dict[str, object]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _json(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Bounds and smoothing of the correction factor (reported / estimated)."""

    low: float = 0.5
    high: float = 2.0
    weight: float = 0.5  # share of each new observation in the running factor
    start: float = 1.1  # before any observation, lean high: counting too much only checkpoints earlier


class CalibratedCounter:
    """Wraps an estimator; scales by the ratio between the provider's reported prompt tokens and the
    estimate for the same messages (bounded, exponentially smoothed), so estimates cannot drift far."""

    additive = True  # the estimator's sum, scaled (to rounding); a changed factor shows in `count`

    def __init__(self, estimator: TokenCounter, calibration: Calibration | None = None) -> None:
        self._estimator = estimator
        self._cal = calibration or Calibration()
        self._factor = self._cal.start
        self.observations = 0

    @property
    def factor(self) -> float:
        return self._factor

    def observe(
        self, messages: Sequence[ChatMessage], reported_prompt_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> None:
        """Feed the prompt tokens a provider reported for `messages` (+ the tool schemas it was sent)."""
        estimate = self._estimator.count_messages(messages) + sum(
            self._estimator.count(_json(_tool_dict(t))) for t in tools
        )
        if estimate <= 0 or reported_prompt_tokens <= 0:
            log.info("calibration skipped: estimate %d, reported %d", estimate, reported_prompt_tokens)
            return
        ratio = min(self._cal.high, max(self._cal.low, reported_prompt_tokens / estimate))
        w = self._cal.weight if self.observations else 1.0  # the first observation replaces the guess
        self._factor = (1 - w) * self._factor + w * ratio
        self.observations += 1

    def count(self, text: str) -> int:
        return round(self._estimator.count(text) * self._factor)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return round(self._estimator.count_messages(messages) * self._factor)


def hosted_counter(model: str) -> CalibratedCounter:
    return CalibratedCounter(TiktokenCounter(encoding_for(model)))
