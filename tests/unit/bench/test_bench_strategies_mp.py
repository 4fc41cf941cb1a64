"""bench.strategies reports both mp starts side by side (issue 20): the campaign sweeps
``[options.mp] start``, each group row is its own variant (``mp:forkserver``,
``mp:spawn``), and the figures give the median ``worker_start_s`` per pass (against the
1 s bound for the pre-warmed start), mp's ``setup_s`` and the machine's load."""

from __future__ import annotations

from bench import strategies


def _group(key: str, exp: str, executor: str, p: int, t: float, start: str = "",
           setup: float = 0.0, load: float = 0.5) -> dict:
    return {"campaign_id": "strategies", "cell_key": key, "exp_id": exp, "executor": executor,
            "pass": str(p), "T_group": str(t), "mp_start": start, "setup_s": str(setup),
            "host_load_start": str(load), "host_load_end": str(load + 0.1)}


def test_mp_figures_pair_the_two_starts_per_pass():
    rows, jobs = [], []
    for p in (1, 2):
        rows.append(_group(f"s{p}", "D_ens", "seq", p, 1.0, load=p))
        rows.append(_group(f"f{p}", "D_ens", "mp", p, 1.5, "forkserver", setup=2.0))
        rows.append(_group(f"x{p}", "D_ens", "mp", p, 9.0, "spawn"))
        jobs += [{"cell_key": f"f{p}", "worker_start_s": str(v)} for v in (0.04, 0.06, 0.5)]
        jobs += [{"cell_key": f"x{p}", "worker_start_s": str(v)} for v in (4.0, 5.0, 6.0)]
        jobs.append({"cell_key": f"s{p}", "worker_start_s": ""})  # seq: no worker
    assert sorted({strategies._variant(r) for r in rows}) == ["mp:forkserver", "mp:spawn",
                                                              "seq"]
    figures = strategies._mp_figures(rows, jobs, "r1", {})
    by = {}
    for row in figures:
        by.setdefault(row["figure"], {}).setdefault(row["variant"], []).append(row)
    start = by["worker_start_s"]
    assert [r["value"] for r in start["mp:forkserver"]] == [0.06, 0.06]
    assert [r["value"] for r in start["mp:spawn"]] == [5.0, 5.0]
    assert {r["baseline"] for rs in start.values() for r in rs} == {"mp:spawn"}
    bound, = by["worker_start_s:forkserver"].values()
    assert {r["target"] for r in bound} == {strategies.WORKER_START_TARGET}
    assert [r["value"] for r in by["setup_s:mp"]["mp:forkserver"]] == [2.0, 2.0]
    assert strategies._load_by_pass(rows) == {1: 1.1, 2: 2.1}
    assert strategies._by_pass(rows, "D_ens", "mp:spawn", "strategies", "T_group") == {
        1: 9.0, 2: 9.0}
