"""bench.results: rendering RESULTS.md from a tiny synthetic CSV, --check, and the
"not resolvable here" rule. No timing here: the values are made up."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import results as br
from engine.results.read import read_rows

PROV = {"timestamp": "20250101_120000", "host": "testhost", "cpu_model": "Test CPU",
        "cpu_cores": 2, "python_version": "3.11.0", "torch_version": "2.0.0",
        "fugue_tui_version": "0.1.0", "fugue_tui_commit": "abc123", "command": "python -m x"}

THROUGHPUT = br.Figure("train_throughput", "samples/s", baseline="bare", target=">=0.9",
                       note="training steps only")


def _write(results_dir: Path, part: str, figure: br.Figure, values, run_id="run1",
           prov=PROV) -> Path:
    return br.append(part, br.figure_rows(part, figure, values, run_id, prov), results_dir)


def _row(text: str, figure: str, variant: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] == figure and cells[1].startswith(variant):
            return cells
    raise AssertionError(f"no table row for {figure}/{variant} in:\n{text}")


def test_rows_carry_every_column_and_provenance(tmp_path):
    path = _write(tmp_path, "demo", THROUGHPUT, {"bare": [100.0, 110.0], "seq": [95.0, 99.0]})
    rows = read_rows(path)
    assert path == tmp_path / "demo.csv"
    assert list(rows[0]) == list(br.COLUMNS)
    assert [(r["variant"], r["repetition"], r["value"]) for r in rows] == [
        ("bare", "1", "100.0"), ("bare", "2", "110.0"), ("seq", "1", "95.0"), ("seq", "2", "99.0")]
    assert all(r["host"] == "testhost" and r["fugue_tui_commit"] == "abc123"
               and r["command"] == "python -m x" and r["part"] == "demo" for r in rows)


def test_render_gives_expected_table(tmp_path):
    # bare 100..104 (median 102), seq 95..99 (median 97): per-repetition ratios 0.95..0.952
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 101, 102, 103, 104], "seq": [95, 96, 97, 98, 99]})
    text = br.render(tmp_path)
    assert text.startswith(br.HEADER)
    assert "## demo" in text
    assert "Test CPU (2 cores)" in text and "`abc123`" in text and "`python -m x`" in text
    header = ("| figure | variant | unit | n | median | IQR | min–max | ratio to baseline "
              "(of medians) | per-repetition ratios: IQR | min–max | target | verdict |")
    assert header in text
    assert _row(text, "train_throughput", "bare") == [
        "train_throughput", "bare (baseline)", "samples/s", "5", "102", "101–103", "100–104",
        "—", "—", "—", "—", "—"]
    assert _row(text, "train_throughput", "seq") == [
        "train_throughput", "seq", "samples/s", "5", "97", "96–98", "95–99",
        "0.951", "0.950–0.951 (n=5)", "0.950–0.952", ">=0.9", "met"]
    assert "- **train_throughput**: training steps only" in text
    # Rendering is a pure function of the CSV.
    assert br.render(tmp_path) == text


def test_target_not_met_when_every_repetition_misses(tmp_path):
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 100, 100, 100, 100], "seq": [80, 81, 82, 83, 84]})
    cells = _row(br.render(tmp_path), "train_throughput", "seq")
    assert cells[7] == "0.820" and cells[-1] == "not met"


def test_not_resolvable_when_spread_straddles_target(tmp_path):
    # per-repetition ratios 0.80, 0.85, 0.92, 0.97, 1.0: the IQR (0.85–0.97) holds 0.9
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 100, 100, 100, 100], "seq": [80, 85, 92, 97, 100]})
    cells = _row(br.render(tmp_path), "train_throughput", "seq")
    assert cells[8] == "0.850–0.970 (n=5)"
    assert cells[-1] == br.NOT_RESOLVABLE


def test_not_resolvable_when_spread_wider_than_claimed_difference(tmp_path):
    # No target: the ratio claims 1.04 vs 1, but the per-repetition IQR (1.02–1.10) is wider.
    wall = br.Figure("group_wall", "s", baseline="bare")
    _write(tmp_path, "demo", wall, {"bare": [10, 10, 10, 10, 10], "seq": [13, 10.2, 9.3, 10.4, 11]})
    cells = _row(br.render(tmp_path), "group_wall", "seq")
    assert cells[-1] == br.NOT_RESOLVABLE
    # A clear difference with a narrow spread is resolvable (no target: no met/not met).
    _write(tmp_path / "b", "demo", wall,
           {"bare": [10, 10, 10, 10, 10], "seq": [15, 15.1, 15.2, 15.1, 15]})
    assert _row(br.render(tmp_path / "b"), "group_wall", "seq")[-1] == "—"


@pytest.mark.parametrize("ratios,expected", [
    ([0.95, 0.96, 0.97], "met"),
    ([0.5, 0.6, 0.7], "not met"),
    ([0.85, 0.9, 0.95], br.NOT_RESOLVABLE),
    ([0.95], br.NOT_RESOLVABLE),         # one repetition: no spread to judge
    ([], br.NOT_RESOLVABLE),
])
def test_judge_ratio(ratios, expected):
    ratio = sorted(ratios)[len(ratios) // 2] if ratios else 1.0
    assert br.judge_ratio(ratio, ratios, ">=0.9").verdict == expected


def test_parse_target():
    assert br.parse_target(">= 0.9") == (">=", 0.9)
    assert br.parse_target("<1.1") == ("<", 1.1)
    assert br.parse_target("") is None
    with pytest.raises(ValueError):
        br.parse_target("about 0.9")


def test_latest_run_only(tmp_path):
    _write(tmp_path, "demo", THROUGHPUT, {"bare": [1, 1, 1, 1, 1], "seq": [5, 5, 5, 5, 5]},
           run_id="old")
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 101, 102, 103, 104], "seq": [95, 96, 97, 98, 99]}, run_id="new")
    text = br.render(tmp_path)
    assert "run `new`" in text and "1 earlier run in the CSV" in text
    assert _row(text, "train_throughput", "seq")[4] == "97"


def test_check_detects_mismatch(tmp_path, capsys):
    results_dir, md = tmp_path / "results", tmp_path / "RESULTS.md"
    _write(results_dir, "demo", THROUGHPUT,
           {"bare": [100, 101, 102, 103, 104], "seq": [95, 96, 97, 98, 99]})
    assert br.main(["--check", "--results-dir", str(results_dir), "--out", str(md)]) == 1  # missing
    assert br.main(["--results-dir", str(results_dir), "--out", str(md)]) == 0
    assert br.check(results_dir, md)
    assert br.main(["--check", "--results-dir", str(results_dir), "--out", str(md)]) == 0
    # A hand edit of the Markdown is caught...
    md.write_text(md.read_text().replace("| 97 |", "| 98 |"))
    assert not br.check(results_dir, md)
    assert br.main(["--check", "--results-dir", str(results_dir), "--out", str(md)]) == 1
    # ...and so is a CSV that changed after rendering.
    assert br.main(["--results-dir", str(results_dir), "--out", str(md)]) == 0
    _write(results_dir, "demo", THROUGHPUT, {"bare": [1, 1, 1, 1, 1], "seq": [1, 1, 1, 1, 1]},
           run_id="run2")
    assert br.main(["--check", "--results-dir", str(results_dir), "--out", str(md)]) == 1
    assert "differs" in capsys.readouterr().err


def test_empty_results_dir(tmp_path):
    assert br.render(tmp_path / "nothing").endswith("No results yet.\n")


def test_committed_results_md_matches_csv():
    """The committed RESULTS.md is what the committed CSV files give."""
    if not any(br.RESULTS_DIR.glob("*.csv")):
        pytest.skip("no benchmark results committed yet")
    assert br.check(), "bench/RESULTS.md is stale: run `python -m bench.results`"


def test_targets_summary_lists_every_target_of_the_latest_runs(tmp_path):
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 100, 100, 100, 100], "seq": [80, 81, 82, 83, 84]}, run_id="old")
    _write(tmp_path, "demo", THROUGHPUT,
           {"bare": [100, 101, 102, 103, 104], "seq": [95, 96, 97, 98, 99]}, run_id="new")
    _write(tmp_path, "other", br.Figure("fixed", "s", target="<=3"), {"seq": [4.0, 4.2, 4.4]})
    _write(tmp_path, "other", br.Figure("untargeted", "s"), {"x": [1.0, 2.0]})
    _write(tmp_path, "other", br.Figure("load_1min", "load"), {"machine": [1.0, 2.0, 3.0]})
    text = br.render(tmp_path)
    summary = text[text.index("## Targets"):text.index("## demo")]
    lines = [line for line in summary.splitlines() if line.startswith("| demo")
             or line.startswith("| other")]
    assert lines == [
        "| demo | train_throughput | seq | ratio 0.951 | >=0.9 | met | `new` 20250101 | — |",
        "| other | fixed | seq | 4.2 s | <=3 | not met (median 1.40× the bound) | `run1` 20250101 "
        "| 2 |"]
    empty = tmp_path / "none"
    _write(empty, "plain", br.Figure("untargeted", "s"), {"x": [1.0, 2.0]})
    assert "## Targets" not in br.render(empty)


def test_a_target_on_some_variants_of_a_figure_is_theirs(tmp_path):
    """One figure may bound some of its variants and not others (``bench.peers`` bounds
    the peers' stacked times against ours): each variant is judged against its own rows'
    target, not the baseline's (which has none), and a variant without one is not."""
    time_fig = br.Figure("time", "s", baseline="ours")
    rows = br.figure_rows("demo", time_fig, {"ours": [1.0, 1.0, 1.0, 1.0, 1.0]}, "run1", PROV)
    rows += br.figure_rows("demo", br.Figure("time", "s", "ours", ">1"),
                           {"peer": [1.2, 1.1, 1.15, 1.3, 1.12]}, "run1", PROV)
    rows += br.figure_rows("demo", time_fig, {"other": [0.9, 1.1, 1.0, 1.05, 0.95]}, "run1",
                           PROV)
    br.append("demo", rows, tmp_path)
    text = br.render(tmp_path)
    peer, other = _row(text, "time", "peer"), _row(text, "time", "other")
    assert peer[10:] == [">1", br.AHEAD]
    assert other[10] == "—" and other[11] == br.NOT_RESOLVABLE
    assert f"| demo | time | peer | ratio 1.150 | >1 | {br.AHEAD} |" in text


@pytest.mark.parametrize("ratios,expected", [
    ([1.10, 1.12, 1.15, 1.2, 1.3], br.AHEAD),
    ([0.84, 0.95, 0.976, 1.05, 1.12], br.TIED),    # issue 42's K = 64 on an AMD EPYC host
    ([0.80, 0.85, 0.9, 0.91, 0.93], br.BEHIND),
    ([1.2], br.NOT_RESOLVABLE),                    # one repetition: no spread to judge
])
def test_a_ratio_target_at_parity_reads_ahead_tied_or_behind(ratios, expected):
    """Against ``>1`` (the baseline ahead: peers' time ÷ ours) the verdict says where the
    baseline stands; an IQR holding 1 is a tie, never a claim either way."""
    ratio = sorted(ratios)[len(ratios) // 2]
    assert br.judge_ratio(ratio, ratios, ">1").verdict == expected
    # any other target keeps met / not met / not resolvable
    assert br.judge_ratio(ratio, ratios, ">=1").verdict in ("met", "not met",
                                                             br.NOT_RESOLVABLE)


def test_each_dispatch_setting_shows_its_latest_run(tmp_path):
    """A part published under the default dispatch and under a setting shows the latest
    run of each, the setting in its machine line; a part never run under a setting keeps
    the plain machine line."""
    _write(tmp_path, "demo", THROUGHPUT, {"bare": [1, 1, 1], "seq": [5, 5, 5]}, run_id="old")
    _write(tmp_path, "demo", THROUGHPUT, {"bare": [10, 10, 10], "seq": [9, 9, 9]},
           run_id="dflt")
    _write(tmp_path, "demo", THROUGHPUT, {"bare": [10, 10, 10], "seq": [8, 8, 8]},
           run_id="cbwr", prov={**PROV, "setting": "MKL_CBWR=COMPATIBLE"})
    text = br.render(tmp_path)
    assert text.count("\n## demo\n") == 1
    default, setting = text.split("### demo under dispatch setting: MKL_CBWR=COMPATIBLE")
    assert "### demo under dispatch setting: default" in default
    assert "run `dflt`" in default and "1 earlier run in the CSV" in default
    assert "(2 cores); Python 3.11.0, torch 2.0.0; kernel dispatch: default" in default
    assert _row(default, "train_throughput", "seq")[4] == "9"
    assert "run `cbwr`" in setting and "kernel dispatch: MKL_CBWR=COMPATIBLE" in setting
    assert _row(setting, "train_throughput", "seq")[4] == "8"
    assert "kernel dispatch" not in br.render_part("demo", read_rows(
        _write(tmp_path / "plain", "demo", THROUGHPUT, {"bare": [1, 1], "seq": [2, 2]})))
