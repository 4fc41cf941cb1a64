"""The snapshot helpers' failure message (tests/snapshots/helpers.py): a CI log keeps no
SVG, so a mismatch must show the screen rows that differ, not Rich's per-render class hash
(which changes with any change and was all a session-19 CI failure showed)."""

from __future__ import annotations

from tests.snapshots.helpers import SNAPSHOTS, screen_lines, snapshot_diff

SVG = (SNAPSHOTS / "run_stream_timeline_160x48.svg").read_text()


def test_screen_lines_read_back_the_rows_at_their_columns():
    rows = screen_lines(SVG)
    assert len(rows) == 48 and max(map(len, rows)) == 160
    assert rows[0].startswith(" campaign stream · cpu · elapsed 0:36")
    # runs of spaces are bare background in the SVG: the columns still line up
    assert rows[3].index("experiment") == rows[4].index("stream")


def test_a_text_change_shows_the_row_a_style_change_says_so():
    changed = snapshot_diff(SVG, SVG.replace("4.77&#160;s", "4.78&#160;s"))
    assert changed.startswith("screen text:")
    assert "- p95 job completion so far: seq 4.77 s" in changed
    assert "+ p95 job completion so far: seq 4.78 s" in changed
    styled = snapshot_diff(SVG, SVG.replace("#98e024", "#98e025"))
    assert styled.startswith("styles (screen text identical):") and "#98e025" in styled
    assert "terminal-X-" in styled  # the hash is normalised away
