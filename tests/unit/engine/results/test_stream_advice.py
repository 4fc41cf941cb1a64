"""``report --advise`` for streams (issue 52 item 2, engine.results.stream_advice): the
lowest p95 job completion time per stream, with the batch advisor's distinguishability
rule and wording."""

from __future__ import annotations

import pandas as pd

from engine.results.stream_advice import stream_advice
from engine.results.stream_report import FIGURES


def _row(executor: str, p95: float, sha: str = "s1", load: float = 0.5,
         cores: float = 2.0) -> dict:
    return {"machine": "m", "gpu_name": "", "torch_version": "2", "cuda_version": "",
            "status": "ok", "stream_sha256": sha, "config_key": f"c-{executor}",
            "executor": executor, "compile_mode": "off", "max_parallel": 2.0,
            "stream_jobs": 6.0, "arrival_rate_jps": 2.0, "host_load_start": load,
            "host_load_end": load, "cpu_cores": cores,
            **{name: 1.0 for name in FIGURES}, "offered_load": 0.6, "jct_p95_s": p95}


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_a_clear_winner_is_distinguishable_with_its_interval_and_offered_load():
    rows = ([_row("seq", 4.0 + i / 100) for i in range(5)]
            + [_row("mp", 2.0 + i / 100) for i in range(5)]
            + [_row("ray", 3.0 + i / 100) for i in range(5)])
    (advice,) = stream_advice(_frame(rows))
    assert advice["recommended"]["executor"] == "mp"
    assert advice["runner_up"]["executor"] == "ray"
    fig = advice["recommended"]["jct_p95_s"]
    assert fig["ci_low"] <= fig["mean"] <= fig["ci_high"] < 3.0
    assert advice["distinguishable"] is True and advice["more_passes"] is None
    assert advice["offered_load"] == 0.6 and advice["offered_load_of"] == "seq"
    assert advice["arrival_rate_jps"] == 2.0
    assert "distinguishable with 5 passes" in advice["verdict"]
    assert "offered load 0.6" in advice["text"] and "runner-up: ray" in advice["text"]


def test_a_tie_is_not_distinguishable_and_says_how_many_passes_would_separate():
    spread = [0.0, 0.4, -0.4, 0.2, -0.2]
    rows = ([_row("seq", 2.1 + d) for d in spread] + [_row("mp", 2.0 + d) for d in spread])
    (advice,) = stream_advice(_frame(rows))
    assert advice["recommended"]["executor"] == "mp"
    assert advice["distinguishable"] is False
    assert advice["more_passes"] is not None and advice["more_passes"] > 0
    assert "not distinguishable with 5 passes" in advice["verdict"]
    assert f"about {advice['more_passes']} more" in advice["verdict"]


def test_a_single_pass_has_no_interval_and_says_how_many_more_passes():
    (advice,) = stream_advice(_frame([_row("seq", 4.0), _row("mp", 2.0)]))
    assert advice["recommended"]["executor"] == "mp"
    assert advice["recommended"]["jct_p95_s"]["ci_low"] is None
    assert advice["distinguishable"] is None and advice["more_passes"] == 4
    assert "no interval with 1 pass" in advice["verdict"] and "run 4 more" in advice["verdict"]


def test_a_busy_host_is_never_called_resolved():
    rows = ([_row("seq", 4.0 + i / 100, load=5.0) for i in range(5)]
            + [_row("mp", 2.0 + i / 100) for i in range(5)])
    (advice,) = stream_advice(_frame(rows))
    assert advice["recommended"]["executor"] == "mp"
    assert advice["host_busy"] is True and advice["distinguishable"] is None
    assert "not resolved: the host was busy" in advice["verdict"]
    assert "seq: 5 of 5 rows, load up to 5.00 on 2 cores" in advice["verdict"]
    assert "do not overlap" in advice["verdict"]


def test_streams_are_advised_apart_and_batch_rows_give_none():
    rows = [_row("seq", 4.0), _row("mp", 2.0), _row("seq", 1.0, sha="s2")]
    advice = stream_advice(_frame(rows))
    assert [a["stream_sha256"] for a in advice] == ["s1", "s2"]
    assert advice[1]["runner_up"] is None and "only one strategy" in advice[1]["verdict"]
    assert stream_advice(_frame([{**_row("seq", 1.0), "stream_sha256": ""}])) == []
