"""Fixtures for the memory evaluation: a real token counter (tiktoken, offline) and the package's strict
`ScriptedModel` driven by a deterministic summariser, so every strategy can run without a real model."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eval_scripts import respond

from avibe.ports import TokenCounter
from avibe.providers.counting import TiktokenCounter
from avibe.providers.scripted import ScriptedModel


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TiktokenCounter("cl100k_base")


@pytest.fixture
def scripted() -> Callable[[int], ScriptedModel]:
    """A strict scripted model with `n` steps, each answered by `respond`."""

    def make(n: int) -> ScriptedModel:
        return ScriptedModel([respond] * n)

    return make
