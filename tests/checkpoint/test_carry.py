"""What a checkpoint carries besides mind, memo and scene (A1-A3)."""

from __future__ import annotations

from core_doubles import CharCounter
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.agent.state import remember_file
from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.carry import (
    MODIFIED_SHOWN,
    READ_SHOWN,
    LoadedSkill,
    file_list,
    record_pointer,
    skills_to_put_back,
)

COUNTER = CharCounter()
BIG = budgets_for(200_000, 180_000)


def test_A1_most_recently_loaded_first_at_the_current_version() -> None:
    loaded = [
        LoadedSkill("pdf", "pdf v2 text", 1),
        LoadedSkill("git", "git text", 3),
        LoadedSkill("sql", "sql", 2),
    ]
    put = skills_to_put_back(loaded, COUNTER, BIG)
    assert [s.name for s in put] == ["git", "sql", "pdf"]
    assert put[2].text == "pdf v2 text" and not put[2].cut


def test_A1_a_skill_loaded_twice_counts_at_its_latest_load() -> None:
    loaded = [LoadedSkill("pdf", "old", 1), LoadedSkill("git", "g", 2), LoadedSkill("pdf", "new", 5)]
    put = skills_to_put_back(loaded, COUNTER, BIG)
    assert [(s.name, s.text) for s in put] == [("pdf", "new"), ("git", "g")]


def test_A1_each_skill_is_capped_and_a_cut_one_says_how_to_load_it_whole() -> None:
    put = skills_to_put_back([LoadedSkill("huge", "word " * 10_000, 1)], COUNTER, BIG)
    assert put[0].cut and put[0].tokens <= BIG.skill_each == 5_000
    assert "`vibe skill load huge`" in put[0].text
    assert put[0].text.startswith("word word")


def test_A1_together_at_most_a_tenth_of_a_small_window() -> None:
    small = budgets_for(32_000, 28_000)  # skills together <= 3,200
    loaded = [LoadedSkill(f"s{i}", "x" * 4_000, i) for i in range(5)]  # 1,000 tokens each
    put = skills_to_put_back(loaded, COUNTER, small)
    assert [s.name for s in put][:3] == ["s4", "s3", "s2"]
    assert sum(s.tokens for s in put) <= small.skills_total == 3_200
    assert put[-1].cut  # the fourth gets what is left, cut with its note


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), st.integers(0, 30_000)), max_size=40),
    st.sampled_from([8_000, 64_000, 192_000, 2_000_000]),
)
def test_A1_caps_hold_for_any_skills_and_window(specs: list[tuple[str, int]], window: int) -> None:
    budgets = budgets_for(window, int(window * 0.9))
    loaded = [LoadedSkill(f"{name}{i}", "y" * size, i) for i, (name, size) in enumerate(specs)]
    put = skills_to_put_back(loaded, COUNTER, budgets)
    assert len(put) <= min(20, budgets.skills_max_count)
    assert sum(s.tokens for s in put) <= min(25_000, window // 10)
    assert all(s.tokens <= budgets.skill_each and COUNTER.count(s.text) == s.tokens for s in put)
    orders = {s.name: s.loaded_order for s in loaded}
    assert [orders[s.name] for s in put] == sorted((orders[s.name] for s in put), reverse=True)


def test_A2_file_list_newest_first_deduplicated_with_a_note_when_pushed_out() -> None:
    """Both lists come newest first, as the live state keeps them (repeats allowed)."""
    modified = ["src/m3.py", *(f"src/m{i}.py" for i in reversed(range(12)))]  # m3 modified last
    read = ["docs/e.md", "docs/d.md", "docs/c.md", "docs/b.md", "docs/a.md", "src/m11.py", "README.md"]
    text = file_list(modified, read)
    mod_lines = text.split("Files read")[0]
    assert mod_lines.index("src/m3.py") < mod_lines.index("src/m11.py")
    assert mod_lines.count("- ") == MODIFIED_SHOWN
    assert "src/m0.py" not in mod_lines and "src/m1.py" not in mod_lines  # the oldest two pushed out
    assert "(2 older modified files pushed out of this list)" in text
    read_part = text.split("Files read recently (newest first):")[1]
    assert read_part.count("- ") == READ_SHOWN and "src/m11.py" not in read_part
    assert "docs/e.md" in read_part and "README.md" not in read_part
    assert "(1 older read files pushed out of this list)" in text


def test_A2_files_edited_in_order_through_the_live_state_list_newest_first() -> None:
    """A bug found on a small model: after editing m0..m13 in order the list showed m0-m9 as newest first and
    said the 4 newest were pushed out. Goes through `remember_file`, as the loop does."""
    modified: tuple[str, ...] = ()
    for i in range(14):
        modified = remember_file(modified, f"m{i}.py")
    read = remember_file(remember_file((), "tickets/001.md"), "tickets/002.md")
    lines = file_list(modified, read).splitlines()
    assert lines[1:11] == [f"- m{i}.py" for i in range(13, 3, -1)]
    assert lines[11] == "(4 older modified files pushed out of this list)"
    assert lines[13:15] == ["- tickets/002.md", "- tickets/001.md"]


def test_A2_empty_lists_and_no_note_when_nothing_pushed_out() -> None:
    text = file_list([], ["a.py"])
    assert "(none)" in text and "pushed out" not in text and "- a.py" in text


def test_A3_record_pointer_says_where_and_how_to_query_the_users_messages() -> None:
    text = record_pointer("s-42", "~/.local/share/avibe/record.db")
    assert "~/.local/share/avibe/record.db" in text
    assert "record_query" in text and "vibe log --session s-42 --user" in text
    assert "Memo numbers are these message numbers" in text
    assert "run the tool again" in text
