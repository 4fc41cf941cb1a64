"""A cell index means one thing to ``fugue-tui control`` and to the runner (issue 44):
ASCII decimal in one form. ``str.isdigit`` let ``kill ¹`` (a superscript: ``int`` refuses
it) end in a traceback, and ``kill ١`` (an Arabic-Indic digit) and ``kill 01`` reach cell 1.
Now both sides go through :func:`engine.runner.control.resolve_cell`: a number written
another way is only a key prefix (keys are hexadecimal: ``01`` may be one), and when no
key starts with it the refusal names the index's one form."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.errors import ConfigError
from engine.events import EventWriter
from engine.runner.control import check_command, resolve_cell, waiting_cell
from engine.runner.supervisor import Runner

KEYS = ("0a1b2c3d4e5f6a7b", "01ff00aa11bb22cc", "9f8e7d6c5b4a3f2e")
CELLS = [SimpleNamespace(key=key, index=i) for i, key in enumerate(KEYS, 1)]


@pytest.fixture
def run_dir(tmp_path):
    """A campaign of three cells as its runner announced them; cell 3 running."""
    runner = EventWriter(tmp_path / "runner.jsonl", campaign="c")
    runner.emit("campaign_started", cells=3, run_dir=str(tmp_path), device="cpu",
                session="s1")
    for i, key in enumerate(KEYS, 1):
        runner.emit("queued", cell=key, index=i, label=f"D_ens seq p{i}")
    runner.emit("cell_started", cell=KEYS[2], index=3, label="x", attempt=1,
                events=str(tmp_path / "e.jsonl"), pid=123, log_path="x.log")
    runner.close()
    return tmp_path


def _find(ref: str):
    """The runner's resolution (Runner.find, on a runner with the cells :data:`CELLS`)."""
    return Runner.find(SimpleNamespace(cells=CELLS), ref)


@pytest.mark.parametrize("ref, index", [("1", 1), ("3", 3)])
def test_an_index_in_its_one_form(ref, index):
    assert resolve_cell(ref, 3, KEYS) == index
    assert _find(ref) is CELLS[index - 1]


@pytest.mark.parametrize("ref, keys", [
    ("01", [KEYS[1]]),    # not index 1: the key it is a prefix of
    ("0", [KEYS[1], KEYS[0]]),  # index 0 is none; an ambiguous prefix (sorted)
    ("9f8e", [KEYS[2]]),
    ("¹", []), ("١", []), ("+1", []), (" 1", []), ("1 ", []), ("1\n", []), ("０", []),
    ("4", []), ("", []),
])
def test_anything_else_is_a_key_prefix_only(ref, keys):
    assert resolve_cell(ref, 3, KEYS) == keys
    assert _find(ref) is (next(c for c in CELLS if c.key == keys[0]) if len(keys) == 1
                          else None)


REFS = ["1", "2", "3", "4", "0", "01", "001", "0a", "9f", "¹", "١", "+1", "-1", " 1", "1_0",
        "１", "a", "ff", "zz", "1\n"]


@pytest.mark.parametrize("ref", REFS)
def test_the_command_line_accepts_what_the_runner_resolves(run_dir, ref):
    """The same rule on both sides: ``fugue-tui control`` refuses (one ConfigError line,
    no traceback) exactly what the runner would answer "no such cell"."""
    try:
        check_command(run_dir, "kill", ref)
        accepted = True
    except ConfigError as exc:
        accepted = False
        assert "\n" not in str(exc) and repr(ref) in str(exc)
    assert accepted == (_find(ref) is not None)


@pytest.mark.parametrize("ref, form", [("¹", "1"), ("١", "1"), ("+1", "1"), (" 1", "1"),
                                       ("001", "1"), ("1_0", "10")])
def test_a_number_written_otherwise_is_refused_naming_the_one_form(run_dir, ref, form):
    with pytest.raises(ConfigError) as info:
        check_command(run_dir, "kill", ref)
    line = str(info.value)
    assert f"{ref!r} is not an index" in line and f"did you mean {form}?" in line
    assert "an index from 1 to 3" in line


def test_before_any_runner_started_only_what_can_never_name_a_cell_is_refused(tmp_path):
    (tmp_path / "runner.jsonl").write_text("")
    check_command(tmp_path, "kill", "7")    # the runner will say
    check_command(tmp_path, "kill", "0a1")  # a key prefix, maybe
    with pytest.raises(ConfigError, match=r"no cell '¹' .*'¹' is not an index"):
        check_command(tmp_path, "kill", "¹")
    with pytest.raises(ConfigError, match="no cell 'ZZ'"):
        check_command(tmp_path, "skip", "ZZ")


@pytest.mark.parametrize("cell", ["1", "", "k"])
def test_abort_names_no_cell(run_dir, cell):
    with pytest.raises(ConfigError, match=f"control abort takes no cell.*got {cell!r}"):
        check_command(run_dir, "abort", cell)
    check_command(run_dir, "abort")


def test_a_waiting_cell_is_found_by_the_same_rule(run_dir):
    assert waiting_cell(run_dir, "1") == (1, KEYS[0])
    assert waiting_cell(run_dir, "01") == (2, KEYS[1])  # the key prefix, not cell 1
    assert waiting_cell(run_dir, "١") is None
    assert waiting_cell(run_dir, "3") is None  # running
