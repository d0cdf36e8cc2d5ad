"""The carry (record/checkpoint.py) is validated at the store boundary: any carry survives the flat
document the store writes, and a document of the wrong types is refused naming the field."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.record.checkpoint import PLAN_STATUSES, Carry, PlanItem, Provenance, SkillRef

_text = st.text(max_size=30)
carries = st.builds(
    Carry,
    skills=st.lists(st.builds(SkillRef, _text, st.integers(0, 99)), max_size=3).map(tuple),
    files=_text,
    current_request_seqs=st.lists(st.integers(1, 10_000), max_size=4).map(tuple),
    mid_turn=st.booleans(),
    window=st.integers(0, 1_000_000),
    plan=st.lists(st.builds(PlanItem, _text, st.sampled_from(PLAN_STATUSES)), max_size=3).map(tuple),
)


@given(carries, st.builds(Provenance, trigger=_text, plan=_text, calls=st.integers(0, 9)))
def test_a_carry_survives_the_flat_document_beside_its_provenance(carry: Carry, made: Provenance) -> None:
    flat = made.to_dict() | carry.to_dict()  # StoredCheckpoint.meta: both in one mapping
    assert Carry.from_dict(flat) == carry and Provenance.from_dict(flat) == made


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"window": True}, "window"),
        ({"window": "8000"}, "window"),
        ({"mid_turn": 1}, "mid_turn"),
        ({"current_request_seqs": [3, "4"]}, "current_request_seqs"),
        ({"skills": [{"name": 7, "order": 1}]}, "skills"),
        ({"agent_plan": [{"step": "a", "status": "later"}]}, "plan"),
    ],
)
def test_a_carry_of_the_wrong_types_is_refused_naming_the_field(
    document: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        Carry.from_dict(document)


def test_a_carry_is_validated_when_replaced_too() -> None:
    with pytest.raises(ValueError, match="window"):
        dataclasses.replace(Carry(), window="8000")  # type: ignore[arg-type]
