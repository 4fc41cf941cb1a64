"""fugue_tui.format: the one place that says how missing values, numbers, durations and
rates are shown."""

import math

from fugue_tui.format import (
    MISSING,
    PENDING,
    finite,
    fmt_duration,
    fmt_number,
    fmt_rate,
    fmt_seconds,
    fmt_text,
)


def test_missing_is_never_zero_and_has_one_mark_per_kind():
    assert (MISSING, PENDING) == ("—", "–")
    for value in (None, math.nan, math.inf, "", "x"):
        assert finite(value) is None
        assert fmt_number(value, ".3f") == MISSING
        assert fmt_rate(value) == MISSING
        assert fmt_number(value, ".3f", "--") == "--"
    assert fmt_duration(None) == fmt_seconds(None) == fmt_duration(math.nan) == PENDING
    assert fmt_text(None) == fmt_text(math.nan) == ""


def test_numbers_durations_rates():
    assert fmt_number("1.23456", ".3f") == "1.235" and finite("2") == 2.0
    assert fmt_rate(12345.4) == "12,345"
    assert fmt_seconds(12.345) == "12.35 s"
    assert [fmt_duration(s) for s in (0, 59.6, 3600, 3725)] == ["0:00", "1:00", "1:00:00",
                                                                 "1:02:05"]
    assert fmt_text(3) == "3"
