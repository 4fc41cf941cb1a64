"""``report --export DIR --format mlflow``: the results as MLflow runs, written through
MLflow's own client (the optional extra ``mlflow``: ``mlflow-skinny`` with SQLAlchemy and
alembic, MLflow's documented recipe for its SQL store).

Where: ``sqlite:///DIR/mlflow.db`` by default (staged and committed with the rest of the
export, :mod:`fugue_tui.report.export_commit`), or the tracking URI of ``--mlflow-uri``
(a server, another database: written there directly, nothing in DIR; an experiment that
exists already is reused and receives the runs again).

What:

* one MLflow experiment per campaign, named ``fugue-tui/<campaign_id>`` (``harness`` for
  rows without one);
* per group row (one attempt of one cell) a parent run named
  ``<experiment>/<executor>[-<variant>]/pass<N>-attempt<M>`` holding the group's figures
  as metrics (``group/T_group_s``, ``group/throughput_sps``, ``group/setup_s``,
  ``group/energy_per_model_j``, ``group/val_acc_mean``; a value not measured is not
  logged, never 0), the cell's configuration as params;
* per job of the group a child run (``mlflow.parentRunId``) named by its job id: params
  from the job's configuration and its ``trial_config`` (``trial.<key>``), per-epoch
  ``train/loss``, ``val/loss`` and ``val/acc`` (R² for regression) at the epoch's own time
  from the attempt's event stream, its final figures (``final/...``);
* on both, tags ``executor``, ``precision``, ``K``, ``machine`` (the provenance label),
  ``campaign``, ``cell_key`` and ``group_id``; run start and end from the rows' times.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from engine.errors import FugueError
from engine.results.derived import derived
from fugue_tui.report.export_data import (
    _epochs,
    _finite,
    _int,
    _run_labels,
    _walltime,
)

#: The file the default tracking URI names in the export folder.
MLFLOW_DB = "mlflow.db"
#: What to install when MLflow's client is missing (bad input: exit 2, nothing written).
INSTALL_HINT = "pip install -c constraints.txt 'fugue-tui[mlflow]'"
#: The cell's configuration on a group's parent run (group row columns).
GROUP_PARAMS = ("exp_id", "executor", "K", "max_parallel", "num_workers", "mode", "size",
                "scheduler", "rung", "features", "compile_mode", "precision", "seed",
                "passes", "threads", "device", "mp_start", "tune_actors", "cell_key",
                "config_key", "workload_key", "campaign_hash")
#: A job's configuration (job row columns); ``trial_config`` is spread as ``trial.<key>``;
#: and its weights digest (issue 50: text, which MLflow keeps as a param).
JOB_PARAMS = ("job_id", "exp_id", "model", "dataset", "executor", "batch_size", "epochs",
              "lr", "seed", "precision", "compile_mode", "threads", "split", "job_device",
              "num_workers", "param_count", "weights_sha256")
#: Final figures of a job (job row columns) logged once, at the job's end.
JOB_FINALS = ("final_train_loss", "final_train_acc", "final_val_loss", "final_val_acc",
              "total_time_s", "throughput_sps", "epochs_run")


def check_mlflow() -> None:
    """Raises :class:`FugueError` (one line, exit 2) when MLflow's client cannot be
    imported: checked before anything is written."""
    try:
        import mlflow  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise FugueError(f"--format mlflow needs MLflow's client ({exc.name} is not "
                         f"installed): {INSTALL_HINT}") from None


def default_uri(folder: Path) -> str:
    """``sqlite:///<folder>/mlflow.db`` (an absolute path: four slashes)."""
    return f"sqlite:///{(Path(folder) / MLFLOW_DB).resolve()}"


