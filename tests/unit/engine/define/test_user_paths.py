"""User text that becomes a path (``engine.define.paths``): a leading ``~`` is expanded
once, where the text is read, and the pre-flight check, the dry run, the runner and
``fugue-tui run`` all use that one path; names (campaign names, experiment ids) are single
safe path components, the campaign name none of the runs folder's own entries; and
``report --export`` replaces an earlier export's files only when asked. The bad inputs
themselves are rows of tests/unit/fugue_tui/cli/test_bad_input_paths.py."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fugue_tui.console.batch
from engine.define.campaign import load_campaign
from engine.errors import ConfigError, FugueError
from engine.results.preflight import preflight
from engine.runfolder import RunFolder
from engine.runner.supervisor import Runner
from tests.unit.fugue_tui.cli.test_bad_input_matrix import _env

REPO = Path(__file__).resolve().parents[4]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder of its own, the working folder beside it (``~`` must not appear there)."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    return home


# --------------------------------------------------------------------------- "~", once

def test_user_path_expands_a_leading_tilde_and_nothing_else(home):
    from engine.define.paths import user_path

    assert user_path("~", "x") == home
    assert user_path("~/runs", "x") == home / "runs"
    assert user_path("./~/runs", "x") == Path("./~/runs")  # the way to a folder named "~"
    assert user_path("runs/~x", "x") == Path("runs/~x")
    assert user_path("$HOME/runs", "x") == Path("$HOME/runs")  # variables are the shell's
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match=r"^where is empty: give a folder"):
            user_path(empty, "where")


def test_the_campaign_expands_runs_dir_once_and_every_user_gets_that_path(home, tmp_path):
    from engine.results.preflight import check_runs_path

    Path("c.toml").write_text('name = "t"\nexperiments = "D_ens"\nruns_dir = "~/x"\n')
    campaign = load_campaign("c.toml")
    assert campaign.runs_dir == home / "x"
    assert campaign.resolved()["runs_dir"] == str(home / "x")  # the provenance says where
    runner = Runner(campaign)
    assert runner.runs_dir == home / "x" and runner.folder == RunFolder(home / "x" / "t")
    assert check_runs_path(campaign.runs_dir) == home / "x"  # the dry run: writes nothing
    assert not (home / "x").exists()
    assert preflight(campaign.runs_dir) == home / "x" and (home / "x").is_dir()
    # a command-line value takes the same road, and so does an experiments file's path
    assert load_campaign("c.toml", {"runs_dir": "~/y"}).runs_dir == home / "y"
    (home / "mine.toml").write_text('[experiments.D_ens]\nepochs = 1\n')
    Path("c.toml").write_text('experiments = "D_ens"\nexperiments_file = "~/mine.toml"\n')
    assert load_campaign("c.toml").catalogue.sources[-1] == home / "mine.toml"
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["c.toml"]  # no literal ./~/x


def test_the_dry_run_checks_the_folder_the_runner_would_write(home, tmp_path):
    """``runs_dir = "~/x"`` with ``~/x`` a regular file: the dry run refuses as the real run
    does, naming the expanded path (before, it listed the cells and exited 0)."""
    (home / "x").write_text("a regular file\n")
    cwd = Path.cwd()
    (cwd / "c.toml").write_text('experiments = "D_ens"\nruns_dir = "~/x"\n')
    env = {**_env(cwd, tmp_path, {}), "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "c.toml", "--dry-run"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"fugue-tui: error: runs path '{home / 'x'}' is not a directory\n"
    assert sorted(p.name for p in cwd.iterdir()) == ["c.toml"]


def test_fugue_tui_run_writes_its_campaign_under_the_expanded_folder(home, monkeypatch):
    started: list[Path] = []
    monkeypatch.setattr(fugue_tui.console.batch, "run_batch",
                        lambda path, overrides, **kw: started.append(Path(path)) or 0)
    from fugue_tui.cli import build_parser
    from fugue_tui.commands.run import run

    assert run(build_parser().parse_args(["run", "--exp", "D_ens", "--runs-dir", "~/x"])) == 0
    (campaign_file,) = started
    assert campaign_file.parent == home / "x" / ".adhoc"
    assert tomllib.loads(campaign_file.read_text())["runs_dir"] == str(home / "x")
    assert not Path("~").exists()
    # nothing to expand: the text as typed, so the generated name (a hash of it) is the
    # one earlier versions gave, and --resume finds the folder
    run(build_parser().parse_args(["run", "--exp", "D_ens", "--runs-dir", "./r/"]))
    assert tomllib.loads(started[-1].read_text())["runs_dir"] == "./r/"


# --------------------------------------------------------------------------- names

def test_the_name_rule():
    from engine.define.paths import NAME_RULE, is_safe_name

    for good in ("quick", "e2e-unified", "run-D_ens-3f2a9c1b", "A.b_c-9", "x" * 128):
        assert is_safe_name(good), good
    for bad in ("", ".", "..", ".x", "-x", "_x", "a/b", "a\\b", "a b", "x" * 129, "caf\u00e9",
                "a\n", "~x", None, 3):
        assert not is_safe_name(bad), bad
    assert "1 to 128" in NAME_RULE and "starting with a letter or digit" in NAME_RULE


def test_the_reserved_names_are_what_the_runs_folder_holds(tmp_path):
    """Every entry the code writes beside the run folders is reserved: the results files
    (and their companions) and the monitor's samples folder."""
    from engine.cell.sidecar import CellMonitor
    from engine.results.columns import RESULT_FILES
    from engine.runfolder import RESERVED_ENTRIES, reserved_entry

    monitor = CellMonitor(tmp_path, "g1", tmp_path / "e.jsonl", "c", 1, None)
    samples = monitor.samples_path.relative_to(tmp_path).parts[0]
    for entry in (samples, *RESULT_FILES):
        assert entry in RESERVED_ENTRIES and reserved_entry(entry) == entry
        assert reserved_entry(entry.upper()) == entry
    for companion in ("master_groups.csv.lock", "master_individual.csv.bak-20250101-000000"):
        assert reserved_entry(companion) is not None
    for free in ("quick", "samples2", "master_groups", "sample"):
        assert reserved_entry(free) is None


