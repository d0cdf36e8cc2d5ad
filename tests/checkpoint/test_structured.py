def test_V1_the_scene_grammar_shrinks_with_small_windows_but_keeps_its_floors() -> None:
    from avibe.checkpoint.structured import (
        SCENE_CHARS,
        SCENE_FLOOR_CHARS,
        SCENE_MIN_CHARS_PER_PART,
        scene_limits,
    )

    assert scene_limits(4096) == SCENE_FLOOR_CHARS
    assert scene_limits(200_000) == SCENE_CHARS
    for window in (1024, 8192, 20_000, 32_768):
        limits = scene_limits(window)
        assert all(SCENE_FLOOR_CHARS[p] <= limits[p] <= SCENE_CHARS[p] for p in SCENE_CHARS)
        assert all(limits[p] > least for p, least in SCENE_MIN_CHARS_PER_PART.items())
