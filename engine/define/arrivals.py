"""``arrivals``: jobs that arrive over time (issue 51) — the campaign key, the stream it
resolves to and the stream's file and hash. Torch-free.

A campaign with ``arrivals`` is a *stream campaign*: instead of one cell per experiment,
each executor (per pass, per compile mode) gets one *stream cell* that serves every job of
the stream as it arrives. Two forms::

    arrivals = { process = "poisson", rate = 2.0, count = 6, seed = 7,
                 mix = { D_ens = 3, D_reg = 1 } }
    arrivals = { trace = "arrivals.csv" }      # relative to the campaign file

``poisson``: ``count`` jobs (1 to :data:`MAX_COUNT`), inter-arrival gaps exponential with
mean ``1 / rate`` seconds (``rate`` jobs per second, finite and > 0), the first job at the
first gap after the cell's group window opens; each job's template drawn from ``mix``
(experiment id → weight > 0, normalised). ``seed`` (default: the campaign's ``seed``)
seeds one ``numpy.random.Generator`` (PCG64): all ``count`` gaps are drawn first
(``exponential``), then all ``count`` templates (``choice`` with the normalised weights).

``trace``: a CSV file with a header row. Columns ``time_s`` (seconds after the window
opens, finite, >= 0, non-decreasing down the file) and ``experiment`` (an experiment id),
then optionally any of :data:`OVERRIDES` (``epochs``, ``batch_size``, ``lr``): a value
replaces the template job's, an empty cell keeps it. 1 to :data:`MAX_COUNT` rows.

Each arrival's job: the m-th arrival (m = 0, 1, ...) of template experiment ``T`` with K
jobs is job ``m mod K`` of ``T`` expanded with the campaign seed ``seed + K * (m // K)``
(``engine.define.workloads.expand``): its seed is ``seed + m`` and the first K arrivals
of ``T`` are exactly the jobs a batch cell of ``T`` runs. Its job id is
``a<index>_<template job id>`` (``a0003_D_ens_ens_s1``). The stream depends on the
campaign's seed, the key's values and the catalogue only: every strategy, every pass and
every attempt serves the same stream.

The stream's identity (:func:`stream_sha256`): sha256 over its canonical serialisation,
one line per arrival in order, each the canonical JSON (sorted keys, no spaces) of
``{"index": i, "time_s": "<time, 6 decimals>", "experiment": T, "job": <job dict>}``
followed by ``\\n``, UTF-8. Arrival times are rounded to the microsecond when generated,
so the hash does not hang on the last bit of a logarithm.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.bounds import JOB, MAX_SEED
from engine.define.catalogue import Catalogue
from engine.errors import ConfigError, known, nearest, shown

#: The most jobs one stream holds (a stream cell is one process serving all of them).
MAX_COUNT = 10_000
#: The longest a stream may last, seconds: a trace's last ``time_s``, a Poisson stream's
#: expected duration ``count / rate`` (one day). A trace written in milliseconds, or a rate
#: of 1e-9, would otherwise keep a cell "waiting" for days with nothing to show.
MAX_STREAM_S = 86_400.0
#: The columns a trace must have, in this order, first.
TRACE_COLUMNS = ("time_s", "experiment")
#: The job fields a trace may override, with their types.
OVERRIDES: dict[str, type] = {"epochs": int, "batch_size": int, "lr": float}
#: The file a stream campaign's run folder holds its stream in.
ARRIVALS_FILE = "arrivals.csv"
#: The decimals of an arrival time (microseconds).
TIME_DECIMALS = 6
#: The largest trace file read (10,000 rows of a few overrides fit many times over).
MAX_TRACE_BYTES = 4 << 20
_KEYS = {"process", "rate", "count", "seed", "mix", "trace"}
_POISSON_KEYS = {"process", "rate", "count", "seed", "mix"}


@dataclass(frozen=True)
class StreamSpec:
    """The validated ``arrivals`` key: a Poisson process (``process = "poisson"``,
    ``rate`` jobs/s, ``count``, ``seed`` or None for the campaign's, ``mix`` as
    ``(experiment id, weight)`` pairs in file order) or a trace (``process = "trace"``,
    ``trace`` its path, ``rows`` its ``(time_s, experiment, overrides)`` rows)."""

    process: str
    rate: float | None = None
    count: int = 0
    seed: int | None = None
    mix: tuple[tuple[str, float], ...] = ()
    trace: str | None = None
    rows: tuple[tuple[float, str, tuple[tuple[str, Any], ...]], ...] = ()

    @property
    def templates(self) -> list[str]:
        """The template experiment ids, in order of first mention (mix or trace)."""
        if self.process == "poisson":
            return [exp_id for exp_id, _ in self.mix]
        return list(dict.fromkeys(row[1] for row in self.rows))


@dataclass(frozen=True)
class Arrival:
    """One job of a stream: its ``index`` in arrival order, ``time_s`` (seconds after the
    group window opens), its template ``experiment`` id and its ``job`` (a
    ``JobSpec.to_dict()``)."""

    index: int
    time_s: float
    experiment: str
    job: dict[str, Any]


def describe(spec: StreamSpec, campaign_seed: int) -> str:
    """The stream in one line, as the plan screen's preview and ``--batch --dry-run`` show
    it: ``"stream: poisson, 2 jobs/s, 16 jobs, seed 7, mix D_ens 1, D_cv 1"`` or
    ``"stream: trace /x/t.csv, 6 jobs"``."""
    if spec.process == "trace":
        return f"stream: trace {spec.trace}, {len(spec.rows)} jobs"
    seed = spec.seed if spec.seed is not None else f"{campaign_seed} (the campaign's)"
    mix = ", ".join(f"{exp} {weight:g}" for exp, weight in spec.mix)
    return (f"stream: {spec.process}, {spec.rate:g} jobs/s, {spec.count} jobs, "
            f"seed {seed}, mix {mix}")


def parse_arrivals(value: Any, where: str, catalogue: Catalogue, seed: int,
                   base_dir: Path | None = None) -> StreamSpec:
    """The ``arrivals`` table checked (``where``: the campaign file; ``seed``: the
    campaign's, which the jobs' seeds start from; ``base_dir``: what a relative ``trace``
    path is relative to). Every problem is one line naming the file, the key and the value.

    Raises:
        ConfigError: ``"<where>: key 'arrivals': rate must be a finite number > 0 (jobs per
            second), got 0"``, an unknown key or template, a count out of bounds, a trace
            that is missing, unsorted or has a malformed row (its line number).
    """
    at = f"{where}: key 'arrivals'"
    if not isinstance(value, dict):
        raise ConfigError(f"{at} must be a table (arrivals = {{ process = \"poisson\", ... }} "
                          f"or {{ trace = \"file.csv\" }}), got {shown(value)}")
    for key in value:
        if key not in _KEYS:
            raise ConfigError(f"{at}: unknown key {shown(key)}{nearest(str(key), _KEYS)}; "
                              f"{known(sorted(_KEYS))}")
    if "trace" in value:
        extra = sorted(set(value) - {"trace", "process"})
        if extra or value.get("process", "trace") != "trace":
            raise ConfigError(f"{at}: a trace takes no {', '.join(extra) or 'process'} "
                              f"(its file gives the times and experiments)")
        spec = _trace(value["trace"], at, catalogue, base_dir)
    else:
        spec = _poisson(value, at, catalogue)
    count = spec.count
    if seed + count - 1 > MAX_SEED:  # the m-th arrival of a template gets seed + m
        raise ConfigError(f"{at}: the campaign seed {seed} + {count} jobs passes the largest "
                          f"job seed {MAX_SEED}: give a smaller seed")
    return spec


def _poisson(value: dict[str, Any], at: str, catalogue: Catalogue) -> StreamSpec:
    process = value.get("process")
    if process != "poisson":
        raise ConfigError(f"{at}: process must be \"poisson\" (or give trace = \"file.csv\"), "
                          f"got {shown(process)}")
    for key in ("rate", "count", "mix"):
        if key not in value:
            raise ConfigError(f"{at}: a poisson stream needs {key} (rate = jobs per second, "
                              "count = jobs, mix = { <experiment id> = <weight>, ... })")
    rate = value["rate"]
    if (isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate)
            or rate <= 0):
        raise ConfigError(f"{at}: rate must be a finite number > 0 (jobs per second), "
                          f"got {shown(rate)}")
    count = value["count"]
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ConfigError(f"{at}: count must be an integer from 1 to {MAX_COUNT}, "
                          f"got {shown(count)}")
    if count / rate > MAX_STREAM_S:
        raise ConfigError(f"{at}: count / rate = {count / rate:.6g} s: a stream lasts at most "
                          f"{MAX_STREAM_S:g} s (one day) on average; got rate {shown(rate)} "
                          f"and count {count}")
    seed = value.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed < 2**63):
        raise ConfigError(f"{at}: seed must be an integer from 0 to {2**63 - 1}, "
                          f"got {shown(seed)}")
    mix = value["mix"]
    if not isinstance(mix, dict) or not mix:
        raise ConfigError(f"{at}: mix must be a table of experiment id = weight with at "
                          f"least one entry, got {shown(mix)}")
    pairs = []
    for exp_id, weight in mix.items():
        _known_template(exp_id, at, catalogue)
        if (isinstance(weight, bool) or not isinstance(weight, int | float)
                or not math.isfinite(weight) or weight <= 0):
            raise ConfigError(f"{at}: mix weight of {shown(exp_id)} must be a finite number "
                              f"> 0, got {shown(weight)}")
        pairs.append((exp_id, float(weight)))
    return StreamSpec("poisson", rate=float(rate), count=count, seed=seed, mix=tuple(pairs))


def _known_template(exp_id: str, at: str, catalogue: Catalogue) -> None:
    if exp_id not in catalogue.experiments:
        ids = catalogue.ids()
        raise ConfigError(f"{at}: unknown experiment {shown(exp_id)}{nearest(exp_id, ids)}; "
                          f"{known(ids)}")


def _trace(path_value: Any, at: str, catalogue: Catalogue, base_dir: Path | None
           ) -> StreamSpec:
    if not isinstance(path_value, str) or not path_value.strip():
        raise ConfigError(f"{at}: trace must be a path to a CSV file, got {shown(path_value)}")
    path = Path(path_value).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.is_dir():
        raise ConfigError(f"{at}: trace {path}: a folder, not a CSV file")
    if not path.is_file():
        raise ConfigError(f"{at}: trace {path}: no such file")
    if path.stat().st_size > MAX_TRACE_BYTES:
        raise ConfigError(f"{at}: trace {path}: larger than {MAX_TRACE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{at}: trace {path}: cannot be read ({exc})") from None
    where = f"{at}: trace {path}"
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader, [])]
    if tuple(header[:2]) != TRACE_COLUMNS:
        raise ConfigError(f"{where}: line 1: the header must start with time_s,experiment, "
                          f"got {','.join(header) or 'nothing'}")
    for name in header[2:]:
        if name not in OVERRIDES:
            raise ConfigError(f"{where}: line 1: unknown column {shown(name)}; overridable: "
                              f"{', '.join(OVERRIDES)}")
    if len(set(header)) != len(header):
        raise ConfigError(f"{where}: line 1: a column is named twice")
    rows = []
    last = 0.0
    for line_no, row in enumerate(reader, 2):
        if not row or all(not c.strip() for c in row):
            continue  # a blank line (a trailing newline)
        if len(row) != len(header):
            raise ConfigError(f"{where}: line {line_no}: {len(row)} fields, the header has "
                              f"{len(header)}")
        try:
            time_s = float(row[0])
        except ValueError:
            time_s = math.nan
        if not math.isfinite(time_s) or time_s < 0 or time_s > MAX_STREAM_S:
            raise ConfigError(f"{where}: line {line_no}: time_s must be a finite number "
                              f"from 0 to {MAX_STREAM_S:g} (seconds: one day), got {row[0]!r}")
        if time_s < last:
            raise ConfigError(f"{where}: line {line_no}: time_s {row[0]} is before the "
                              f"previous row's {last:g}: the trace must be sorted by time")
        last = time_s
        exp_id = row[1].strip()
        _known_template(exp_id, f"{where}: line {line_no}", catalogue)
        overrides = []
        for name, cell in zip(header[2:], row[2:], strict=True):
            if cell.strip():
                overrides.append((name, _override(name, cell.strip(),
                                                  f"{where}: line {line_no}")))
        rows.append((round(time_s, TIME_DECIMALS), exp_id, tuple(overrides)))
        if len(rows) > MAX_COUNT:
            raise ConfigError(f"{where}: more than {MAX_COUNT} rows")
    if not rows:
        raise ConfigError(f"{where}: no rows (at least one arrival)")
    return StreamSpec("trace", count=len(rows), trace=str(path), rows=tuple(rows))


def _override(name: str, text: str, where: str) -> Any:
    kind = OVERRIDES[name]
    try:
        value: Any = kind(text)
    except ValueError:
        raise ConfigError(f"{where}: {name} must be {'an integer' if kind is int else 'a number'}"
                          f", got {text!r}") from None
    problem = JOB[name].problem(value) if name in JOB else None
    if problem is not None:  # it says what it got
        raise ConfigError(f"{where}: {name} {problem}")
    if kind is float and not math.isfinite(value):
        raise ConfigError(f"{where}: {name} must be finite, got {text!r}")
    return value


def generate(spec: StreamSpec, catalogue: Catalogue, seed: int) -> list[Arrival]:
    """The stream ``spec`` resolves to for campaign seed ``seed``: a pure function of its
    arguments (see the module docstring for the draws and the jobs' derivation). Arrival
    times are non-decreasing seconds, rounded to the microsecond."""
    import numpy as np

    from engine.define.workloads import expand

    if spec.process == "poisson":
        rng = np.random.default_rng(spec.seed if spec.seed is not None else seed)
        assert spec.rate is not None
        gaps = rng.exponential(1.0 / spec.rate, size=spec.count)
        weights = np.array([w for _, w in spec.mix], dtype=float)
        picks = rng.choice(len(spec.mix), size=spec.count, p=weights / weights.sum())
        times = [round(float(t), TIME_DECIMALS) for t in np.cumsum(gaps)]
        items: list[tuple[float, str, tuple[tuple[str, Any], ...]]] = [
            (t, spec.mix[int(p)][0], ()) for t, p in zip(times, picks, strict=True)]
    else:
        items = list(spec.rows)
    seen: dict[str, int] = {}
    expansions: dict[tuple[str, int], list[Any]] = {}
    out = []
    for index, (time_s, exp_id, overrides) in enumerate(items):
        exp = catalogue.get(exp_id)
        m = seen.get(exp_id, 0)
        seen[exp_id] = m + 1
        k = exp.k
        base = seed + k * (m // k)
        if (exp_id, base) not in expansions:
            expansions[exp_id, base] = expand(exp, base)
        job = expansions[exp_id, base][m % k]
        job = replace(job, job_id=f"a{index:04d}_{job.job_id}", **dict(overrides))
        out.append(Arrival(index, time_s, exp_id, job.to_dict()))
    return out


def canonical_lines(arrivals: list[Arrival]) -> str:
    """The stream's canonical serialisation (module docstring), which its hash covers."""
    return "".join(json.dumps({"index": a.index, "time_s": f"{a.time_s:.{TIME_DECIMALS}f}",
                               "experiment": a.experiment, "job": a.job},
                              sort_keys=True, separators=(",", ":"), default=str) + "\n"
                   for a in arrivals)


def stream_sha256(arrivals: list[Arrival]) -> str:
    """sha256 (64 hex digits) of :func:`canonical_lines`."""
    return hashlib.sha256(canonical_lines(arrivals).encode()).hexdigest()


#: The columns of ``arrivals.csv``.
FILE_COLUMNS = ("index", "time_s", "experiment", "job_id", "seed", "job")


def stream_csv(arrivals: list[Arrival]) -> str:
    """``arrivals.csv``'s text: one row per arrival, :data:`FILE_COLUMNS` (``job``: the
    job's canonical JSON, what the cell trains)."""
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FILE_COLUMNS)
    for a in arrivals:
        writer.writerow([a.index, f"{a.time_s:.{TIME_DECIMALS}f}", a.experiment,
                         a.job["job_id"], a.job["seed"],
                         json.dumps(a.job, sort_keys=True, separators=(",", ":"))])
    return buf.getvalue()


def write_stream(arrivals: list[Arrival], folder: Path) -> Path:
    """``<folder>/arrivals.csv`` written whole or not at all (a temporary file, then
    ``os.replace``). Returns its path. Raises ``OSError`` naming the file."""
    import contextlib
    import os

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ARRIVALS_FILE
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(stream_csv(arrivals))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    return path


__all__ = ["ARRIVALS_FILE", "MAX_COUNT", "OVERRIDES", "TRACE_COLUMNS", "Arrival",
           "StreamSpec", "canonical_lines", "generate", "parse_arrivals", "stream_csv",
           "stream_sha256", "write_stream"]
