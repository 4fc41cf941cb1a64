"""``profile``'s progress (issue 49): on a terminal one line redrawn in place with the
configuration, the K and an ETA, erased before the command's own lines; piped, a plain
line per K measured. Notes as :func:`engine.profile.collect.run_probe` passes them."""

from __future__ import annotations

import io

from fugue_tui.console.profile_progress import ProfileProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(live: bool) -> str:
    clock, out = Clock(), io.StringIO()
    progress = ProfileProgress((1, 2), out, live=live, clock=clock)
    for i in (1, 2):
        progress.say(f"profile {i}/2: key{i} K = 1, 2 ...")
        progress(i, 2, f"key{i}", {"phase": "loaded"})
        for k in (1, 2):
            progress(i, 2, f"key{i}", {"phase": "start", "k": k})
            clock.now += 10.0 * (k + 1)
            progress(i, 2, f"key{i}", {"phase": "tick"})
            progress(i, 2, f"key{i}", {"phase": "end", "k": k, "ok": True})
        progress.say(f"  id{i}: RSS(1) 300 MiB")
        progress(i, 2, f"key{i}", {"phase": "done"})
    progress.close()
    return out.getvalue()


def test_piped_lines_per_k_with_eta_and_no_escape_codes():
    lines = _run(live=False).splitlines()
    measured = [line for line in lines if "measured" in line]
    assert measured[0] == "  profile 1/2 K = 1 measured (elapsed 0:20, ETA 1:00)"
    assert measured[-1] == "  profile 2/2 K = 2 measured (elapsed 1:40, ETA 0:00)"
    assert len(measured) == 4 and lines[0] == "profile 1/2: key1 K = 1, 2 ..."
    assert "\x1b" not in "\n".join(lines) and "\r" not in "\n".join(lines)


def test_terminal_line_is_redrawn_in_place_and_erased_before_other_lines():
    text = _run(live=True)
    assert "measured" not in text  # no line per K: the one line says it
    assert "\r\x1b[Kprofile 1/2: key1 K = 2 (2 of 2): elapsed 0:50, ETA" in text
    # the command's own lines start on a clean line, never after the live one
    assert "\r\x1b[K  id1: RSS(1) 300 MiB\n" in text
    assert text.endswith("\r\x1b[K") or text.endswith("MiB\n")