def write_mlflow(runs, uri: str, artifact_root: Path | None = None) -> int:
    """Log ``runs`` (:class:`engine.results.load.Runs`) to the tracking server or
    database at ``uri`` (see the module docstring); returns the number of runs created.
    ``artifact_root``: where new experiments keep artifacts (none are logged; without it
    MLflow would name ``./mlruns`` of the working folder).

    Raises:
        OSError: MLflow could not write (a full disk, an unwritable path), naming the URI.
    """
    import logging

    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    # alembic's migration lines on a fresh database are not the user's business
    for name in ("alembic", "mlflow.store.db.utils", "mlflow.tracking.fluent"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        client = MlflowClient(tracking_uri=uri)
        return _write(client, runs, artifact_root)
    except MlflowException as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OSError(None, f"MLflow: {message}", uri) from None


def _write(client, runs, artifact_root: Path | None) -> int:
    jobs = runs.jobs
    experiments: dict[str, str] = {}
    created = 0
    for row in runs.groups.to_dict("records"):
        campaign = str(_text(row.get("campaign_id")) or "harness")
        if campaign not in experiments:
            experiments[campaign] = _experiment(client, f"fugue-tui/{campaign}", artifact_root)
        labels = _run_labels(row)
        tags = _tags(row)
        start = _ms(_walltime(row))
        parent = client.create_run(experiments[campaign], start_time=start,
                                   run_name="/".join(labels[1:]),
                                   tags={**tags, "fugue.kind": "group"})
        group_jobs = (jobs[jobs["group_id"] == row.get("group_id")].to_dict("records")
                      if len(jobs) and "group_id" in jobs.columns else [])
        acc = pd.to_numeric(pd.Series([j.get("final_val_acc") for j in group_jobs],
                                      dtype=object), errors="coerce").mean()
        energy = derived("energy_per_model_j").compute(row.get("energy_group"), row.get("K"))
        figures = {"group/T_group_s": row.get("T_group"),
                   "group/throughput_sps": row.get("throughput_group"),
                   "group/setup_s": row.get("setup_s"),
                   "group/energy_per_model_j": energy,
                   "group/val_acc_mean": acc if group_jobs else None}
        step = _int(row.get("attempt")) or 1
        _log(client, parent.info.run_id, _params(row, GROUP_PARAMS),
             [(k, v, start, step) for k, v in figures.items()])
        created += 1
        epochs = _epochs(row)
        for job in group_jobs:
            job_id = str(job.get("job_id"))
            curve = epochs.get(job_id, {})
            times = [t for t in (_ms(v.get("ts")) for v in curve.values()) if t is not None]
            child = client.create_run(
                experiments[campaign], start_time=min(times, default=start), run_name=job_id,
                tags={**tags, **_tags(job), "fugue.kind": "job", "job_id": job_id,
                      "mlflow.parentRunId": parent.info.run_id})
            metrics = []
            for epoch, values in sorted(curve.items()):
                when = _ms(values.get("ts")) or start
                for name, key in (("train/loss", "loss"), ("val/loss", "val_loss"),
                                  ("val/acc", "val_acc")):
                    metrics.append((name, values.get(key), when, epoch))
            end = max(times, default=start)
            metrics += [(f"final/{name}", job.get(name), end, 0) for name in JOB_FINALS]
            _log(client, child.info.run_id, _params(job, JOB_PARAMS) + _trial(job), metrics)
            client.set_terminated(child.info.run_id, status=_status(job), end_time=end)
            created += 1
        client.set_terminated(parent.info.run_id, status=_status(row), end_time=start)
    return created


def _experiment(client, name: str, artifact_root: Path | None) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    location = None
    if artifact_root is not None:
        location = (Path(artifact_root).resolve() / name.replace("/", "_")).as_uri()
    return client.create_experiment(name, artifact_location=location)


def _log(client, run_id: str, params: list[tuple[str, str]],
         metrics: list[tuple[str, Any, int | None, int]]) -> None:
    """Params and the finite metrics in MLflow's batch limits (100 params, 1000 metrics)."""
    from mlflow.entities import Metric, Param

    finite = [Metric(key, float(value), when or 0, step)
              for key, value, when, step in metrics if _finite(value)]
    for at in range(0, len(params), 100):
        client.log_batch(run_id, params=[Param(k, v) for k, v in params[at:at + 100]])
    for at in range(0, len(finite), 1000):
        client.log_batch(run_id, metrics=finite[at:at + 1000])


def _text(value: Any) -> str:
    """A cell as text; "" when missing (None, NaN, NA, empty)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _params(row: dict[str, Any], names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The non-empty ``names`` of ``row`` as params (MLflow keeps up to 6000 characters)."""
    return [(name, _text(row.get(name))[:6000]) for name in names if _text(row.get(name))]


def _trial(job: dict[str, Any]) -> list[tuple[str, str]]:
    """A job's ``trial_config`` (JSON: an hpo trial's sampled values) as ``trial.<key>``."""
    text = _text(job.get("trial_config"))
    if not text:
        return []
    try:
        config = json.loads(text)
    except ValueError:
        return [("trial_config", text[:6000])]
    if not isinstance(config, dict):
        return [("trial_config", text[:6000])]
    return [(f"trial.{key}", (value if isinstance(value, str) else json.dumps(value))[:6000])
            for key, value in sorted(config.items())]


def _tags(row: dict[str, Any]) -> dict[str, str]:
    names = {"executor": "executor", "precision": "precision", "K": "K", "machine": "machine",
             "campaign": "campaign_id", "cell_key": "cell_key", "group_id": "group_id"}
    return {tag: _text(row.get(col)) for tag, col in names.items() if _text(row.get(col))}


def _status(row: dict[str, Any]) -> str:
    return "FINISHED" if _text(row.get("status")) in ("ok", "") else "FAILED"


def _ms(seconds: Any) -> int | None:
    """Seconds since the epoch as MLflow's milliseconds; None when unknown."""
    return int(round(float(seconds) * 1000)) if _finite(seconds) else None