def test_every_shipped_and_fixture_campaign_name_still_loads():
    from engine.define.paths import is_safe_name
    from engine.runfolder import reserved_entry

    names = []
    for path in [*REPO.glob("campaigns/*.toml"), *REPO.glob("tests/fixtures/**/campaign.toml")]:
        doc = tomllib.loads(path.read_text())
        names.append(doc.get("name", path.stem))
        assert is_safe_name(names[-1]) and reserved_entry(names[-1]) is None, path
    assert "quick" in names
    assert load_campaign(REPO / "campaigns" / "quick.toml").name == "quick"


def test_generated_run_names_follow_the_rule_even_with_the_longest_digest(tmp_path):
    """``fugue-tui run`` names its campaign ``run-<selection>-<digest>``; when other text
    sits under the short names, more digits are used, and the longest is still a name."""
    from engine.define.paths import is_safe_name
    from engine.runfolder import reserved_entry
    from fugue_tui.commands.run_campaign import _texts, campaign_name

    selection = ["E" + "x" * 59]  # a 60-character selection: the longest kept whole
    doc = {"experiments": selection, "executors": ["seq"]}
    seen = []
    for _ in range(3):
        name, named = campaign_name(selection, doc, None, tmp_path)
        seen.append(name)
        for file in _texts(name, named, None):
            (tmp_path / file).write_text("someone else's campaign\n")
    assert [len(n) for n in seen] == [73, 81, 97]
    assert all(is_safe_name(n) and reserved_entry(n) is None for n in seen)


def test_an_empty_name_is_refused_but_a_missing_one_is_the_file_name(tmp_path):
    (tmp_path / "nightly.toml").write_text('experiments = "D_ens"\n')
    assert load_campaign(tmp_path / "nightly.toml").name == "nightly"
    (tmp_path / "c.toml").write_text('name = ""\nexperiments = "D_ens"\n')
    with pytest.raises(ConfigError, match=r"c\.toml: key 'name' is empty"):
        load_campaign(tmp_path / "c.toml")


# --------------------------------------------------------------------------- report --export

def test_export_replaces_an_earlier_export_only_when_asked(tmp_path):
    from fugue_tui.report.tables import run_report

    out = tmp_path / "figs"
    assert run_report(HARNESS, width=100, export_dir=out, formats="svg,tex") == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    # an earlier export's figure that this data cannot draw (energy: a CPU run), and a
    # results.tex that is a link to a file of the user's
    (out / "energy.svg").write_text("<svg>old</svg>")
    mine = tmp_path / "mine.tex"
    mine.write_text("my own table\n")
    (out / "results.tex").unlink()
    (out / "results.tex").symlink_to(mine)
    with pytest.raises(FugueError, match=r"^--export '.*figs' already holds speedup\.svg, "
                       r"wall_clock\.svg, .* and \d+ more .*--overwrite to replace them$"):
        run_report(HARNESS, width=100, export_dir=out, formats="svg,tex")
    assert (out / "energy.svg").read_text() == "<svg>old</svg>"

    assert run_report(HARNESS, width=100, export_dir=out, formats="svg,tex",
                      overwrite=True) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # stale energy.svg gone
    assert mine.read_text() == "my own table\n"  # the link was replaced, not written through
    assert not (out / "results.tex").is_symlink()
    with pytest.raises(FugueError, match="--overwrite only applies with --export"):
        run_report(HARNESS, width=100, overwrite=True)


def test_text_no_path_can_be_is_refused_where_it_is_read(home):
    """Issue 44: a NUL byte or a 300-character component went through and ended in a
    traceback wherever the path was first used (ValueError, ENAMETOOLONG)."""
    from engine.define.paths import user_path

    with pytest.raises(ConfigError, match=r"^c\.toml: key 'runs_dir': 'a\\x00b' has a NUL byte"):
        user_path("a\0b", "c.toml: key 'runs_dir'")
    with pytest.raises(ConfigError, match=r"^argument --runs-dir: 'x/a+\.\.\.a+' \(302 "
                                          r"characters\) has a 300-byte component.*the 2nd"):
        user_path("x/" + "a" * 300, "argument --runs-dir")
    with pytest.raises(ConfigError, match="expands to .* a path may have"):
        user_path("~/" + "d/" * 2046, "argument --runs-dir")  # short enough until expanded
