"""The meter's cost when a session opens: the model's prices, and what the session's recorded requests
cost so far (`avibe.providers.prices`; the points `avibe.host.context_log` keeps). From there on the meter
adds each request as it is made (`Meter.after`). `vibe sessions` shows `recorded_cost` too."""

from __future__ import annotations

from dataclasses import replace

from avibe.host.context_log import load_series
from avibe.ports import RecordStore
from avibe.providers.prices import UsageCost, prices_for, usage_cost
from avibe.tui.meter import Meter


def priced(meter: Meter, store: RecordStore | None, session_id: str, model: str) -> Meter:
    """`meter` with `model`'s prices and the session's cost so far (`-` where a price is not known)."""
    prices = prices_for(model)
    if store is None:
        return replace(meter, prices=prices, turn_cost=None, session_cost=None)
    recorded = recorded_cost(store, session_id, model)
    turn = 0.0 if prices is not None else None
    return replace(meter, prices=prices, turn_cost=turn, session_cost=recorded.session)


def recorded_cost(store: RecordStore, session_id: str, model: str = "") -> UsageCost:
    """What the session's recorded requests cost (`vibe sessions` too); `model`: the session's model
    where its record does not name one."""
    series = load_series(store, session_id)
    return usage_cost(series.points, series.limits.model or model)
