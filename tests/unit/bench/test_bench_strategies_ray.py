"""bench.strategies reports both Ray Tune modes side by side (issue 20): the campaign sweeps
``[options.ray] reuse_actors``, each hpo group row is its own variant (``ray:reused``,
``ray:fresh``; ray's pools stay ``ray``), and the figures give D_hpo's makespan under
reused actors against seq with issue 20's bound, and ray's setup_s per mode."""

from __future__ import annotations

from bench import strategies


def _group(exp: str, executor: str, p: int, t: float, actors: str = "",
           setup: float = 0.0) -> dict:
    return {"campaign_id": "strategies", "cell_key": f"{exp}{executor}{actors}{p}",
            "exp_id": exp, "executor": executor, "pass": str(p), "T_group": str(t),
            "tune_actors": actors, "mp_start": "", "setup_s": str(setup)}


def test_ray_figures_pair_the_two_tune_modes_per_pass():
    rows = []
    for p in (1, 2):
        rows += [_group("D_hpo", "seq", p, 2.0), _group("D_hpo", "ray", p, 3.0, "reused", 9.0),
                 _group("D_hpo", "ray", p, 30.0, "fresh", 3.0), _group("D_ens", "ray", p, 5.0)]
    assert sorted({strategies._variant(r) for r in rows}) == ["ray", "ray:fresh",
                                                              "ray:reused", "seq"]
    by = {}
    for row in strategies._ray_figures(rows, "r1", {}):
        by.setdefault(row["figure"], {}).setdefault(row["variant"], []).append(row)
    bound = by["T_group:D_hpo:ray_reused"]
    assert [r["value"] for r in bound["ray:reused"]] == [3.0, 3.0]
    assert {r["target"] for rs in bound.values() for r in rs} == {strategies.RAY_REUSED_TARGET}
    assert {r["baseline"] for rs in bound.values() for r in rs} == {"seq"}
    assert [r["value"] for r in by["setup_s:ray_hpo"]["ray:reused"]] == [9.0, 9.0]
    assert [r["value"] for r in by["setup_s:ray_hpo"]["ray:fresh"]] == [3.0, 3.0]
