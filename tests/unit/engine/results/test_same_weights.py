"""The report's "same weights as seq" count (issue 50, engine.results.same_weights): n of K
jobs whose weights_sha256 equals the same job's under seq, the worst of the cell's groups;
n/a for the baseline itself, rows without digests and hpo cells whose pruning differs."""

from __future__ import annotations

from engine.results.analysis import speedups
from engine.results.load import load_runs
from tests.unit.engine.results.test_analysis import group, job, row_of, write

A, B, C = "a" * 64, "b" * 64, "c" * 64


def _jobs(g, digests):
    return [{**job(g, 0.9, i), "weights_sha256": d} for i, d in enumerate(digests)]


def test_the_count_beside_parity_and_a_perturbed_member_drops_it(tmp_path):
    seq = group(executor="seq", t=2.0, k=2)
    same = group(executor="unified_model", t=1.0, k=2)
    again = group(executor="unified_model", t=1.0, k=2)  # the cell's second pass
    perturbed = group(executor="mp", t=1.0, k=2)
    old = group(executor="ray", t=1.0, k=2)  # rows from before the digest
    jobs = (_jobs(seq, [A, B]) + _jobs(same, [A, B]) + _jobs(again, [A, C])
            + _jobs(perturbed, [A, C]) + _jobs(old, ["", ""]))
    df = speedups(load_runs(write(tmp_path, [seq, same, again, perturbed, old], jobs)))
    assert row_of(df, executor="unified_model")["same_weights"] == "1 of 2"  # worst pass
    assert row_of(df, executor="mp")["same_weights"] == "1 of 2"
    assert row_of(df, executor="ray")["same_weights"] == "n/a"
    assert row_of(df, executor="seq")["same_weights"] == "n/a"  # the baseline itself


def test_all_the_same_and_hpo_without_the_same_decisions(tmp_path):
    seq = group(executor="seq", t=2.0, k=2)
    uni = group(executor="unified_model", t=1.0, k=2)
    pruned = group(executor="mp", t=1.0, k=2, mode="hpo", scheduler="asha")
    jobs = _jobs(seq, [A, B]) + _jobs(uni, [A, B]) + _jobs(pruned, [A, B])
    df = speedups(load_runs(write(tmp_path, [seq, uni, pruned], jobs)))
    assert row_of(df, executor="unified_model")["same_weights"] == "2 of 2"
    # no seq cell under asha made the same decisions: not judged
    assert row_of(df, executor="mp")["same_weights"] == "n/a"


def test_the_report_table_and_json_carry_it(tmp_path):
    from rich.console import Console

    from fugue_tui.jsonout import report_cells
    from fugue_tui.report.tables import print_report

    seq = group(executor="seq", t=2.0, k=2)
    uni = group(executor="unified_model", t=1.0, k=2)
    write(tmp_path, [seq, uni], _jobs(seq, [A, B]) + _jobs(uni, [A, C]))
    console = Console(width=400, record=True, color_system=None)
    print_report(tmp_path, console, chart=False)
    text = console.export_text()
    assert "same weights" in text and "as seq" in text
    row = next(s for s in text.splitlines() if "unified_model" in s and "│" in s)
    assert "1 of 2" in row
    cells = {c["executor"]: c for c in report_cells(load_runs(tmp_path))}
    assert cells["unified_model"]["same_weights"] == "1 of 2"
    assert cells["seq"]["same_weights"] == "n/a"


def test_hpo_under_a_pruning_scheduler_counts_only_with_the_same_decisions():
    """Against seq under the same scheduler: n/a when the trials stopped differ (a trial
    pruned on one side and finished on the other has other weights by design), even where
    the digests happen to agree; counted when the decisions are the same."""
    import pandas as pd

    from engine.results.load import runs_from_frames
    from tests.unit.engine.results.test_hpo_analysis import _group, _jobs

    accs = {"t0": 0.9, "t1": 0.5}

    def with_digests(rows, digests):
        return [{**r, "weights_sha256": d} for r, d in zip(rows, digests, strict=True)]

    groups = [_group("s1", "seq", "", 10.0, 4.0, "sf"), _group("s2", "seq", "asha", 3.0, 2.0, "sa"),
              _group("m1", "mp", "asha", 5.0, 1.0, "ma"),       # stopped t1 after epoch 1
              _group("r1", "ray", "asha", 5.0, 1.0, "ra")]      # stopped t1 after epoch 3
    jobs = (with_digests(_jobs("s1", {}, accs), [A, B])
            + with_digests(_jobs("s2", {"t1": 1}, accs), [A, C])
            + with_digests(_jobs("m1", {"t1": 1}, accs), [A, C])
            + with_digests(_jobs("r1", {"t1": 3}, accs), [A, C]))
    table = speedups(runs_from_frames(pd.DataFrame(groups), pd.DataFrame(jobs)), n_boot=0) \
        .set_index(["executor", "scheduler"])
    assert table.loc[("mp", "asha"), "ttb_baseline"] == "seq asha"
    assert table.loc[("mp", "asha"), "same_weights"] == "2 of 2"
    assert table.loc[("ray", "asha"), "ttb_baseline"] == "seq asha: decisions differ"
    assert table.loc[("ray", "asha"), "same_weights"] == "n/a"
