"""hpo cells under Ray: one Ray Tune trial per job, a trial scheduler on the per-epoch
validation metric of the task, as every executor judges (``engine.train.early_stop.
objective``: ``val_loss``, mode min, for classification; ``val_acc`` — the R² — mode max,
for regression), time attribute ``epoch``.

Schedulers (``[options.ray] scheduler``):

- ``fifo``: ``FIFOScheduler``, every trial runs its whole budget (the comparison with seq).
- ``asha``: ``ASHAScheduler`` (asynchronous successive halving, one bracket), ``max_t`` the
  largest epoch budget, ``grace_period`` and ``reduction_factor`` from the options.
- ``median``: ``MedianStoppingRule`` with ``grace_period``, ``hard_stop``; it must never
  *pause* a trial (see below). ``min_time_slice`` is set higher than any epoch count, but
  Ray 2.x still pauses a trial on its *first* check with too few samples while other trials
  are pending (``_on_insufficient_samples`` compares with a last pause at ``-inf``, so
  ``t - (-inf) > min_time_slice`` always holds): :class:`RecordingMedian` answers
  ``CONTINUE`` there instead, which is what ``min_time_slice`` asks for.
- ``hyperband``: asynchronous HyperBand, i.e. ``AsyncHyperBandScheduler`` with as many
  brackets as the budget allows. Tune draws a trial's bracket from numpy's global
  generator as it adds the trial; :class:`RecordingAsyncHyperBand` gives it instead the
  bracket every executor uses (``early_stop.hyperband_brackets_of``: the same draws from a
  generator seeded with the campaign seed, in job order), so the assignment does not
  depend on what else used numpy's generator, and is recorded (``executor_info``
  ``scheduler.brackets_of``). Tune's synchronous ``HyperBandScheduler`` pauses trials
  at each rung and resumes them from checkpoints; these trials have no checkpoints (the
  training loop is one uninterrupted job), so a resumed trial would start again from epoch
  1 — training twice and timing it. The asynchronous variant only ever stops trials.

Trial actors (``[options.ray] reuse_actors``):

- ``true``: Tune reuses a trial's actor for the next trial (``TuneConfig.reuse_actors``;
  with the function API Tune ends the finished trial's thread and runs the next one in the
  same process). The P actors are the strategy's runtime: :class:`TuneRun` starts Tune in
  executor setup, the first P trials prepare their processes and wait at the start gate
  (``engine.executors.ray.worker.trial``), and the group window opens the gate.
- ``false`` (the ablation; ``TuneConfig``'s default in Ray 2.60): every trial is a
  fresh process, started inside the window.

A stopped trial ends in its ``tune.report`` call (reused actor) or with its process (fresh
actors), so what the row records comes from the snapshot the trial sent at its last epoch
end (``engine.executors.ray.worker``); its stop reason from the scheduler's decision,
recorded as Tune makes it. Its weights are handed off to the cell as it ends, those of a
stopped trial as of its last epoch (``engine.executors.ray.worker.hand_off``: inside the
window, since the trial's process ends there; digested and saved after it, issue 50).
Every rung decision is logged as Tune's scheduler makes it, in
the order the results reach it (``_Recording``; the cell's ``decisions.json``,
``engine.results.decisions``).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    TrialScheduler,
)

from engine.bounds import DEFAULT_SEED
from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.errors import ConfigError
from engine.executors import RayOptions
from engine.executors.base import CellContext
from engine.executors.ray.worker import from_snapshot, trial
from engine.results.decisions import DecisionLog
from engine.train import early_stop
from engine.train.loop import JobResult, TrainSettings

#: Larger than any epoch count: MedianStoppingRule never pauses a trial for lack of samples.
_NEVER = 10**9
#: Default minimum samples of MedianStoppingRule (Ray's default, recorded).
MEDIAN_MIN_SAMPLES = 3


class _Recording:
    """Mixin: remember why the scheduler stopped a trial (epoch, value of the judged metric)
    as it decides, and log each rung decision in arrival order (``fugue_log``, set by
    :class:`TuneRun`: decisions.json; ``fugue_budgets``: job index → epoch budget, whose
    last epoch is no decision, as for every executor)."""

    fugue_log: DecisionLog | None = None
    fugue_budgets: dict[int, int] | None = None

    def _remember(self, trial_, result, decision, rung=None):
        if decision == TrialScheduler.STOP:
            stops = self.__dict__.setdefault("fugue_stops", {})
            stops.setdefault(trial_.config.get("job"),
                             (result.get("epoch"), result.get(self._metric or "val_loss")))
        job = trial_.config.get("job")
        log, budgets = self.fugue_log, self.fugue_budgets or {}
        if (log is not None and rung is not None and job is not None
                and result.get("epoch", 0) < budgets.get(int(job), math.inf)):
            value = result.get(self._metric or "val_loss")
            log.add(int(job), int(rung), math.nan if value is None else float(value),
                    "stop" if decision == TrialScheduler.STOP else "continue")
        return decision


class RecordingFIFO(_Recording, FIFOScheduler):
    def on_trial_result(self, tune_controller, trial, result):
        return self._remember(trial, result, super().on_trial_result(tune_controller, trial, result))


class RecordingAsyncHyperBand(_Recording, AsyncHyperBandScheduler):
    """Tune's asynchronous HyperBand, each trial in the bracket ``early_stop`` assigns it
    (``fugue_seed``: the campaign seed; trial i = the trial of job i)."""

    fugue_seed: int = DEFAULT_SEED

    def on_trial_add(self, tune_controller, trial):
        super().on_trial_add(tune_controller, trial)  # validates metric/mode; draws (unused)
        if len(self._brackets) > 1:
            sizes = [len(b._rungs) for b in self._brackets]
            job = int(trial.config.get("job", 0))
            bracket = early_stop.hyperband_brackets_of(self.fugue_seed, job + 1, sizes)[job]
            self._trial_info[trial.trial_id] = self._brackets[bracket]

    def on_trial_result(self, tune_controller, trial, result):
        # The rung that judged the result: the one of the trial's bracket that recorded it
        # (Tune's _Bracket records a trial once per rung, at the first result reaching it).
        bracket = self._trial_info.get(trial.trial_id)
        before = ({m for m, rec in bracket._rungs if trial.trial_id in rec}
                  if bracket is not None else set())
        decision = super().on_trial_result(tune_controller, trial, result)
        rung = next((m for m, rec in bracket._rungs
                     if trial.trial_id in rec and m not in before), None) \
            if bracket is not None else None
        return self._remember(trial, result, decision, rung)


class RecordingMedian(_Recording, MedianStoppingRule):
    """Tune's median stopping rule that never pauses a trial (module docstring: a paused
    trial of ours has no checkpoint, so Tune would restart it from epoch 1)."""

    def _on_insufficient_samples(self, tune_controller, trial, time):
        return TrialScheduler.CONTINUE

    def on_trial_result(self, tune_controller, trial, result):
        decision = super().on_trial_result(tune_controller, trial, result)
        # The rule judges every result from grace_period on (Tune: too few samples answers
        # CONTINUE here), as early_stop.Median.
        epoch = result.get(self._time_attr)
        judged = (self._metric in result and epoch is not None and epoch >= self._grace_period
                  and trial.config.get("job") not in self.__dict__.get("fugue_stops", {}))
        return self._remember(trial, result, decision, epoch if judged else None)


def make_scheduler(name: str, max_t: int, grace_period: int, reduction_factor: int,
                   seed: int = DEFAULT_SEED, trials: int = 0) -> tuple[TrialScheduler, dict[str, Any]]:
    """The scheduler for ``name`` and what to record of it (class and parameters; for
    hyperband the seed and the brackets of the ``trials`` jobs)."""
    grace = max(1, min(grace_period, max_t))
    if name == "fifo":
        return RecordingFIFO(), {"class": "FIFOScheduler"}
    if name == "sha":  # Tune runs every trial; the cell decides at the rungs (TuneRun.rungs)
        return RecordingFIFO(), {"class": "FIFOScheduler",
                                 "decided_by": "the cell: rung-synchronous successive halving"}
    if name == "asha":
        params = dict(time_attr="epoch", max_t=max_t, grace_period=grace,
                      reduction_factor=reduction_factor, brackets=1)
        return RecordingAsyncHyperBand(**params), {"class": "ASHAScheduler", **params}
    if name == "hyperband":
        brackets = early_stop.hyperband_brackets(max_t, grace_period, reduction_factor)
        params = dict(time_attr="epoch", max_t=max_t, grace_period=grace,
                      reduction_factor=reduction_factor, brackets=brackets)
        scheduler = RecordingAsyncHyperBand(**params)
        scheduler.fugue_seed = seed
        sizes = [len(b._rungs) for b in scheduler._brackets]
        return scheduler, {"class": "AsyncHyperBandScheduler", **params, "seed": seed,
                           "brackets_of": early_stop.hyperband_brackets_of(seed, trials, sizes)}
    if name == "median":
        params = dict(time_attr="epoch", grace_period=grace,
                      min_samples_required=MEDIAN_MIN_SAMPLES, min_time_slice=_NEVER,
                      hard_stop=True)
        return RecordingMedian(**params), {"class": "MedianStoppingRule", **params}
    raise ValueError(f"unknown Ray Tune scheduler {name!r}")


def pruning_warnings(name: str, trials: int, concurrent: int, max_t: int, grace_period: int,
                     reduction_factor: int) -> list[str]:
    """Settings under which ``name`` provably cannot stop any trial, one line each
    (``engine.train.early_stop.pruning_warnings``: the rule every executor shares; the old
    "fewer trials than the reduction factor" was false — asha stops 2 of 3 trials at
    reduction factor 4)."""
    return early_stop.pruning_warnings(name, trials, concurrent, max_t, grace_period,
                                       reduction_factor, who="ray")


class _Settled(tune.Callback):
    """Counts trials that ended before the group window (an error while preparing, say):
    the executor's setup then stops waiting for them at the start gate."""

    def __init__(self) -> None:
        self.count = 0
        self.errored: set[int] = set()  # job indices of trials that errored (sha: forget)

    def __reduce__(self):
        return (_Settled, ())

    def on_trial_error(self, iteration, trials, trial, **info):
        self.count += 1
        self.errored.add(trial.config.get("job"))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.count += 1


