"""``arrivals`` (issue 51): the campaign key, the stream it resolves to, its hash and its
cells. A bad stream is one line naming the file, the key and the value, exit 2, nothing
written; the same campaign gives the same stream for every strategy, pass and run."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from engine.define.arrivals import (
    FILE_COLUMNS,
    MAX_COUNT,
    canonical_lines,
    generate,
    stream_csv,
    stream_sha256,
    write_stream,
)
from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.define.workloads import expand
from engine.errors import ConfigError
from engine.plugins import load_plugins

MACHINE = {"host": "h", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2"}
POISSON = ('arrivals = { process = "poisson", rate = 4.0, count = 6, seed = 3, '
           'mix = { D_ens = 2, D_reg = 1 } }\n')


@pytest.fixture(autouse=True)
def _plugins():
    load_plugins()


def _campaign(tmp_path: Path, arrivals: str = POISSON, extra: str = "",
              trace: str | None = None) -> Path:
    if trace is not None:
        (tmp_path / "trace.csv").write_text(trace)
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\nexecutors = ["seq"]\nruns_dir = "{tmp_path / "runs"}"\n'
                    + extra + arrivals)
    return path


def test_a_poisson_stream_is_the_campaigns_experiments_and_one_cell_per_pass(tmp_path):
    campaign = load_campaign(_campaign(tmp_path, extra="passes = 2\n"))
    assert campaign.experiments == ["D_ens", "D_reg"]
    assert campaign.resolved()["arrivals"] == {"process": "poisson", "rate": 4.0, "count": 6,
                                               "seed": 3, "mix": {"D_ens": 2.0, "D_reg": 1.0}}
    cells = build_cells(campaign, MACHINE)
    assert [c.slug for c in cells] == ["001-stream-seq-p1", "002-stream-seq-p2"]
    one, two = cells
    assert one.jobs == two.jobs and one.arrivals == two.arrivals and len(one.jobs) == 6
    assert one.config_key == two.config_key and one.key != two.key
    assert one.stream is not None and one.stream["templates"] == ["D_ens", "D_reg"]
    assert one.arrivals == sorted(one.arrivals) and one.arrivals[0] > 0


def test_the_stream_is_a_pure_function_of_the_key_and_the_campaign_seed(tmp_path):
    campaign = load_campaign(_campaign(tmp_path))
    assert campaign.arrivals is not None and campaign.catalogue is not None
    first = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    again = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    assert canonical_lines(first) == canonical_lines(again)
    assert stream_sha256(first) == stream_sha256(again)
    other = load_campaign(_campaign(tmp_path, POISSON.replace("seed = 3", "seed = 4")))
    assert other.arrivals is not None and other.catalogue is not None
    assert stream_sha256(generate(other.arrivals, other.catalogue, other.seed)) != \
        stream_sha256(first)
    # the sha256 is over the documented canonical lines
    import hashlib

    assert stream_sha256(first) == hashlib.sha256(canonical_lines(first).encode()).hexdigest()
    assert json.loads(canonical_lines(first).splitlines()[0])["time_s"] == \
        f"{first[0].time_s:.6f}"


def test_each_arrival_is_its_templates_job_with_the_catalogues_seeds(tmp_path):
    """The m-th arrival of template T (K jobs) is job m mod K of T expanded at seed +
    K·(m // K): seed + m, and T's first K arrivals are its batch cell's jobs."""
    (tmp_path / "mine.toml").write_text("[experiments.D_ens]\nk = 2\n")
    campaign = load_campaign(_campaign(
        tmp_path, 'arrivals = { process = "poisson", rate = 9.0, count = 7, '
                  'mix = { D_ens = 1 } }\n', extra='experiments_file = "mine.toml"\nseed = 5\n'))
    assert campaign.arrivals is not None and campaign.catalogue is not None
    stream = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    batch = [j.to_dict() for j in expand(campaign.catalogue.get("D_ens"), 5)]
    assert [a.job["seed"] for a in stream] == [5, 6, 7, 8, 9, 10, 11]
    for a, job in zip(stream[:2], batch, strict=True):
        assert {**a.job, "job_id": job["job_id"]} == job
        assert a.job["job_id"] == f"a{a.index:04d}_{job['job_id']}"
    assert len({a.job["job_id"] for a in stream}) == 7


def test_a_trace_keeps_its_times_templates_and_overrides(tmp_path):
    campaign = load_campaign(_campaign(
        tmp_path, 'arrivals = { trace = "trace.csv" }\n',
        trace="time_s,experiment,epochs,lr\n0,D_ens,,\n0.25,D_reg,1,0.5\n0.25,D_ens,3,\n"))
    assert campaign.arrivals is not None and campaign.catalogue is not None
    stream = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    assert [(a.time_s, a.experiment) for a in stream] == [(0.0, "D_ens"), (0.25, "D_reg"),
                                                          (0.25, "D_ens")]
    d_ens = campaign.catalogue.get("D_ens")
    assert stream[0].job["epochs"] == d_ens.epochs
    assert (stream[1].job["epochs"], stream[1].job["lr"]) == (1, 0.5)
    assert stream[2].job["epochs"] == 3 and stream[2].job["seed"] == campaign.seed + 1
    cell = build_cells(campaign, MACHINE)[0]
    assert cell.arrivals == [0.0, 0.25, 0.25] and "seed" not in json.dumps(cell.stream)


def test_the_stream_file_is_written_whole(tmp_path):
    campaign = load_campaign(_campaign(tmp_path))
    assert campaign.arrivals is not None and campaign.catalogue is not None
    stream = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    path = write_stream(stream, tmp_path / "run")
    assert path.read_text() == stream_csv(stream)
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert tuple(rows[0]) == FILE_COLUMNS and len(rows) == 7
    assert json.loads(rows[1][5]) == stream[0].job
    assert [p.name for p in path.parent.iterdir()] == ["arrivals.csv"]  # no temporary left


BAD = [
    ("rate = 0.0", 'rate must be a finite number > 0 (jobs per second), got 0.0'),
    ("rate = -2.0", "rate must be a finite number > 0 (jobs per second), got -2.0"),
    ("rate = inf", "rate must be a finite number > 0 (jobs per second), got inf"),
    (f"count = {MAX_COUNT + 1}", f"count must be an integer from 1 to {MAX_COUNT}, got "
                                 f"{MAX_COUNT + 1}"),
    ("count = 0", f"count must be an integer from 1 to {MAX_COUNT}, got 0"),
    ("mix = { D_enz = 1 }", "unknown experiment 'D_enz' (did you mean 'D_ens'?)"),
    ("mix = { D_ens = 0 }", "mix weight of 'D_ens' must be a finite number > 0, got 0"),
    ("rates = 2", "unknown key 'rates' (did you mean 'rate'?)"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_poisson_stream_is_one_line(tmp_path, change, message):
    name = change.split(" =")[0]
    base = {"process": '"poisson"', "rate": "4.0", "count": "6", "mix": "{ D_ens = 1 }"}
    base.pop(name, None)
    text = "arrivals = { " + ", ".join(f"{k} = {v}" for k, v in base.items()) + f", {change} }}\n"
    path = _campaign(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: key 'arrivals': ")
    assert message in line


TRACES = [
    ("time_s,experiment\n0.5,D_ens\n0.25,D_ens\n",
     "line 3: time_s 0.25 is before the previous row's 0.5: the trace must be sorted by time"),
    ("time_s,experiment\n0.5,D_ens,3\n", "line 2: 3 fields, the header has 2"),
    ("time_s,experiment\nsoon,D_ens\n", "line 2: time_s must be a finite number from 0 to "
     "86400 (seconds: one day), got 'soon'"),
    ("time_s,experiment\n-1,D_ens\n", "line 2: time_s must be a finite number from 0 to "
     "86400 (seconds: one day), got '-1'"),
    # a trace in milliseconds would keep a cell waiting for days
    ("time_s,experiment\n0,D_ens\n1e9,D_ens\n", "line 3: time_s must be a finite number "
     "from 0 to 86400"),
    ("time_s,experiment\n0,D_enz\n", "line 2: unknown experiment 'D_enz'"),
    ("time_s,experiment,epochs\n0,D_ens,0\n", "line 2: epochs must be >= 1"),
    # the bound's own words say what it got: once
    ("time_s,experiment,batch_size\n0,D_ens,0\n", "line 2: batch_size must be >= 1, got 0"),
    ("time_s,experiment,lr\n0,D_ens,inf\n", "line 2: lr must be finite, got inf"),
    ("time_s,experiment,epoch\n0,D_ens,1\n", "line 1: unknown column 'epoch'"),
    ("experiment,time_s\nD_ens,0\n", "line 1: the header must start with time_s,experiment"),
    ("time_s,experiment\n", "no rows (at least one arrival)"),
]


@pytest.mark.parametrize("trace, message", TRACES, ids=[t[1][:24] for t in TRACES])
def test_a_bad_trace_is_one_line_naming_the_row(tmp_path, trace, message):
    path = _campaign(tmp_path, 'arrivals = { trace = "trace.csv" }\n', trace=trace)
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: key 'arrivals': trace ")
    assert "trace.csv" in line and message in line


@pytest.mark.parametrize("extra, message", [
    ('experiments = "D_ens"\n', "key 'experiments' and key 'arrivals': give one"),
    ('executors = ["ray"]\n[options.ray]\nscheduler = ["asha"]\n',
     "key 'scheduler' of [options.ray] and key 'arrivals': Ray Tune's trial schedulers"),
    # seq, mp and unified_model served the stream with the scheduler silently unused
    ('executors = ["seq"]\n[options.seq]\nscheduler = "sha"\n',
     "key 'scheduler' of [options.seq] and key 'arrivals': early-stopping schedulers ('sha')"),
    ('executors = ["mp"]\n[options.mp]\nscheduler = ["fifo", "asha"]\n',
     "key 'scheduler' of [options.mp] and key 'arrivals': early-stopping schedulers"),
    ('executors = ["unified_model"]\n[options.unified_model]\nscheduler = "median"\n',
     "key 'scheduler' of [options.unified_model] and key 'arrivals'"),
    ("k_sweep = [1, 2]\n", "key 'k_sweep' and key 'arrivals'"),
    ('executors = ["mp"]\n[options.mp]\ndevices = ["cuda:0", "cuda:1"]\n',
     "key 'devices' of [options.mp] and key 'arrivals'"),
])
def test_what_a_stream_campaign_cannot_hold(tmp_path, extra, message):
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\n' + POISSON + extra)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_campaign(path)


@pytest.mark.parametrize("arrivals, trace, words", [
    (POISSON.replace("rate = 4.0", "rate = 0"), None, "rate must be a finite number > 0"),
    (POISSON.replace("rate = 4.0", "rate = -1"), None, "got -1"),
    (POISSON.replace("count = 6", "count = 10001"), None, "count must be an integer"),
    (POISSON.replace("D_reg", "D_nope"), None, "unknown experiment 'D_nope'"),
    ('arrivals = { trace = "trace.csv" }\n', "time_s,experiment\n1,D_ens\n0,D_ens\n",
     "must be sorted by time"),
    ('arrivals = { trace = "trace.csv" }\n', "time_s,experiment\n1,D_ens,x\n",
     "line 2: 3 fields"),
], ids=["zero-rate", "negative-rate", "count-above-bound", "unknown-template",
        "unsorted-trace", "malformed-trace-row"])
def test_batch_refuses_a_bad_stream_with_exit_2_and_writes_nothing(tmp_path, capsys, arrivals,
                                                                   trace, words):
    from fugue_tui.cli import main

    path = _campaign(tmp_path, arrivals, trace=trace)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["--batch", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: key 'arrivals'" in err[0] and words in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no runs folder


def test_an_hpo_templates_trial_is_recomputed_for_its_stream_job(tmp_path):
    """A stream job of an hpo template is its trial (seed + m, trial m mod K of the
    expansion at seed + K·(m // K)); the row's trial_config says which."""
    from engine.cell.rows import trial_config_of
    from engine.define.workloads import JobSpec, trial_config

    campaign = load_campaign(_campaign(
        tmp_path, 'arrivals = { process = "poisson", rate = 9.0, count = 5, '
                  'mix = { D_hpo = 1 } }\n'))
    [cell] = build_cells(campaign, MACHINE)
    assert campaign.catalogue is not None
    exp = campaign.catalogue.get("D_hpo")
    for m, job in enumerate(cell.jobs):
        base = campaign.seed + exp.k * (m // exp.k)
        assert trial_config_of(cell.experiment, JobSpec.from_dict(job)) == \
            trial_config(exp, base, m % exp.k)


def test_a_stream_lasting_over_a_day_and_a_folder_as_trace_are_one_line(tmp_path):
    slow = POISSON.replace("rate = 4.0", "rate = 1e-9")
    with pytest.raises(ConfigError, match=re.escape("count / rate = 6e+09 s: a stream lasts "
                                                    "at most 86400 s (one day) on average")):
        load_campaign(_campaign(tmp_path, slow))
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError, match="trace .*folder: a folder, not a CSV file"):
        load_campaign(_campaign(tmp_path, 'arrivals = { trace = "folder" }\n'))


def test_no_trace_message_says_got_twice(tmp_path):
    for column, value in (("batch_size", "0"), ("epochs", "1000000000000"), ("lr", "-0.1"),
                          ("lr", "inf")):
        path = _campaign(tmp_path, 'arrivals = { trace = "trace.csv" }\n',
                         trace=f"time_s,experiment,{column}\n0,D_ens,{value}\n")
        with pytest.raises(ConfigError) as err:
            load_campaign(path)
        assert str(err.value).count(" got ") == 1, str(err.value)


def test_a_traces_batch_size_above_the_training_samples_is_one_line_at_load(tmp_path, capsys):
    """As an experiments file's: the trace's batch_size override failed every cell at run
    time (exit 1) where the same value in an experiments file is refused at load."""
    from fugue_tui.cli import main

    path = _campaign(tmp_path, 'arrivals = { trace = "trace.csv" }\n',
                     trace="time_s,experiment,batch_size\n0,D_ens,\n0.5,D_reg,100000\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["--batch", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: key 'arrivals': trace " in err[0]
    assert "arrival 2 (D_reg" in err[0] and "batch_size 100000 exceeds its" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
