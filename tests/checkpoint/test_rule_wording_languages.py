"""Rules are worded in the person's own language (N2): the harness's test of rule and limit wording reads
Spanish, French, German, Portuguese, Chinese and Japanese as well as English - the real set's sessions
are a quarter not in English, and their rules were read as none and let go - without English sentences
that only look like them reading as rules."""

from __future__ import annotations

import pytest

from avibe.checkpoint.memo import reads_as_limit, reads_as_rule, subject_words

LIMITS = [
    "No uses la base de datos de producción.",  # Spanish: "no" and the verb's own form
    "Nunca hagas push a main.",
    "Ne modifie pas le fichier de configuration.",  # French
    'No uses st.metric("Solo Industrial") en el sidebar.',  # the rule is outside the call's strings
    "N'affiche pas les icônes s'il n'y a aucun risque.",
    "Ändere niemals die öffentliche API.",  # German
    "Nunca altere o esquema sem perguntar.",  # Portuguese
    "不要刪除資料庫裡的舊訂單。",  # Chinese, traditional and simplified
    "禁止直接推送到主分支",
    "be sure to distinguish zimaboard(proxmox) vs slate(BE3600)",  # keeping apart forbids mixing
    "Keep the router's files and the server's files separate.",
    "本番のデータベースは変更しないでください。",  # Japanese
]
RULES_NOT_LIMITS = [
    "Debes usar pnpm para todo.",  # a way to follow: a rule, no limit
    "Il faut écrire les tests d'abord.",
    "每個 claim 應該附上 PR 連結。",
    "改用「被後續 PR 動過的比例」當輔助訊號。",  # "use ... instead", as English "instead of"
    "Usa pnpm en lugar de npm.",
    "Be sure to run the linter before each commit.",  # how to work, in English: a rule, no limit
    "Remember to update the changelog.",
    "hazlo tu por favor",  # "do it yourself, please": who does the work, for the rest of the session
    "Run the tests yourself.",
]
PLAIN = [
    "There are no changes.",
    "no messages here",
    "The Nur Road is closed.",
    "ok 開始",
    "Create a separate branch for the fix.",
    "I'm sure it works.",
    'st.metric("🏦 Crédito Industrial", "🔒 Solo Industrial")',  # a label in pasted code, not a rule
    "print('never')",
    "La prueba pasó en la rama.",
    "九十天裡大部分代碼還沒有機會被刪掉或改寫。",
]


@pytest.mark.parametrize("text", LIMITS)
def test_N2_a_limit_in_another_language_reads_as_a_rule_and_a_limit(text: str) -> None:
    assert reads_as_rule(text) and reads_as_limit(text)


@pytest.mark.parametrize("text", RULES_NOT_LIMITS)
def test_N2_a_way_to_follow_in_another_language_is_a_rule_but_no_limit(text: str) -> None:
    assert reads_as_rule(text) and not reads_as_limit(text)


@pytest.mark.parametrize("text", PLAIN)
def test_N2_plain_sentences_in_any_language_read_as_no_rule(text: str) -> None:
    assert not reads_as_rule(text) and not reads_as_limit(text)


def test_N3_a_chinese_run_with_a_rule_word_in_it_is_still_what_the_message_is_about() -> None:
    # Han runs have no spaces: the run holding "不要" is a word of the message, not rule wording alone
    assert "bot" not in subject_words("Bot 排除不要只靠名單")  # three letters: too short, as before
    assert "排除不要只靠名單" in subject_words("Bot 排除不要只靠名單")


def test_N3_a_possessive_is_the_word_itself() -> None:
    """ "tonight's message" is about tonight: the plural rule made it "tonight'", a word nothing shares."""
    assert subject_words("Add it to tonight's message") == {"tonight", "message"}
    assert subject_words("the team's release notes") >= {"team", "release", "note"}
