"""How the server keeps line-based results in step with edits, and reads its settings."""

from __future__ import annotations

from atenlens.lsp.settings import Settings, TraceSettings, default_settings_json, settings_from_json
from atenlens.lsp.text import LineShift, column_from_units, column_to_units, map_line, split_lines, units

LINE = '    note = "形状 🚀"; h = F.linear(x, w)'


def apply(text: str, start: tuple[int, int], end: tuple[int, int], new: str) -> str:
    lines = text.split("\n")
    offset = lambda line, col: sum(len(each) + 1 for each in lines[:line]) + col  # noqa: E731
    return text[: offset(*start)] + new + text[offset(*end) :]


def survivors(text: str, start, end, new) -> dict[int, int]:
    """old line -> new line, for the lines whose text is unchanged where the shift puts them."""
    after = apply(text, start, end, new)
    old, current = split_lines(text), split_lines(after)
    shift = LineShift.of_change(start[0], end[0], end[1], new)
    found = {}
    for line in range(len(old)):
        target = shift.map(line)
        if target is not None and target < len(current) and current[target] == old[line]:
            found[line] = target
    return found


TEXT = "a = 1\nb = 2\nc = 3\nd = 4\n"


def test_lines_move_with_inserted_and_deleted_lines():
    assert survivors(TEXT, (1, 0), (1, 0), "x = 0\n") == {0: 0, 1: 2, 2: 3, 3: 4, 4: 5}
    assert survivors(TEXT, (1, 0), (3, 0), "") == {0: 0, 3: 1, 4: 2}
    assert survivors(TEXT, (1, 5), (1, 5), "\n") == {0: 0, 1: 1, 2: 3, 3: 4, 4: 5}  # Enter at a line's end


def test_an_edited_line_is_not_kept():
    assert survivors(TEXT, (2, 4), (2, 5), "9") == {0: 0, 1: 1, 3: 3, 4: 4}
    assert survivors(TEXT, (1, 2), (2, 2), "") == {0: 0, 3: 2, 4: 3}  # join two lines


def test_a_whole_text_change_keeps_nothing():
    assert map_line(0, [LineShift.whole_text()]) is None


def test_touches_spans():
    function = (4, 9)
    assert LineShift.of_change(5, 5, 3, "x").touches(*function)
    assert LineShift.of_change(6, 6, 0, "pass\n").touches(*function)  # a line inserted inside
    assert not LineShift.of_change(4, 4, 0, "# above\n").touches(*function)  # a line inserted above
    assert not LineShift.of_change(10, 10, 0, "x").touches(*function)
    assert not LineShift.of_change(1, 4, 0, "").touches(*function)  # lines above deleted


def test_columns_in_each_encoding():
    end = len(LINE)
    assert [column_to_units(LINE, end, e) for e in ("utf-8", "utf-16", "utf-32")] == [44, 38, 37]
    assert column_from_units(LINE, 38, "utf-16") == end
    rocket = LINE.index("🚀")
    assert (column_from_units(LINE, rocket, "utf-16"), column_from_units(LINE, rocket + 2, "utf-16")) == (
        rocket,
        rocket + 1,
    )
    assert column_from_units(LINE, rocket + 4, "utf-8") == rocket  # 形 and 状: 3 bytes each
    assert units("🚀", "utf-16") == 2 and units("形", "utf-8") == 3


def test_settings_defaults_and_fallbacks():
    assert settings_from_json(None) == (Settings(), [])
    assert settings_from_json(default_settings_json()) == (Settings(), [])
    settings, problems = settings_from_json({"atenlens": {"trace": {"timeoutSeconds": -1, "onSave": True}}})
    assert settings.trace == TraceSettings(on_save=True)
    assert problems == [
        "atenlens.trace.timeoutSeconds must be a positive number of seconds, at most 86400 "
        "(got -1); using the default 30.0"
    ]
    settings, problems = settings_from_json(["not", "an", "object"], enabled_before=True)
    assert settings == Settings() and settings.trace.enabled is False and len(problems) == 1


def test_settings_that_would_fail_every_trace_are_rejected_with_one_message():
    """Past the longest budget the worker enforces (a day) or a memory limit setrlimit cannot take,
    a value keeps its default and the user reads one message naming the value and the bound."""
    settings, problems = settings_from_json({"trace": {"timeoutSeconds": 1e12, "memoryLimitMb": 10**30}})
    assert (settings.trace.timeout_seconds, settings.trace.memory_limit_mb) == (30.0, 4096)
    assert problems == [
        "atenlens.trace.timeoutSeconds must be a positive number of seconds, at most 86400 (got 1000000000000.0); "
        "using the default 30.0",
        "atenlens.trace.memoryLimitMb must be a positive integer of MiB, at most 16777216 "
        "(got 1000000000000000000000000000000); using the default 4096",
    ]
    for timeout in (float("inf"), float("nan")):
        settings, problems = settings_from_json({"trace": {"timeoutSeconds": timeout}})
        assert settings.trace.timeout_seconds == 30.0 and len(problems) == 1 and "timeoutSeconds" in problems[0]
    settings, problems = settings_from_json({"trace": {"timeoutSeconds": 86400, "memoryLimitMb": 16777216}})
    assert (settings.trace.timeout_seconds, settings.trace.memory_limit_mb, problems) == (86400.0, 16777216, [])


def test_trace_enabled_is_true_only_while_the_last_explicit_valid_value_is_true():
    """Silence keeps the last value (off when none was given); anything unclear turns it off."""
    for silent in (None, {}, {"hints": {"maxLength": 20}}, {"trace": {"device": "cpu"}}, {"atenlens": {}}):
        assert settings_from_json(silent)[0].trace.enabled is False
        assert settings_from_json(silent, enabled_before=True)[0].trace.enabled is True
    for unclear in (
        [],
        "true",
        1,
        {"trace": None},
        {"trace": []},
        {"trace": {"enabled": None}},
        {"trace": {"enabled": "true"}},
        {"trace": {"enabled": 1}},
        {"atenlens": {"trace": None}},
    ):
        settings, problems = settings_from_json(unclear, enabled_before=True)
        assert settings.trace.enabled is False and len(problems) == 1 and "tracing is off" in problems[0], unclear
    assert settings_from_json({"trace": {"enabled": True}})[0].trace.enabled is True
    assert (
        settings_from_json({"atenlens": {"trace": {"enabled": False}}}, enabled_before=True)[0].trace.enabled is False
    )
