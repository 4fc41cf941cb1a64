"""``fugue-tui report`` as a subprocess on the harness's own files and on ours; bad input
exits 2 with one line. Nothing trains here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from engine.results.columns import GROUP_COLUMNS
from engine.results.store import append_rows
from fugue_tui.report.tables import print_report

REPO = Path(__file__).resolve().parents[4]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


def report(*args: str, columns: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "fugue_tui", "report", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fugue-tui: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for needle in needles:
        assert needle in lines[0]


def test_report_on_the_harness_files(tmp_path):
    runs = tmp_path / "harness"
    shutil.copytree(HARNESS, runs)
    proc = report(str(runs))  # not a terminal: 80 columns, no colour
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for exp_id, speedup in (("D_ens", "1.464"), ("D_cv", "1.236"), ("D_hpo", "1.113")):
        assert re.search(rf"{exp_id}\s+│\s+unified_model\s+│\s+off\s+│\s+2\s+│.*{speedup}\s+│"
                         rf"\s+n/a\s+│\s+seq\s+│", out), out
        assert re.search(rf"{exp_id}\s+│\s+seq\s+│\s+off\s+│\s+2\s+│.*1\.000\s+│", out), out
    assert "AMD EPYC (2 cores)" in out and "no GPU" in out
    assert "OUTSIDE" in out  # D_ens unified_model: mean val acc below every seq job's
    assert "speedup over seq" in out and "\x1b[" not in out  # the chart, colourless
    assert max(len(line) for line in out.splitlines()) <= 80
    assert proc.stderr == ""


def test_report_takes_runs_dir_after_the_subcommand_too(tmp_path):
    """`fugue-tui report --runs-dir X` (as users write it) was 'unrecognized arguments'."""
    proc = report("--runs-dir", str(HARNESS), "--width", "200")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"D_ens\s+│\s+unified_model", proc.stdout)
    assert_one_line_error(report("--runs-dir", str(tmp_path / "nope")), "nope", "does not exist")


def test_report_wide_layout_is_one_table(tmp_path):
    proc = report(str(HARNESS), "--width", "200")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"D_ens\s+│\s+unified_model\s+│\s+off\s+│\s+2\s+│\s+1\.33\s+│"
                     r"\s+1\.464\s+│\s+n/a\s+│\s+seq\s+│\s+vf:1,s:1,fl:1\s+│\s+0\.08\s+│"
                     r"\s+8,675\s+│\s+0\.553\s+│\s+0\.613 \[0\.559, 0\.674\]\s+│\s+OUTSIDE \(acc\)\s+│",
                     proc.stdout), proc.stdout
    assert "(1/" not in proc.stdout  # one table
    assert "[min, max]" in proc.stdout  # headers are text, not Rich markup


def test_empty_folder_exits_2_with_one_line(tmp_path):
    assert_one_line_error(report(str(tmp_path)), str(tmp_path), "no master_groups.csv")
    assert_one_line_error(report(str(tmp_path / "missing")), "does not exist")


def test_unknown_campaign_exits_2_with_one_line(tmp_path):
    rows = [{"group_id": "seq_00000001", "exp_id": "E01", "executor": "seq", "K": 2,
             "T_group": 2.0, "status": "ok", "campaign_id": "nightly", "cell_key": "k1",
             "compile_mode": "off", "host": "h"}]
    append_rows(tmp_path / "master_groups.csv", rows, GROUP_COLUMNS)
    assert_one_line_error(report(str(tmp_path), "--campaign", "nightli"), "nightli",
                          "did you mean 'nightly'")


def test_campaign_filter_and_failed_cells(tmp_path):
    def row(n, executor, t, campaign, status="ok"):
        return {"group_id": f"{executor}_{n:08x}", "exp_id": "E05", "executor": executor,
                "K": 5, "T_group": t, "status": status, "campaign_id": campaign,
                "cell_key": f"k{n}", "compile_mode": "off", "host": "box", "torch_version": "2.5.1",
                "energy_method": "none", "error": "" if status == "ok" else "boom"}
    rows = ([row(i, "seq", 4.0, "a") for i in range(5)]
            + [row(10 + i, "mp", 2.0 + 0.01 * i, "a") for i in range(5)]
            + [row(20, "ray", 1.0, "a", status="failed")]
            + [row(30, "mp", 100.0, "b")])
    append_rows(tmp_path / "master_groups.csv", rows, GROUP_COLUMNS)
    console = Console(width=100, record=True, color_system=None)
    cells = print_report(tmp_path, console, campaign_id="a")
    text = console.export_text()
    assert cells == 2  # seq and mp; ray has no ok row
    mp = re.search(r"E05\s+│\s+mp\s+│\s+off\s+│\s+5\s+│\s+2\.02\s+│\s+1\.980\s+│\s+\[(\S+), (\S+)\]",
                   text)
    assert mp, text
    assert float(mp.group(1)) <= 1.980 <= float(mp.group(2))
    # the failed cell is still listed, with nothing measured and its failure counted
    assert re.search(r"E05\s+│\s+ray\s+│\s+off\s+│\s+0\s+│\s+—\s+│\s+—\s+│\s+—\s+│\s+—\s+│",
                     text), text
    assert re.search(r"E05\s+│\s+ray\s+│\s+off\s+│\s+0\s+│.*│\s+1\s+│$", text, re.M), text
    assert "campaign a:" in text and "100.00" not in text and "nan" not in text


def test_report_exports_figures_and_a_booktabs_table(tmp_path):
    from fugue_tui.report.tables import run_report

    out = tmp_path / "figs"
    assert run_report(HARNESS, width=100, export_dir=out, formats="svg,tex") == 0
    names = sorted(p.name for p in out.iterdir())
    # every figure with a measured value: SVG; energy and memory (nothing measured in the
    # harness's CPU files) and the ladder (no rungs) are not written as empty charts
    assert names == ["manifest.json", "parity.svg", "results.tex", "speedup.svg",
                     "throughput.svg", "wall_clock.svg"]
    tex = (out / "results.tex").read_text()
    assert tex.count(r"\toprule") == 1 and r"\bottomrule" in tex
    assert r"D\_ens & unified\_model & vf:1,s:1,fl:1 & 2 & 1.33 $\pm$ 0.08 & 1.464 & -- &" in tex
    again = tmp_path / "again"
    run_report(HARNESS, width=100, export_dir=again, formats="svg")
    assert (again / "speedup.svg").read_bytes() == (out / "speedup.svg").read_bytes()


def test_report_export_format_errors_are_one_line(tmp_path):
    proc = report(str(HARNESS), "--export", str(tmp_path / "x"), "--format", "gif")
    assert_one_line_error(proc, "--format gif", "png, svg, tex")
    assert not (tmp_path / "x").exists()


def test_report_export_skips_figures_with_nothing_measured_and_says_why(tmp_path):
    """A CPU run measures no energy: no energy.png that only says "missing"; the output
    names each figure left out and why."""
    out = tmp_path / "figs"
    proc = report(str(HARNESS), "--export", str(out), "--format", "png,svg")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "energy.png").exists() and not (out / "energy.svg").exists()
    assert (out / "speedup.png").is_file() and (out / "wall_clock.svg").is_file()
    lines = proc.stdout.splitlines()
    energy = [line for line in lines if line.startswith("skipped energy.png, energy.svg: ")]
    assert len(energy) == 1 and "no cell measured energy" in energy[0], proc.stdout
    assert any(line.startswith("skipped memory.png, memory.svg: ") for line in lines)
    assert any(line.startswith("skipped ladder.png, ladder.svg: no ablation-ladder rows")
               for line in lines)
    assert not any(line.startswith(("skipped speedup", "skipped parity")) for line in lines)
    # only the LaTeX table asked for: no figure to skip, nothing said about figures
    tex = report(str(HARNESS), "--export", str(tmp_path / "tex"), "--format", "tex")
    assert tex.returncode == 0 and "skipped" not in tex.stdout
