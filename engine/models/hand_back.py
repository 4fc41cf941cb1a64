"""The hand-back after the group window (issue 50): each job's final weights digested
(``weights_sha256``) and, when ``save_models`` asks, written — one job at a time, in the
process that holds the weights (the cell for seq and unified_model, an mp worker, a Ray
actor), after the cell closed the window (``group_end``) and before teardown.

The cell asks the executor (:meth:`engine.executors.base.Executor.hand_back`); an executor
whose weights live in the cell's process yields ``(job, state)`` pairs from
:meth:`~engine.executors.base.Executor.final_states` and :func:`hand_back` consumes them
one by one, so at most one job's unstacked state is alive at a time (unified_model's
members are unstacked member by member). Times: ``digest_s`` (every digest), ``save_s``
(every write), both outside ``T_group`` (docs/measurement.md, the window rule).

A save that fails (an unwritable folder, a full disk) is recorded (``save_status``
``failed: <one line>``) and never fails the cell: its measured rows stay valid.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import failure_line


@dataclass
class HandBack:
    """One job's hand-back: its digest (None: not digested — a failed job, a state that
    cannot be digested), the seconds it took, and its save (``save_s`` None: not asked)."""

    digest: str | None = None
    digest_s: float = 0.0
    save_s: float | None = None
    save_error: str | None = None
    digest_error: str | None = None


def save_selection(mode: str, results: Sequence[Any]) -> set[str]:
    """The job ids whose weights ``save_models = mode`` writes: none (``false``), every job
    that ended ok (``true``), or the group's best by its task's metric (``best``: the
    trial :func:`engine.results.hpo_best.best_so_far` names from the jobs' validations, as
    the report's hpo best; a group that never validated saves nothing)."""
    ok = [r for r in results if r.status == "ok"]
    if mode == "true":
        return {r.job.job_id for r in ok}
    if mode != "best" or not ok:
        return set()
    best = best_job(ok)
    return set() if best is None else {best}


def best_job(results: Sequence[Any]) -> str | None:
    """The best job of ``results`` by the group's metric (``engine.train.early_stop
    .objective`` of the task's metric, over every validation; ties: the first to reach it)."""
    from engine.parts import tasks as task_lib
    from engine.results.hpo_best import best_so_far
    from engine.train.early_stop import objective

    metrics = set()
    for r in results:
        try:
            metrics.add(task_lib.resolve_task(r.job.task, r.job.dataset).metric)
        except Exception:  # noqa: BLE001 - an unknown task failed the job already
            pass
    metric, mode = objective(metrics.pop() if len(metrics) == 1 else "accuracy")
    found = best_so_far(((r.job.job_id, [(float(h.get("t", i)), h.get(metric))
                                         for i, h in enumerate(r.history)])
                         for r in results), mode)
    return None if found is None else str(found["best_trial"])


def member_meta(job: Any, result: Any, digest: str, executor: str) -> dict[str, Any]:
    """The JSON written beside a saved model (:func:`engine.models.save.write_member`)."""
    return {"job_id": job.job_id, "model": job.model, "model_kwargs": dict(job.model_kwargs),
            "dataset": job.dataset, "task": job.task, "seed": job.seed,
            "executor": executor, "precision": result.precision, "weights_sha256": digest,
            "metrics": {k: v for k, v in (
                ("final_train_loss", result.final_train_loss),
                ("final_train_acc", result.final_train_acc),
                ("final_val_loss", result.final_val_loss),
                ("final_val_acc", result.final_val_acc)) if v is not None
                and not (isinstance(v, float) and math.isnan(v))},
            "epochs_run": result.epochs_run, "early_stopped": result.early_stopped}


def hand_back_one(job: Any, result: Any, state: Mapping[str, Any], executor: str,
                  save: bool, attempt_dir: Path | None) -> HandBack:
    """Digest one job's ``state`` and, when ``save``, write it under ``attempt_dir``."""
    from engine.models.digest import weights_sha256
    from engine.models.save import write_member

    out = HandBack()
    t0 = time.perf_counter()
    try:
        out.digest = weights_sha256(state)
    except TypeError as exc:  # an entry that is not a tensor: said, never skipped
        out.digest_error = failure_line(exc)
    out.digest_s = time.perf_counter() - t0
    if save and out.digest is not None:
        t1 = time.perf_counter()
        try:
            if attempt_dir is None:
                raise OSError("no attempt folder to save models into")
            write_member(Path(attempt_dir), job.job_id, state,
                         member_meta(job, result, out.digest, executor))
        except Exception as exc:  # noqa: BLE001 - a failed save leaves the rows valid
            out.save_error = failure_line(exc)
        out.save_s = time.perf_counter() - t1
    return out


def hand_back(states: Iterable[tuple[Any, Mapping[str, Any]]], results: Sequence[Any],
              executor: str, save: set[str], attempt_dir: Path | None) -> dict[str, HandBack]:
    """Hand back every ``(job, state)`` of ``states``, one at a time (the next state is
    asked for only after the previous one was digested, written and dropped)."""
    by_id = {r.job.job_id: r for r in results}
    out: dict[str, HandBack] = {}
    for job, state in states:
        result = by_id.get(job.job_id)
        if result is None or result.status != "ok":
            continue
        out[job.job_id] = hand_back_one(job, result, state, executor,
                                        job.job_id in save, attempt_dir)
        del state  # before the next member is unstacked
    return out


def group_columns(backs: Mapping[str, HandBack], mode: str) -> dict[str, Any]:
    """``digest_s``, ``save_s`` (None when nothing was written) and ``save_status`` (None
    when not asked; ``ok``; ``failed: <first reason>``) of a group's hand-backs."""
    saved = [b for b in backs.values() if b.save_s is not None]
    errors = [b.save_error for b in saved if b.save_error]
    status = None
    if mode in ("true", "best"):
        status = f"failed: {errors[0]}" if errors else "ok"
    return {"digest_s": sum(b.digest_s for b in backs.values()),
            "save_s": sum(b.save_s or 0.0 for b in saved) if saved else None,
            "save_status": status}


def apply(backs: Mapping[str, HandBack], results: Sequence[Any]) -> None:
    """Each job's digest into its result (its row's ``weights_sha256``)."""
    for r in results:
        back = backs.get(r.job.job_id)
        r.weights_sha256 = back.digest if back is not None and r.status == "ok" else None
