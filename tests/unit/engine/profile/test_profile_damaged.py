"""Issue 44: an unreadable profiles.csv is named with its cause, and a profile row with an
impossible figure (a negative RSS, NaN, text) is left out with one warning naming
file:line column=value, so simulate and max_parallel = "auto" never use it."""

from __future__ import annotations

import csv

import pytest

from engine.errors import OutputError
from engine.profile.store import COLUMNS, read_profiles


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})


def test_negative_rss_row_left_out_and_named(tmp_path):
    write(tmp_path / "profiles.csv", [
        {"profile_id": "a" * 16, "rss1_mb": "512.5", "rss_mb": '{"1":512.5,"2":600}'},
        {"profile_id": "b" * 16, "rss1_mb": "-300"},
        {"profile_id": "c" * 16, "rss1_mb": "nan"},
        {"profile_id": "d" * 16, "rss_mb": '{"1":-5}'},
        {"profile_id": "e" * 16, "rss_per_member_mb": "-0.2"},  # a noisy slope: allowed
    ])
    notes: list[str] = []
    kept = read_profiles(tmp_path, notes)
    assert [p.id for p in kept] == ["a" * 16, "e" * 16]
    assert len(notes) == 1
    assert f"{tmp_path / 'profiles.csv'}:3 rss1_mb='-300' (negative)" in notes[0]
    assert "profiles.csv:4 rss1_mb='nan' (not a number)" in notes[0]
    assert "profiles.csv:5 rss_mb='{\"1\":-5}' (negative)" in notes[0]


def test_directory_or_garbage_is_named(tmp_path):
    (tmp_path / "profiles.csv").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        read_profiles(tmp_path)
    other = tmp_path / "x"
    other.mkdir()
    (other / "profiles.csv").write_bytes(b"\x00\xff\xfe garbage\n\x01\x02\n")
    with pytest.raises(OutputError, match="not a profiles file"):
        read_profiles(other)
    assert read_profiles(tmp_path / "none") == []
