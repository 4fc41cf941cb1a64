"""``report --export DIR --format parquet,json,tensorboard``: the results rows as data
other tools build on (issue 29); ``mlflow``: :mod:`fugue_tui.report.export_mlflow`.

* ``parquet``: ``groups.parquet`` and ``jobs.parquet``, one row per group / job row of the
  results files, typed from the column registry (:mod:`engine.results.columns`): numbers
  as float64 (counts as nullable int64: :data:`INTEGER_COLUMNS`), text as strings
  (``cuda_version`` stays ``"13.0"``), flags as booleans, ``timestamp`` as a timestamp
  (the local time the row was written, no zone), JSON columns parsed (a struct where
  every row's keys have one type, else Arrow's JSON extension type holding the text).
  Missing is null, never 0 or ``""``. ``pandas.read_parquet`` / ``pyarrow.parquet`` read
  them with no options.
* ``json``: ``groups.json`` and ``jobs.json``, the same rows as a JSON array of objects:
  JSON columns nested, ``timestamp`` in ISO 8601, missing as ``null``.
* ``tensorboard``: a ``tensorboard/`` folder of event files (tensorboardX): per job its
  per-epoch ``train/loss``, ``val/loss`` and ``val/acc`` (R² for regression) from the
  attempt's event stream, per group its headline figures (``group/T_group_s``,
  ``group/throughput_sps``, ``group/setup_s``, ``group/energy_per_model_j``,
  ``group/val_acc_mean``), each run named
  ``<campaign>/<experiment>/<executor>[-<variant>]/pass<N>-attempt<M>/<job or group>``,
  each folder name portable (letters, digits, ``-_.``; any other character ``_``, so
  ``sha-vf:1,s:0,fl:0`` is the folder ``sha-vf_1_s_0_fl_0``) and the label as the results
  spell it in the run's ``label`` text.

Columns the reader adds (``machine``: the provenance label; ``source``: the file the row
came from) come after the file's columns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from engine.results.columns import (
    BOOL,
    COLUMNS,
    GROUPS_FILE,
    INDIVIDUAL_FILE,
    JSON,
    NUMBER,
)
from engine.results.derived import derived

DATA_FORMATS = ("parquet", "json", "tensorboard", "mlflow")
#: The files (and the folder) each data format owns in the export folder (``mlflow``: its
#: default tracking database, :mod:`fugue_tui.report.export_mlflow`).
DATA_FILES = {"parquet": ("groups.parquet", "jobs.parquet"),
              "json": ("groups.json", "jobs.json"), "tensorboard": ("tensorboard",),
              "mlflow": ("mlflow.db",)}
#: Number columns that hold counts: nullable int64 (a count is never 2.0).
INTEGER_COLUMNS = frozenset({
    "K", "max_parallel", "num_workers", "total_samples", "cpu_cores", "gpu_vram_total_mb",
    "pass", "attempt", "threads", "seed", "passes", "param_count", "monitor_samples",
    "epochs_run", "epochs", "batch_size", "samples_dropped"})
#: What the reader adds after the file's columns (kept: they say where a row came from).
_EXTRA = ("machine", "source")


def typed_frame(frame: pd.DataFrame, file: str) -> pd.DataFrame:
    """``frame`` (:attr:`engine.results.load.Runs.groups` or ``.jobs``) with the registry's
    types (see the module docstring); JSON columns hold parsed values (dicts, lists)."""
    kinds = {c.name: c.kind for c in COLUMNS if c.file == file}
    names = [n for n in kinds if n in frame.columns] + [n for n in _EXTRA if n in frame.columns]
    out = {}
    for name in names:
        series = frame[name]
        kind = kinds.get(name)
        if name == "timestamp":
            out[name] = pd.to_datetime(series.where(series != ""), format="%Y%m%d_%H%M%S",
                                       errors="coerce").astype("datetime64[s]")
        elif kind == NUMBER:
            numbers = pd.to_numeric(series, errors="coerce").astype("float64")
            if name in INTEGER_COLUMNS and (numbers.dropna() % 1 == 0).all():
                numbers = numbers.round().astype("Int64")
            out[name] = numbers
        elif kind == BOOL:
            text = series.astype(str).str.strip().str.lower()
            out[name] = text.map({"true": True, "false": False, "1": True,
                                  "0": False}).astype("boolean")
        elif kind == JSON:
            out[name] = series.map(_parse_json).astype(object)
        else:
            out[name] = series.astype(str).where(series.astype(str) != "").astype("string")
    return pd.DataFrame(out, index=frame.index).reset_index(drop=True)


def _parse_json(text: Any) -> Any:
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:  # a hand-edited cell: kept as the text it is
        return text


def write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # pandas' own metadata (nullable Int64, boolean, string dtypes come back as written)
    plain = [n for n in frame.columns if frame[n].dtype != object]
    metadata = pa.Table.from_pandas(frame[plain], preserve_index=False).schema.metadata
    arrays, fields = [], []
    for name in frame.columns:
        series = frame[name]
        if series.dtype == object:  # a JSON column: a struct when Arrow can type it
            values = series.tolist()
            try:
                array = pa.array(values)
                if pa.types.is_null(array.type):
                    array = pa.array(values, type=pa.json_())
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                array = pa.array([None if v is None else json.dumps(v) for v in values],
                                 type=pa.json_())
        else:
            array = pa.Array.from_pandas(series)
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=metadata))
    with _naming(path):
        pq.write_table(table, path)
    return path


def write_json(frame: pd.DataFrame, path: Path) -> Path:
    from fugue_tui.jsonout import clean

    records = []
    for row in frame.to_dict("records"):
        record = {}
        for name, value in row.items():
            if isinstance(value, pd.Timestamp):
                value = value.isoformat()
            elif value is pd.NaT:
                value = None
            record[name] = value if isinstance(value, (dict, list)) else clean(value)
        records.append(clean(record))
    text = json.dumps(records, allow_nan=False, ensure_ascii=False, indent=1) + "\n"
    with _naming(path):
        path.write_text(text)
    return path


@contextlib.contextmanager
def _naming(path: Path):
    """An :class:`OSError` inside (a full disk) re-raised naming ``path``, for the
    one-line error."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def export_data(runs, out: Path, formats: list[str]) -> list[Path]:
    """Write the data formats of ``formats`` (:data:`DATA_FORMATS`) of ``runs`` under
    ``out``; the paths written (``mlflow`` is :func:`fugue_tui.report.export_all`'s call
    into :mod:`fugue_tui.report.export_mlflow`, which builds on this module)."""
    written: list[Path] = []
    frames = {"groups": typed_frame(runs.groups, GROUPS_FILE),
              "jobs": typed_frame(runs.jobs, INDIVIDUAL_FILE)}
    for fmt, writer in (("parquet", write_parquet), ("json", write_json)):
        if fmt in formats:
            for name, frame in frames.items():
                written.append(writer(frame, out / f"{name}.{fmt}"))
    if "tensorboard" in formats:
        written.append(write_tensorboard(runs, out / "tensorboard"))
    return written


