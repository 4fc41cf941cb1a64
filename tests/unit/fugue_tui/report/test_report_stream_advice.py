"""``fugue-tui report --advise`` on a stream campaign (issue 52 item 2): the text report's
advice section and ``report --json``'s ``stream_advice``, on the recorded stream fixture
(seq and mp on one stream, one pass each). Nothing trains here."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
from rich.console import Console

from fugue_tui.jsonout import schema
from fugue_tui.report.tables import print_report, run_report

STREAM_RUNS = Path(__file__).resolve().parents[3] / "fixtures" / "dashboard" / "stream_runs"


def _json(capsys, **kw) -> dict:
    assert run_report(STREAM_RUNS, as_json=True, **kw) == 0
    doc = json.loads(capsys.readouterr().out,
                     parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    jsonschema.validate(doc, schema("report"), cls=jsonschema.Draft202012Validator)
    return doc


def test_the_json_names_the_lowest_p95_and_why_it_is_not_resolved(capsys):
    doc = _json(capsys, advise=True)
    (advice,) = doc["stream_advice"]
    (stream,) = {c["stream_sha256"] for c in doc["streams"]}
    assert advice["stream_sha256"] == stream and advice["measure"] == "jct_p95_s"
    # the fixture: seq 4.77 s, mp 5.17 s, one pass each
    assert advice["recommended"]["executor"] == "seq"
    assert advice["runner_up"]["executor"] == "mp"
    assert abs(advice["recommended"]["jct_p95_s"]["mean"] - 4.774) < 1e-3
    assert advice["recommended"]["jct_p95_s"]["ci_low"] is None
    assert advice["distinguishable"] is None and advice["more_passes"] == 4
    assert advice["offered_load"] is not None and advice["arrival_rate_jps"] is not None
    assert "run 4 more" in advice["verdict"]
    assert "stream_advice" not in _json(capsys)  # only asked for with --advise
    # counts are JSON integers (they came out as 1.0 and 6.0)
    for cell in doc["streams"]:
        assert type(cell["max_parallel"]) is int and type(cell["stream_jobs"]) is int
    assert type(advice["recommended"]["max_parallel"]) is int


def test_the_text_advice_section_has_the_stream(capsys):
    out = io.StringIO()
    print_report(STREAM_RUNS, Console(file=out, width=200, color_system=None),
                 advise=True)
    text = out.getvalue()
    section = text[text.index("advice (fugue-tui report --advise)"):]
    assert "lowest p95 job completion time: seq 4.77 s (no interval, 1 pass)" in section
    assert "runner-up: mp 5.17 s" in section and "as seq served it" in section
    assert "seq vs mp: no interval with 1 pass" in section


def test_the_batch_advice_and_knee_leave_stream_cells_out(capsys):
    """A stream's cells are no batch and its job count no K: the batch advice recommended
    "seq (K = 10)" beside the stream advice's other strategy, and two streams of 8 and 7
    jobs were read as a K sweep with its knee."""
    doc = _json(capsys, advise=True)
    assert doc["advice"] == [] and doc["sweeps"] == []
    assert doc["stream_advice"]  # the stream keeps its own
    out = io.StringIO()
    print_report(STREAM_RUNS, Console(file=out, width=200, color_system=None), advise=True)
    section = out.getvalue()[out.getvalue().index("advice (fugue-tui report --advise)"):]
    assert "recommended:" not in section and "K =" not in section
