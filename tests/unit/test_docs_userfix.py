"""What the docs and the help say matches what runs (fresh-user findings 7 and 13): the main
job's duration in the README and in campaigns/quick.toml, the README's cell folder example
(slug and key digits, as engine.runfolder names it), ``profile --help``'s stack sizes (the
default ``--ks``), and ``report --width 160`` drawing the knee tables in their wide shape."""

from __future__ import annotations

import re
from pathlib import Path

from engine.profile.collect import DEFAULT_KS
from engine.runfolder import RunFolder
from tests.unit.engine.results.test_knee import _sweep
from tests.unit.fugue_tui.test_json_outputs import fugue

ROOT = Path(__file__).resolve().parents[2]


def _minutes(text: str) -> set[str]:
    return set(re.findall(r"about (\d+) minutes", re.sub(r"\s*#\s*|\s+", " ", text)))


def test_readme_and_quick_campaign_agree_on_the_main_jobs_duration():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## What the main job does"):]
    section = section[:section.index("\n## ", 5)]
    quick = (ROOT / "campaigns" / "quick.toml").read_text()
    assert _minutes(section) == _minutes(quick) == {"4"}
    for measured in ("3 min 42 s", "8 min 39 s"):
        assert measured in re.sub(r"\s*#\s*|\s+", " ", quick) and measured in section.replace(
            "\n", " ")


def test_readme_cell_folder_example_is_named_as_the_runner_names_folders(tmp_path):
    readme = (ROOT / "README.md").read_text().replace("\n", " ")
    (example,) = re.findall(r"`runs/<name>/cells/(\d{3}-[^`/]+)`", readme)
    slug, digits = example.rsplit("-", 1)
    made = RunFolder(tmp_path).cell_dir(slug, digits + "0" * 8)
    assert made.name == example and re.fullmatch(r"[0-9a-f]{8}", digits)


def test_profile_help_names_the_default_stack_sizes():
    ks = ", ".join(map(str, DEFAULT_KS))
    listed = " ".join(fugue("--help").stdout.split())  # the sub-command list
    assert f"peak RSS of {ks} stacked jobs" in listed and "1, 2, 4 stacked" not in listed
    own = " ".join(fugue("profile", "--help").stdout.split())
    assert f"K = {ks} stacked members" in own


def test_wide_report_draws_the_knee_tables_wide(tmp_path):
    _sweep(tmp_path, seq={1: 100, 2: 101, 4: 100}, unified_model={1: 100, 2: 190, 4: 350})
    wide = fugue("report", str(tmp_path), "--width", "160").stdout
    assert "┃ gain / doubling ┃" in wide and "T_group s ┃" in wide
    narrow = fugue("report", str(tmp_path), "--width", "80").stdout
    assert "gain / doubling" not in narrow and "doubling" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 80


def test_every_shipped_campaign_loads_and_the_stream_one_is_a_stream():
    """campaigns/ are copied by users as they are: each loads as the runner loads it (a
    stale key would be one line, exit 2, at a user's first try); stream.toml, which the
    README's streams section offers, serves a stream under the four strategies."""
    from engine.define.campaign import load_campaign

    loaded = {p.name: load_campaign(p) for p in sorted((ROOT / "campaigns").glob("*.toml"))}
    assert {"quick.toml", "stream.toml"} <= set(loaded)
    stream = loaded["stream.toml"]
    assert stream.arrivals is not None and stream.arrivals.count == 16
    assert set(stream.executors) == {"seq", "mp", "ray", "unified_model"}
    assert "campaigns/stream.toml" in (ROOT / "README.md").read_text()
