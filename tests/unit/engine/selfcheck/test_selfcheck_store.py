"""The verdicts beside the profiles: ``<runs_dir>/selfcheck.csv``, one row per run, read
back per machine identity (the last of this machine wins, another machine's never)."""

from __future__ import annotations

from engine.define.paths import check_campaign_name
from engine.errors import ConfigError
from engine.selfcheck.store import append, latest, read, selfcheck_path
from engine.selfcheck.verdict import OUTSIDE, WITHIN

HERE = {"host": "h1", "device": "cpu", "gpu_name": "", "gpu_uuid": "", "torch": "2.14.1",
        "cuda": "13.0"}


def body(bit=9, within=12, outside=0):
    return {"device": "cpu", "elapsed_s": 3.2, "exit_status": 1 if outside else 0,
            "counts": {"bit_for_bit": bit, "within_bound": within, "outside_bound": outside},
            "machine": {"cpu_model": "AMD EPYC", "isa": "AVX512", "dispatch": None},
            "paths": [{"name": "p", "verdict": OUTSIDE if outside else WITHIN}]}


def test_the_last_verdict_of_this_machine_is_read_back(tmp_path):
    assert latest(tmp_path, HERE) is None  # no file yet
    append(tmp_path, body(), HERE, "20261204_100000")
    append(tmp_path, body(outside=1), HERE, "20261204_110000")
    append(tmp_path, body(bit=1), {**HERE, "host": "other"}, "20261204_120000")
    assert selfcheck_path(tmp_path).name == "selfcheck.csv"
    assert len(read(tmp_path)) == 3
    mine = latest(tmp_path, HERE)
    assert mine is not None and mine.timestamp == "20261204_110000"
    assert (mine.count(OUTSIDE), mine.ok, mine.row["isa"]) == (1, False, "AVX512")
    assert mine.document()["counts"]["outside_bound"] == 1
    # another torch build is another machine: its verdict says nothing about this one
    assert latest(tmp_path, {**HERE, "torch": "2.15.0"}) is None
    # the dashboard asks by host and torch build, any device
    cuda = {**HERE, "device": "cuda", "gpu_name": "H200"}
    append(tmp_path, body(), cuda, "20261204_130000")
    assert latest(tmp_path, HERE, ("host", "torch", "cuda")).identity["device"] == "cuda"


def test_no_campaign_may_be_named_after_the_file():
    try:
        check_campaign_name("selfcheck.csv", "c.toml")
    except ConfigError as exc:
        assert "self-check verdicts" in str(exc)
    else:
        raise AssertionError("a campaign named selfcheck.csv was accepted")