# --------------------------------------------------------------------------- tensorboard

def write_tensorboard(runs, out: Path) -> Path:
    """The event files of ``runs`` under ``out`` (see the module docstring); ``out``."""
    from tensorboardX import SummaryWriter

    out.mkdir(parents=True, exist_ok=True)
    jobs = runs.jobs
    names = _Names()
    for row in runs.groups.to_dict("records"):
        labels = _run_labels(row)
        label = "/".join(labels)
        run_name = names.path(labels)
        run = out / run_name
        wall = _walltime(row)
        attempt = _int(row.get("attempt")) or 1
        with _summary_writer(SummaryWriter, run / "group") as writer:
            k = row.get("K")
            energy = row.get("energy_group")
            job_acc = (pd.to_numeric(jobs.loc[jobs["group_id"] == row["group_id"],
                                              "final_val_acc"], errors="coerce").mean()
                       if len(jobs) and "group_id" in jobs.columns else float("nan"))
            for tag, value in (("group/T_group_s", row.get("T_group")),
                               ("group/throughput_sps", row.get("throughput_group")),
                               ("group/setup_s", row.get("setup_s")),
                               ("group/energy_per_model_j",
                                derived("energy_per_model_j").compute(energy, k)),
                               ("group/val_acc_mean", job_acc)):
                if _finite(value):
                    writer.add_scalar(tag, float(value), attempt, walltime=wall)
            writer.add_text("provenance", _provenance(row), attempt, walltime=wall)
            # the folder names are portable (_Names); the label as the results spell it
            writer.add_text("label", label, attempt, walltime=wall)
        for job_id, epochs in _epochs(row).items():
            with _summary_writer(SummaryWriter, run / names(run_name, job_id)) as writer:
                writer.add_text("label", f"{label}/{job_id}", 0, walltime=wall)
                for epoch, values in sorted(epochs.items()):
                    when = values.get("ts", wall)
                    for tag, key in (("train/loss", "loss"), ("val/loss", "val_loss"),
                                     ("val/acc", "val_acc")):
                        if _finite(values.get(key)):
                            writer.add_scalar(tag, float(values[key]), epoch, walltime=when)
    return out


@contextlib.contextmanager
def _summary_writer(factory, folder: Path):
    """A tensorboardX ``SummaryWriter`` for ``folder``, closed on the way out. A write
    that fails (a full disk) raises one :class:`OSError` naming the folder; the writer is
    then marked closed, or tensorboardX's own ``atexit`` hook would try the flush again at
    exit and print a traceback after the one-line error (issue 43)."""
    try:
        writer = factory(str(folder))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(folder)) from None
    try:
        yield writer
        writer.close()
    except OSError as exc:
        for file_writer in (writer.all_writers or {}).values():
            events = file_writer.event_writer
            with contextlib.suppress(Exception):
                events._worker.stop()
            with contextlib.suppress(Exception):
                events._ev_writer.close()
            events._closed = True  # tensorboardX's atexit close becomes a no-op
        writer.all_writers = None
        raise OSError(exc.errno, exc.strerror or str(exc), str(folder)) from None


