"""engine.results.light_speedups: the strip's speedups without pandas (issue 47, item 2: the
whole analysis, ~40 ms of pandas at each cell end, was a third of the dashboard's CPU on a
long campaign) — the same numbers as engine.results.analysis.speedups, pinned here on
random campaigns, and None where the campaign is not plain (the caller runs the whole
analysis then)."""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path

import pytest

from engine.results import columns
from engine.results.analysis import speedups
from engine.results.light_speedups import light_speedups
from engine.results.tail import GroupTail

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "dashboard" / "runs" / "master_groups.csv"


def _campaign(path: Path, seed: int, **fixed: str) -> GroupTail:
    """A random campaign ``c`` (executors, K, precision, machines, cores, passes, some
    rows without a T_group) in the group file ``path``, read by a tail."""
    with FIXTURE.open(newline="") as f:
        template = next(r for r in csv.DictReader(f) if r["status"] == "ok")
    header = list(columns.header(columns.GROUPS_FILE))  # today's: cores_used, packed_devices
    rng = random.Random(seed)
    rows = []
    for i in range(rng.randint(1, 90)):  # mostly alike: cells with enough passes for intervals
        rows.append({**template, "campaign_id": "c", "group_id": f"g{i}",
                     "exp_id": rng.choice(["D_ens"] * 3 + ["D_cv"]),
                     "executor": rng.choice(["seq", "seq", "unified_model", "mp"]),
                     "K": rng.choice(["5"] * 7 + ["10"]),
                     "precision": rng.choice(["fp32"] * 7 + ["bf16"]),
                     "host": rng.choice(["a"] * 7 + ["b"]),
                     "scheduler": rng.choice([""] * 7 + ["fifo"]),
                     "T_group": rng.choice([f"{rng.uniform(0.5, 9):.4f}"] * 9 + [""]),
                     "cores_used": rng.choice(["", "0", f"{rng.uniform(0.5, 2):.3f}"]),
                     **fixed})
    out = io.StringIO()
    writer = csv.DictWriter(out, header, restval="", lineterminator="\r\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue())
    tail = GroupTail(path, "c")
    tail.update()
    return tail


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)


def test_the_same_cells_numbers_and_order_as_the_whole_analysis(tmp_path):
    intervals = 0
    for seed in range(12):
        intervals += _compare(tmp_path / f"{seed}.csv", seed)
    assert intervals >= 6, intervals  # the bootstrap was compared too


def _compare(path: Path, seed: int) -> int:
    """Light and whole answers for campaign ``seed`` compared; the intervals compared."""
    tail = _campaign(path, seed)
    plain = tail.plain_rows()
    assert plain is not None
    light = light_speedups(plain, n_boot=200)
    whole = speedups(tail.runs(), n_boot=200).to_dict("records")
    assert light is not None and len(light) == len(whole)
    for ours, theirs in zip(light, whole, strict=True):
        for column in ("exp_id", "executor", "K", "precision", "scheduler", "machine",
                       "n_strategy", "n_seq"):
            assert ours[column] == theirs[column], (column, ours, theirs)
        # the interval: the analysis's own bootstrap on the same samples, to the bit
        for column in ("ci_low", "ci_high"):
            assert ours[column] == theirs[column] or (
                math.isnan(ours[column]) and math.isnan(theirs[column])), (column, ours)
        for column in ("speedup", "T_group_mean", "cores_used_mean"):
            assert _close(ours[column], theirs[column]), (column, ours, theirs)
    return sum(math.isfinite(c["ci_low"]) for c in light)


@pytest.mark.parametrize("odd", [{"compile_mode": "max-autotune"}, {"scheduler": "asha"},
                                 {"packed_devices": "cuda:0,cuda:1"}, {"status": "failed"}])
def test_a_campaign_that_is_not_plain_is_left_to_the_whole_analysis(tmp_path, odd):
    tail = _campaign(tmp_path / "master_groups.csv", 3, **odd)
    rows = tail.plain_rows()
    assert rows is None or light_speedups(rows) is None


def test_the_strip_reads_the_same_with_and_without_pandas(tmp_path, monkeypatch):
    """The strip's text (two decimals) from the light path and from the whole analysis."""
    from engine.results import light_speedups as light_module
    from fugue_tui.app.models.so_far import SoFar

    texts = []
    for light in (True, False):
        runs = tmp_path / ("light" if light else "whole")
        runs.mkdir()
        _campaign(runs / "master_groups.csv", 7)
        if not light:
            monkeypatch.setattr(light_module, "light_speedups", lambda *a, **k: None)
        texts.append(SoFar(runs, "c").parts(n_boot=200))
    assert texts[0] and texts[0] == texts[1]
