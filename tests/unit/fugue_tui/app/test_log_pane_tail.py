"""The dashboard's cell.log pane keeps following a log that was cut shorter underneath it
(issue 18: a torn or truncated file must not blind a reader)."""

from __future__ import annotations

from fugue_tui.app.widgets.log_pane import LogTail


def test_log_cut_shorter_is_followed_again(tmp_path):
    log = tmp_path / "cell.log"
    log.write_text("one\ntwo\nthree\n")
    tail = LogTail()
    lines, reset = tail.read(str(log))
    assert reset and lines == ["one", "two", "three"]
    log.write_text("")  # truncated, as a full disk or a tool rewriting it can
    with log.open("a") as handle:
        handle.write("four\n")
    lines, reset = tail.read(str(log))
    assert not reset
    assert lines[-1] == "four" and "cut" in lines[0]
    with log.open("a") as handle:
        handle.write("five\nsix")
    assert tail.read(str(log)) == (["five"], False)
    with log.open("a") as handle:
        handle.write("\n")
    assert tail.read(str(log)) == (["six"], False)
