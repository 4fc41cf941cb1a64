"""The runs-folder checks (``engine.results.preflight``: the run's ``preflight``, the dry
run's ``check_runs_path``) on paths the kernel or Python refuse, and one wording for both
(issue 44): a 300-character component or a NUL byte is one line, never a traceback
(``OSError: File name too long``, ``ValueError: embedded null byte``), with nothing made on
the way; a read-only mount is "Read-only file system" in the dry run as in the run."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest

from engine.errors import OutputError
from engine.results.paths import NAME_MAX, path_text_problem, shown_path
from engine.results.preflight import check_runs_path, preflight

LONG = "a" * 300


def _tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("check", [preflight, check_runs_path], ids=["run", "dry-run"])
def test_a_component_too_long_is_one_line_naming_it_and_nothing_is_made(tmp_path, check,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError) as caught:
        check(f"x/{LONG}/runs")
    line = str(caught.value)
    assert "\n" not in line and line.startswith("runs path 'x/aaaa")
    assert "300-byte component" in line and f"the {NAME_MAX} bytes" in line and "2nd" in line
    assert "(300 characters)" in line and len(line) < 300  # shortened, not 300 a's twice
    assert _tree(tmp_path) == []  # not even 'x' (makedirs made it before failing)


@pytest.mark.parametrize("check", [preflight, check_runs_path], ids=["run", "dry-run"])
def test_a_nul_byte_is_one_line_saying_so(tmp_path, check, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=r"^runs path 'r/a\\x00b' has a NUL byte \(char"):
        check("r/a\0b")
    assert _tree(tmp_path) == []


def test_a_relative_path_that_resolves_past_the_longest_path_is_refused(tmp_path,
                                                                       monkeypatch):
    deep = tmp_path
    for _ in range(20):  # 20 x 201 bytes: 4020 + tmp_path, past 4095 once resolved
        deep = deep / ("d" * 200)
    os.makedirs(deep)
    monkeypatch.chdir(deep)
    with pytest.raises(OutputError, match="a path may have"):
        check_runs_path("r" * 200)


def test_the_text_rule():
    assert path_text_problem("runs/a b/é") is None
    assert path_text_problem("a" * NAME_MAX) is None
    assert "256-byte component" in path_text_problem("x/" + "a" * (NAME_MAX + 1))
    assert path_text_problem("a" * 256).startswith("is a 256-byte name, more than the 255")
    # bytes, not characters: 128 two-byte letters are 256 bytes
    assert "256-byte name" in path_text_problem("é" * 128)
    assert "NUL byte (character 3)" in path_text_problem("ab\0")
    assert "a path may have" in path_text_problem("a/" * 2100)
    assert shown_path("x" * 10) == "'xxxxxxxxxx'"
    assert shown_path("a\nb") == "'a\\nb'"  # one line: escaped by the quoting helper
    assert shown_path("y" * 100).endswith("' (100 characters)") and "..." in shown_path("y" * 100)


# --------------------------------------------------------------------- read-only mounts

def _read_only(monkeypatch) -> None:
    """What a read-only mount does to every way of writing there: EROFS (and os.access
    says no without a reason, as it does there)."""
    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    monkeypatch.setattr(os, "mkdir", erofs)
    monkeypatch.setattr(tempfile, "mkdtemp", erofs)
    real_open = os.open

    def open_(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            erofs()
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)


@pytest.mark.parametrize("sub", ["", "runs"], ids=["existing-folder", "folder-to-make"])
def test_the_dry_run_gives_the_runs_reason_for_a_read_only_mount(tmp_path, monkeypatch, sub):
    """The dry run said "Permission denied" (os.access, then EACCES made up) where the
    run said "Read-only file system": both now quote the kernel's refusal of the same kind
    of write. (A real read-only mount: tests/unit/fugue_tui/cli/test_path_inputs.py, where
    this host lets a test mount one.)"""
    folder = tmp_path / sub if sub else tmp_path
    _read_only(monkeypatch)
    with pytest.raises(OutputError) as dry:
        check_runs_path(folder)
    with pytest.raises(OutputError) as run:
        preflight(folder)
    assert "Read-only file system" in str(dry.value), str(dry.value)
    assert str(dry.value) == str(run.value)