def _run_labels(row: dict[str, Any]) -> list[str]:
    """The run's labels, one per folder level (campaign, experiment, executor and variant,
    pass and attempt), as the results name them (:class:`_Names` makes them portable)."""
    variant = "-".join(str(row.get(c)) for c in ("scheduler", "rung", "features", "mp_start",
                                                 "tune_actors")
                       if row.get(c) not in (None, "") and row.get(c) == row.get(c))
    executor = row.get("executor") or "executor"
    if row.get("compile_mode") not in (None, "", "off"):
        executor += f"-c{row['compile_mode']}"
    if variant:
        executor += f"-{variant}"
    return [str(p) for p in (
        row.get("campaign_id") or "harness", row.get("exp_id") or "experiment", executor,
        f"pass{_int(row.get('pass')) or 1}-attempt{_int(row.get('attempt')) or 1}")]


def _epochs(row: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """``{job_id: {epoch: {loss, val_loss, val_acc, ts}}}`` from the attempt's event
    stream (its epoch-end ``job_progress`` events); empty when the folder is gone."""
    from engine.events import EventTail

    events = _events_file(row)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    if events is None:
        return out
    for event in EventTail(events).read():
        if event.get("type") != "job_progress" or not event.get("epoch_end"):
            continue
        epoch = _int(event.get("epoch"))
        if event.get("job_id") is None or epoch is None:
            continue
        out.setdefault(str(event["job_id"]), {})[epoch] = {
            "loss": event.get("loss"), "val_loss": event.get("val_loss"),
            "val_acc": event.get("val_acc"), "ts": event.get("ts")}
    return out


def _events_file(row: dict[str, Any]) -> Path | None:
    from engine.runfolder import CELLS, EVENTS

    source, key = row.get("source"), row.get("cell_key")
    if not source or not key or not row.get("campaign_id"):
        return None
    cells = Path(source).parent / str(row["campaign_id"]) / CELLS
    attempt = f"attempt-{_int(row.get('attempt')) or 1}"
    for cell in sorted(cells.glob(f"*-{str(key)[:8]}")):
        path = cell / attempt / EVENTS
        if path.is_file():
            return path
    return None


def _provenance(row: dict[str, Any]) -> str:
    keys = ("machine", "gpu_name", "torch_version", "cuda_version", "cudnn_version",
            "numpy_version", "fugue_tui_version", "status", "cell_key", "group_id")
    return "  \n".join(f"{k}: {row.get(k)}" for k in keys if row.get(k) not in (None, ""))


def _walltime(row: dict[str, Any]) -> float | None:
    stamp = pd.to_datetime(row.get("timestamp") or None, format="%Y%m%d_%H%M%S",
                           errors="coerce")
    return None if stamp is None or pd.isna(stamp) else stamp.timestamp()


def _finite(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == number and number not in (float("inf"), float("-inf"))


def _int(value: Any) -> int | None:
    return int(float(value)) if _finite(value) else None


#: What a folder name of the export keeps (the POSIX portable file name set): ``:`` and
#: ``,`` (``vf:1,s:0,fl:0``) are refused by Windows file systems, some archivers and cloud
#: storage syncs, so everything else becomes ``_``; the full label is written inside the
#: files (the TensorBoard run's ``label`` text).
_UNPORTABLE = re.compile(r"[^A-Za-z0-9._-]")


def _safe(text: str) -> str:
    """One portable path component (letters, digits, ``-_.``): any other character becomes
    ``_``, leading dots and dashes are dropped (no hidden folder, no option look-alike)."""
    cleaned = _UNPORTABLE.sub("_", str(text)).lstrip(".-")
    return cleaned or "_"


class _Names:
    """Portable folder names (:func:`_safe`) that stay distinct: a label whose portable
    form another label under the same parent already took gets its SHA-256's first 8 hex
    digits appended (``vf:1`` and ``vf_1`` never share one folder)."""

    def __init__(self) -> None:
        self._owner: dict[tuple[str, str], str] = {}

    def __call__(self, parent: str, label: str) -> str:
        name = _safe(label)
        if self._owner.setdefault((parent, name), label) != label:
            name = f"{name}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"
            self._owner.setdefault((parent, name), label)
        return name

    def path(self, labels: list[str]) -> str:
        """The portable relative path of ``labels`` (one folder each)."""
        parts: list[str] = []
        for label in labels:
            parts.append(self("/".join(parts), label))
        return "/".join(parts)
