"""A message the user sent again word for word is held once, as its latest copy (N1): the same words twice
cost the memo twice their room. The case is a real one (the eval's real set, a Spanish session): the
person sent three of 25 prompts twice; the memo held one of them twice, and let go for room the rule
"solo los primeros 10 caracteres" of an older message, and the checkpoint answered the hash question
wrong where the handoff answered 10."""

from __future__ import annotations

from core_doubles import TICKET_MIND, make_entry, structured_turn_outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.turn import Accepted

SMALL = budgets_for(8_192, 6_000)  # the floors: 150 tokens a line, 450 in all

MISSION = "En app.py buscá donde se define SGSP_DATABASE y mostrá esas líneas exactas."
HASH_RULE = "Mostrá usuarios.json sin mostrar el hash completo, solo los primeros 10 caracteres de cada uno."
REPLACE = (
    "En app.py, en la línea 301, reemplazá la ruta relativa con '..' por la carpeta database junto a "
    "app.py, con os.path.join(os.path.dirname(os.path.abspath(__file__)), 'database'). No toques nada más."
)
OTHERS = [
    "Cerrá Streamlit y ejecutá el bat de nuevo, después probá el login con el usuario admin.",
    "En INICIAR_SISTEMA.bat, después de la línea del pepper, agregá la variable SGSP_DATABASE. "
    "No toques nada más.",
]


def test_N1_a_message_sent_twice_is_held_once_and_an_older_rule_keeps_its_place() -> None:
    entries = [
        make_entry(1, MISSION),
        make_entry(3, HASH_RULE),
        make_entry(5, OTHERS[0]),
        make_entry(7, REPLACE),
        make_entry(9, OTHERS[1]),
        make_entry(11, REPLACE),
    ]
    outcome = structured_turn_outcome(entries, lambda enum: list(enum), TICKET_MIND, SMALL)
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    memo = outcome.checkpoint.memo
    assert [item.seq for item in memo if item.text == REPLACE] == [11]  # the latest copy, once
    assert any(item.text == HASH_RULE for item in memo)


TEXTS = [MISSION, HASH_RULE, REPLACE, *OTHERS, "Gracias, seguí.", "Usá pnpm en lugar de npm para todo."]


@given(
    picks=st.lists(st.sampled_from(TEXTS), min_size=2, max_size=12), ticks=st.sampled_from(["all", "none"])
)
@settings(max_examples=60, deadline=None)
def test_N1_the_memo_never_holds_the_same_words_twice(picks: list[str], ticks: str) -> None:
    """Whatever the user repeats and the model ticks, no two memo items hold the same whole message, and
    each one the memo holds is its latest copy among the messages moving out."""
    entries = [make_entry(2 * i + 1, text) for i, text in enumerate(picks)]
    outcome = structured_turn_outcome(
        entries, (lambda enum: list(enum)) if ticks == "all" else (lambda enum: []), TICKET_MIND, SMALL
    )
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    whole = [item for item in outcome.checkpoint.memo if not item.cut and "(from #" not in item.text]
    assert len({item.text for item in whole}) == len(whole), whole
    latest = {e.text: e.seq for e in entries}  # later entries overwrite earlier ones
    assert all(item.seq == latest[item.text] for item in whole if item.text in latest), whole
