"""``python -m engine.cell SPEC`` checks the whole spec, down to every job, before it starts:
a cell spec with no jobs, ``max_parallel = 0``, 100000 threads or a job with ``epochs = 0``
is one line naming the key, exit 2 (the cell's status for bad input), and nothing written
(issue 18: the spec's top level only was checked, and ``jobs = []`` wrote an ok row)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import load_campaign
from engine.errors import ConfigError
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def good_doc(tmp_path_factory):
    """A schema-1 spec the runner builds for D_ens's seq cell (five jobs)."""
    tmp = tmp_path_factory.mktemp("spec")
    (tmp / "c.toml").write_text('name = "c"\nexperiments = "D_ens"\ndevice = "cpu"\n'
                                f'runs_dir = "{tmp / "runs"}"\nthreads = 1\n')
    runner = Runner(load_campaign(tmp / "c.toml"))
    return json.loads(json.dumps(runner.cell_spec(runner.cells[0], 1).to_dict()))


def _set(doc: dict, path: str, value) -> dict:
    """A deep copy of ``doc`` with ``path`` (``cell.jobs.0.epochs``) set, or deleted when
    ``value`` is :data:`DELETE`."""
    doc = json.loads(json.dumps(doc))
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if value is DELETE:
        del node[key]
    else:
        node[key] = value
    return doc


DELETE = object()

ROWS = [
    ("cell.jobs", [], "'cell.jobs' must be a non-empty list"),
    ("cell.jobs", "D_ens_ens_s0", "'cell.jobs' must be a non-empty list"),
    ("cell.max_parallel", 0, "'cell.max_parallel' must be >= 1"),
    ("cell.max_parallel", 2.5, "'cell.max_parallel' must be an integer"),
    ("threads", 100000, "'threads' must be <= 1024, got 100000"),
    ("attempt", 0, "'attempt' must be >= 1"),
    ("passes", 0, "'passes' must be >= 1, got 0"),
    ("seed", -1, "'seed' must be >= 0"),
    ("seed", "42", "'seed' must be an integer"),
    ("device", "gpu0", "'device' must be cpu, cuda or cuda:N"),
    ("monitor_interval_s", 0, "'monitor_interval_s' must be"),
    ("runs_dir", 5, "'runs_dir' must be a string"),
    ("cell.executor", DELETE, "missing key 'cell.executor'"),
    ("cell.surprise", 1, "unknown key 'cell.surprise'"),
    ("cell.jobs.0.epochs", 0, "'cell.jobs[0].epochs' must be >= 1, got 0"),
    ("cell.jobs.2.lr", float("inf"), "'cell.jobs[2].lr' must be finite, got inf"),
    ("cell.jobs.0.batch_size", -3, "'cell.jobs[0].batch_size' must be >= 1"),
    ("cell.jobs.0.batch_size", "8", "'cell.jobs[0].batch_size' must be an integer"),
    ("cell.jobs.1.model", DELETE, "missing key 'cell.jobs[1].model'"),
    ("cell.jobs.1.modle", "mlp", "unknown key 'cell.jobs[1].modle'"),
    ("cell.jobs.0", "job", "'cell.jobs[0]' must be an object"),
    ("cell.jobs.0.optimizer_kwargs", {"momentum": -1}, "'momentum' must be >= 0"),
    ("cell.jobs.0.split.kind", "fold", "'cell.jobs[0].split'"),
    ("cell.jobs.0.split", DELETE, "missing key 'cell.jobs[0].split'"),
    ("cell.jobs.0.seed", -5, "'cell.jobs[0].seed' must be >= 0"),
]


@pytest.mark.parametrize("path, value, message", ROWS,
                         ids=[f"{p}={v if v is not DELETE else 'deleted'}"[:60]
                              for p, v, _ in ROWS])
def test_a_bad_job_level_field_is_one_line_naming_it(good_doc, path, value, message):
    CellRunSpec.from_dict(good_doc)  # the runner's own spec passes
    with pytest.raises(ConfigError) as caught:
        CellRunSpec.from_dict(_set(good_doc, path, value), "spec.json")
    line = str(caught.value)
    assert line.startswith("spec.json: ") and "\n" not in line and message in line, line


def test_too_many_jobs_in_one_cell(good_doc):
    jobs = good_doc["cell"]["jobs"] * 820  # 4100 jobs
    with pytest.raises(ConfigError, match=r"'cell.jobs' holds 4100 jobs: at most 4096"):
        CellRunSpec.from_dict(_set(good_doc, "cell.jobs", jobs))


@pytest.mark.parametrize("path, value, message", [
    ("cell.jobs", [], "'cell.jobs' must be a non-empty list"),
    ("cell.max_parallel", 0, "'cell.max_parallel' must be >= 1"),
])
def test_the_cell_exits_2_with_one_line_and_writes_nothing(good_doc, tmp_path, path, value,
                                                           message):
    runs = tmp_path / "runs"
    doc = _set(good_doc, "runs_dir", str(runs))
    doc = _set(doc, "events", str(tmp_path / "attempt" / "events.jsonl"))
    doc = _set(doc, "reason_file", str(tmp_path / "attempt" / "reason"))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_set(doc, path, value)))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    cell = subprocess.run([sys.executable, "-m", "engine.cell", str(spec)], cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    lines = cell.stderr.strip().splitlines()
    assert cell.returncode == 2, cell.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{spec}: ") and message in lines[0], lines
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no row, no events


def test_a_full_cell_is_checked_to_its_last_job_fast(good_doc):
    """4096 jobs (the most one cell may hold) are checked in well under a second, down to
    the last one."""
    import time

    jobs = [dict(job, job_id=f"j{i}", index=i) for i, job in
            enumerate(good_doc["cell"]["jobs"] * 820)][:4096]
    t0 = time.perf_counter()
    CellRunSpec.from_dict(_set(good_doc, "cell.jobs", jobs))
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(ConfigError, match=r"'cell.jobs\[4095\].epochs' must be >= 1, got 0"):
        CellRunSpec.from_dict(_set(good_doc, "cell.jobs", jobs[:-1] + [dict(jobs[-1], epochs=0)]))
