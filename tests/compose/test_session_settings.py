"""A session's recorded settings run it on any host (avibe.compose.session_settings, docs/serve.md): the
recorded approval and sandbox hold unless the person chose theirs for this process, and a host's own
stricter settings still hold (a setting only ever tightens on its way to a host)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from avibe.compose.session_settings import in_force, record_change, recorded_compaction, recorded_settings
from avibe.config import load_settings
from avibe.config.values import APPROVAL_MODES, SANDBOX_MODES
from avibe.record.state import SessionSettings
from avibe.store import open_store

SETTINGS = load_settings({"AVIBE_HOME": "/nonexistent-avibe-home"}, user_config=Path("/nonexistent.toml"))
PICKED = st.frozensets(st.sampled_from(["approval", "sandbox"]))


@given(
    own_approval=st.sampled_from(APPROVAL_MODES), kept_approval=st.sampled_from(("", *APPROVAL_MODES, "x")),
    own_sandbox=st.sampled_from(SANDBOX_MODES), kept_sandbox=st.sampled_from(("", *SANDBOX_MODES, "x")),
    chosen=PICKED,
)  # fmt: skip
def test_the_stricter_of_the_recorded_and_the_hosts_own_unless_the_person_chose(
    own_approval: str, kept_approval: str, own_sandbox: str, kept_sandbox: str, chosen: frozenset[str]
) -> None:
    own = dataclasses.replace(SETTINGS, approval=own_approval, sandbox=own_sandbox)
    ran = in_force(own, SessionSettings(approval=kept_approval, sandbox=kept_sandbox), chosen)
    valid_approval = kept_approval in APPROVAL_MODES and "approval" not in chosen
    expected_approval = "ask" if valid_approval and "ask" in (own_approval, kept_approval) else own_approval
    assert ran.approval == expected_approval
    ranks = [SANDBOX_MODES.index(own_sandbox)]
    if kept_sandbox in SANDBOX_MODES and "sandbox" not in chosen:
        ranks.append(SANDBOX_MODES.index(kept_sandbox))
    assert ran.sandbox == SANDBOX_MODES[min(ranks)]


def test_a_change_is_recorded_and_a_damaged_or_unknown_value_falls_back(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'avibe.db'}") as store:
        session = store.create_session(title="t").id
        assert recorded_settings(store, session) == SessionSettings()
        store.save_state(session, SessionSettings.KEY, SessionSettings("m", "ask", "read-only", "").to_dict())
        record_change(store, session, compaction="handoff")
        assert recorded_settings(store, session) == SessionSettings("m", "ask", "read-only", "handoff")
        store.save_state(session, SessionSettings.KEY, {"model": 3})
        assert recorded_settings(store, session) == SessionSettings()  # logged; the host's own run it
    assert recorded_compaction(SessionSettings(compaction="no-such"), "checkpoint") == "checkpoint"
    assert recorded_compaction(SessionSettings(compaction="handoff"), "checkpoint") == "handoff"