class _Abort(tune.Stopper):
    """Ends the whole run when the cell gives up during setup (``TuneRun.abort``): Tune
    stops every trial, those waiting at the start gate included, and ``fit`` returns."""

    def __init__(self) -> None:
        self.now = False

    def __reduce__(self):
        return (_Abort, ())

    def __call__(self, trial_id, result) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.now


class TuneRun:
    """One hpo cell's Tune run: every job a trial, results in job order.

    Built in executor setup (the scheduler, the ``Tuner``; ``ray.tune`` is imported with
    this module): job-independent, outside ``T_group``. :meth:`start` runs ``Tuner.fit``
    in a thread of the cell, so that with ``reuse_actors`` the trial actors start during
    setup (the executor waits for them at the start gate, then returns); without it,
    :meth:`start` is called when the window opens. :meth:`results` joins the thread and
    turns the trials' snapshots (``latest``: epoch snapshots, ``finals``: done snapshots,
    both filled by the executor's drain of the hub) into :class:`JobResult` objects.
    ``info`` receives the scheduler's facts and warnings.
    """

    def __init__(self, jobs: list[JobSpec], ctx: CellContext, *, hub, concurrent: int,
                 resources: dict[str, float], threads: int, settings: TrainSettings,
                 storage: Path, info: dict[str, Any], reuse: bool,
                 datasets: list[str]) -> None:
        options = from_table(RayOptions, ctx.options)  # the declared defaults where unset
        self.jobs, self.info = jobs, info
        self.name = ctx.scheduler or RayOptions.scheduler
        grace = int(options.grace_period)
        factor = int(options.reduction_factor)
        max_t = max(j.epochs for j in jobs)
        from engine.executors.seq import task_metric

        metrics = {task_metric(j, ctx) for j in jobs}
        # The metric every executor judges on (regression: the R², higher is better).
        self.metric, self.mode = early_stop.objective(metrics.pop() if len(metrics) == 1
                                                      else "accuracy")
        self.scheduler, facts = make_scheduler(self.name, max_t, grace, factor,
                                               seed=ctx.seed, trials=len(jobs))
        info["scheduler"] = {**facts, "metric": self.metric, "mode": self.mode}
        # every rung decision in arrival order (attempt-N/decisions.json, results())
        self.attempt_dir = ctx.attempt_dir
        self.log = DecisionLog("ray", self.name, self.metric, self.mode,
                               [j.job_id for j in jobs], grace, factor, max_t)
        if isinstance(self.scheduler, _Recording):
            self.scheduler.fugue_log = self.log
            self.scheduler.fugue_budgets = {i: j.epochs for i, j in enumerate(jobs)}
        # sha (issue 25): trials wait at each rung (worker.trial) until the cell, which sees
        # every trial's epochs through the hub, decides (:meth:`sha_step`).
        self.rungs = None
        if self.name == "sha":
            if concurrent < len(jobs):
                raise ConfigError(f"ray: scheduler sha needs every trial running at once "
                                  f"(max_parallel >= {len(jobs)}, the cell's trials); got "
                                  f"max_parallel {concurrent}")
            self.rungs = early_stop.Rungs({i: j.epochs for i, j in enumerate(jobs)},
                                          self.mode, grace, factor, log=self.log)
        self.seen: dict[str, int] = {}
        self.answered: set[int] = set()
        for line in pruning_warnings(self.name, len(jobs), concurrent, max_t, grace, factor):
            ctx.emit("warning", message=line)
            info.setdefault("warnings", []).append(line)
        self.settled = _Settled()
        self.stopper = _Abort()
        trainable = tune.with_resources(
            tune.with_parameters(trial, jobs=[j.to_dict() for j in jobs], threads=threads,
                                 settings=settings, device=str(settings.device), hub=hub,
                                 datasets=datasets if reuse else None,
                                 rungs=self.rungs.rungs if self.rungs is not None else None),
            {k.lower(): v for k, v in resources.items() if v})
        self.tuner = tune.Tuner(
            trainable,
            param_space={"job": tune.grid_search(list(range(len(jobs))))},
            tune_config=tune.TuneConfig(
                metric=self.metric, mode=self.mode, scheduler=self.scheduler, num_samples=1,
                max_concurrent_trials=concurrent, reuse_actors=reuse,
                trial_name_creator=lambda t: jobs[t.config["job"]].job_id,
                trial_dirname_creator=lambda t: jobs[t.config["job"]].job_id),
            # Absolute: against a cluster (address), Tune reads a relative path as a URI and
            # fails ("URI has empty scheme").
            run_config=tune.RunConfig(name="tune", storage_path=str(Path(storage).resolve()),
                                      verbose=0,
                                      callbacks=[self.settled], stop=self.stopper,
                                      failure_config=tune.FailureConfig(max_failures=0)))
        self.thread: threading.Thread | None = None
        self.grid = None
        self.error: BaseException | None = None

    def sha_step(self, hub, latest: dict[str, dict[str, Any]],
                 finals: dict[str, dict[str, Any]]) -> None:
        """sha: feed the trials' new epochs (the hub's snapshots) to the rungs; post the
        verdict of every rung that every trial it waits for reached. A trial that ended
        (its final snapshot, or an error) is no longer waited for."""
        if self.rungs is None:
            return
        stops = self.scheduler.__dict__.setdefault("fugue_stops", {})
        for i, job in enumerate(self.jobs):
            snap = latest.get(job.job_id)
            if snap is not None:
                result = from_snapshot(job, snap)
                for record in result.history[self.seen.get(job.job_id, 0):]:
                    value = record.get(self.metric)
                    self.rungs.report(i, record["epoch"], math.nan if value is None else value)
                self.seen[job.job_id] = len(result.history)
            final = finals.get(job.job_id)
            if (final is not None and from_snapshot(job, final).status != "ok"
                    or i in self.settled.errored):
                self.rungs.forget(i)
        for rung in self.rungs.rungs:
            if rung in self.answered or not self.rungs.ready(rung):
                continue
            waiting = set(self.rungs.expected(rung))
            stopped = {s.trial: s for s in self.rungs.decide(rung)}
            self.answered.add(rung)
            for i in sorted(waiting):
                stop = stopped.get(i)
                if stop is not None:
                    stops[i] = (stop.epoch, stop.value)
                hub.decide.remote(self.jobs[i].job_id, rung,
                                  "stop" if stop is not None else "go")

    def start(self) -> None:
        """Run ``Tuner.fit`` in a thread of the cell (Tune runs its loop there; it sets no
        signal handler outside the main thread)."""
        self.thread = threading.Thread(target=self._fit, name="fugue-tune", daemon=True)
        self.thread.start()

    def _fit(self) -> None:
        try:
            self.grid = self.tuner.fit()
        except Exception as exc:  # noqa: BLE001 - re-raised in the cell's thread by results()
            self.error = exc

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait(self, timeout: float | None) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def abort(self, timeout: float = 15.0) -> None:
        """Stop the run (a setup that gave up): Tune ends every trial; wait up to
        ``timeout`` seconds for ``fit`` to return."""
        self.stopper.now = True
        self.wait(timeout)

    def results(self, latest: dict[str, dict[str, Any]],
                finals: dict[str, dict[str, Any]]) -> list[JobResult]:
        """The jobs' results in job order, once :meth:`start`'s thread has ended.

        Raises:
            whatever ``Tuner.fit`` raised.
        """
        self.wait(None)
        if self.error is not None:
            raise self.error
        jobs, name, info = self.jobs, self.name, self.info
        errors = {}
        for res in self.grid:
            if res.error is not None:
                errors[res.config["job"]] = str(res.error).strip().splitlines()[-1][:300]
        stops = getattr(self.scheduler, "fugue_stops", {})
        info["trials_stopped"] = 0
        self.log.write(self.attempt_dir)
        results = []
        for i, job in enumerate(jobs):
            snap = finals.get(job.job_id) or latest.get(job.job_id)
            if snap is None:
                results.append(JobResult(job, status="failed",
                                         error=f"ray tune trial reported nothing: "
                                               f"{errors.get(i, 'no result')}"))
                continue
            result = from_snapshot(job, snap)
            if job.job_id not in finals and result.epochs_run < job.epochs and i not in errors:
                last = getattr(result, f"final_{self.metric}", None)
                epoch, value = stops.get(i, (result.epochs_run, last))
                result.early_stopped = True
                result.stop_reason = (f"{name}: stopped after epoch {epoch} of {job.epochs} "
                                      f"({self.metric} {value:.4g})" if value is not None else
                                      f"{name}: stopped after epoch {epoch} of {job.epochs}")
                # The last epoch run is the final one: its mean training loss (its accuracy
                # is only scored in a job's planned last epoch, so it stays empty).
                if result.history:
                    result.final_train_loss = result.history[-1].get("train_loss")
                info["trials_stopped"] += 1
            elif job.job_id not in finals and i in errors:
                result.status, result.error = "failed", f"ray tune trial failed: {errors[i]}"
            results.append(result)
        return results
