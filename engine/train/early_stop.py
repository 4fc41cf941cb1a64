"""Early-stopping decisions for hpo trials: pure functions over per-epoch validation
metrics, the same for every executor (issue 25). Torch-free (numpy only).

**The objective** (:func:`objective`): a task's validation metric and its direction —
classification (and any task scored by accuracy): ``val_loss``, lower is better; regression
(scored by R²): ``val_acc`` (the R²), higher is better.

**Schedulers** (``[options.<executor>] scheduler``; ``grace_period`` g, ``reduction_factor``
η, ``max_t`` the largest epoch budget of the trials):

- ``fifo``: no decision, every trial runs its budget.
- ``sha``: rung-synchronous successive halving. Rungs at epochs ``g·η^k < max_t``
  (:func:`sha_rungs`). At each rung, of the trials that reached it (every survivor whose
  budget reaches the rung), the best ``max(1, n // η)`` continue (ties: the lower trial
  index wins) and the others stop there (:func:`sha_survivors`). The decisions depend only
  on the rung's metrics, never on the order in which trials arrive: every executor makes
  the same ones.
- ``asha``: asynchronous successive halving, one bracket — Ray Tune's
  ``AsyncHyperBandScheduler`` rule, decided as each result arrives (:class:`Asha`): at the
  first rung (``g·η^k``, largest first) that the trial's epoch reached and that has no
  value of it yet, it stops when its value is worse than the ``(1 - 1/η)`` quantile of the
  values recorded there before it (numpy's linear ``nanpercentile``, as Ray).
- ``hyperband``: asynchronous HyperBand, as many brackets as the budget allows, each an
  ``asha`` bracket with its first rung offset by the bracket index. A trial's bracket is
  what Ray Tune's ``AsyncHyperBandScheduler`` draws for it — bracket b with probability
  ∝ ``e^(rungs of b)`` — from a generator seeded with the campaign seed
  (:func:`hyperband_brackets_of`): a pure function of the seed and the trial index, so
  every executor puts the same trials in the same brackets, and ray's Tune scheduler is
  given the same assignment (``engine.executors.ray.tune``).
- ``median``: Ray Tune's ``MedianStoppingRule`` with ``hard_stop``: from ``g`` on, a trial
  stops when its best value so far is worse than the median of the running means (epochs
  ``g..t``) of the other trials that reached epoch t, once at least
  :data:`MEDIAN_MIN_SAMPLES` such trials exist.

Asynchronous decisions depend on the arrival order of results, so every cell records its
decisions (``early_stopped``, ``stop_reason``, ``epochs_run`` per job; ``trials_stopped``
per group; every rung decision in arrival order in ``decisions.json``:
:mod:`engine.results.decisions`, fed by :func:`judged` and :class:`Rungs`' ``log``). :func:`pruning_warnings` says when a scheduler provably cannot stop any trial.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.bounds import DEFAULT_SEED
from engine.results.decisions import DecisionLog

#: Every scheduler name, ``fifo`` first (the legacy: no early stopping).
SCHEDULERS = ("fifo", "sha", "asha", "median", "hyperband")
#: The synchronous one: decisions independent of arrival order.
SYNCHRONOUS = ("sha",)
#: Ray Tune's MedianStoppingRule default: other trials needed before a comparison.
MEDIAN_MIN_SAMPLES = 3


def objective(task_metric: str) -> tuple[str, str]:
    """``(history key, mode)`` for a task scored by ``task_metric`` (``TaskSpec.metric``):
    ``("val_acc", "max")`` for R² (regression), ``("val_loss", "min")`` otherwise."""
    return ("val_acc", "max") if task_metric == "r2" else ("val_loss", "min")


def better(a: float, b: float, mode: str) -> bool:
    """Whether ``a`` is strictly better than ``b`` under ``mode`` (NaN is never better)."""
    if math.isnan(a):
        return False
    if math.isnan(b):
        return True
    return a < b if mode == "min" else a > b


def sha_rungs(max_t: int, grace_period: int, reduction_factor: int) -> list[int]:
    """The epochs where ``sha`` decides: ``g·η^k`` for k = 0, 1, ... below ``max_t`` (a trial
    that has run its budget is done, not judged)."""
    rungs, t = [], max(1, grace_period)
    while t < max_t:
        rungs.append(t)
        t *= reduction_factor
    return rungs


def sha_survivors(values: dict[int, float], mode: str, reduction_factor: int) -> set[int]:
    """Of the trials at a rung (trial index → its metric there), those that continue: the
    best ``max(1, n // η)``, ties to the lower index; a NaN metric ranks last."""
    keep = max(1, len(values) // reduction_factor)
    sign = 1.0 if mode == "min" else -1.0
    ranked = sorted(values, key=lambda i: (math.isnan(values[i]),
                                            sign * values[i] if not math.isnan(values[i])
                                            else 0.0, i))
    return set(ranked[:keep])


@dataclass(frozen=True)
class Stop:
    """One decision to stop a trial early: after ``epoch`` (1-based) with ``value``."""

    trial: int
    epoch: int
    value: float
    rule: str

    def reason(self, budget: int, metric: str) -> str:
        """The row's ``stop_reason``: ``sha: stopped after epoch 2 of 12 (val_loss 0.4321)``."""
        return (f"{self.rule}: stopped after epoch {self.epoch} of {budget} "
                f"({metric} {self.value:.4g})")


def sha_decisions(curves: dict[int, Sequence[float]], budgets: dict[int, int], mode: str,
                  grace_period: int, reduction_factor: int) -> dict[int, Stop]:
    """All of ``sha``'s decisions from complete per-epoch curves (trial → metric after
    epochs 1, 2, ...; as long as the trial ran): trial → its :class:`Stop`. The reference
    every executor's rung-by-rung run must match."""
    max_t = max(budgets.values())
    alive = set(curves)
    stops: dict[int, Stop] = {}
    for rung in sha_rungs(max_t, grace_period, reduction_factor):
        at = {i: float(curves[i][rung - 1]) for i in sorted(alive) if budgets[i] > rung}
        if not at:
            break
        keep = sha_survivors(at, mode, reduction_factor)
        for i in at:
            if i not in keep:
                stops[i] = Stop(i, rung, at[i], "sha")
                alive.discard(i)
    return stops


class Rungs:
    """``sha`` driven one result at a time (for executors whose trials arrive in any
    order): :meth:`report` a trial's metric after each epoch; a trial at a rung waits
    (:meth:`waiting`) until every trial still alive whose budget passes the rung has
    reported there, then :meth:`decide` gives the rung's stops. Decisions equal
    :func:`sha_decisions` on the same curves, whatever the order of the reports."""

    def __init__(self, budgets: dict[int, int], mode: str, grace_period: int,
                 reduction_factor: int, log: DecisionLog | None = None) -> None:
        self.budgets, self.mode, self.eta = dict(budgets), mode, reduction_factor
        self.rungs = sha_rungs(max(budgets.values()), grace_period, reduction_factor)
        self.alive = set(budgets)
        self.values: dict[int, dict[int, float]] = {r: {} for r in self.rungs}
        self.stops: dict[int, Stop] = {}
        self.decided: set[int] = set()
        #: Where the rungs' decisions are recorded (decisions.json), with the arrival
        #: position of each trial's result at each rung (decided only once all arrived).
        self.log = log
        self.arrival: dict[tuple[int, int], int] = {}

    def is_rung(self, epoch: int, trial: int) -> bool:
        """Whether the trial waits for a decision after ``epoch``."""
        return epoch in self.values and self.budgets[trial] > epoch

    def report(self, trial: int, epoch: int, value: float) -> None:
        if self.is_rung(epoch, trial):
            self.values[epoch][trial] = float(value)
            if self.log is not None and (trial, epoch) not in self.arrival:
                self.arrival[(trial, epoch)] = self.log.arrive()

    def expected(self, rung: int) -> set[int]:
        return {i for i in self.alive if self.budgets[i] > rung}

    def ready(self, rung: int) -> bool:
        """Every trial still alive that must pass ``rung`` has reported there."""
        return rung not in self.decided and self.expected(rung) <= set(self.values[rung])

    def decide(self, rung: int) -> list[Stop]:
        """The stops at ``rung`` (call once :meth:`ready`)."""
        at = {i: self.values[rung][i] for i in sorted(self.expected(rung))}
        keep = sha_survivors(at, self.mode, self.eta) if at else set()
        out = [Stop(i, rung, at[i], "sha") for i in at if i not in keep]
        if self.log is not None:
            for i in at:
                self.log.add(i, rung, at[i], "promote" if i in keep else "stop",
                             arrival=self.arrival.get((i, rung)))
        for stop in out:
            self.stops[stop.trial] = stop
            self.alive.discard(stop.trial)
        self.decided.add(rung)
        return out

    def forget(self, trial: int) -> None:
        """A trial that failed: no rung waits for it any more."""
        self.alive.discard(trial)


@dataclass
class _Bracket:
    """One asynchronous successive-halving bracket (Ray Tune's ``_Bracket``): rungs
    ``min_t·η^(k+s)``, largest first, each the values recorded there (reward = ±metric,
    higher is better)."""

    min_t: int
    max_t: int
    eta: int
    s: int
    rungs: list[tuple[float, dict[int, float]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        count = int(np.log(self.max_t / self.min_t) / np.log(self.eta) - self.s + 1)
        self.rungs = [(self.min_t * self.eta ** (k + self.s), {})
                      for k in reversed(range(count))]

    def on_result(self, trial: int, epoch: int, reward: float) -> bool:
        return self.judge(trial, epoch, reward)[0]

    def judge(self, trial: int, epoch: int, reward: float) -> tuple[bool, int | None]:
        """``(stop, rung)``: the rung the result was recorded at (None: no rung judged it)."""
        for milestone, recorded in self.rungs:
            if epoch < milestone or trial in recorded:
                continue
            stop = False
            if recorded:
                cutoff = np.nanpercentile(list(recorded.values()), (1 - 1 / self.eta) * 100)
                if reward < cutoff:
                    stop = True
            recorded[trial] = reward
            return stop, int(milestone)
        return False, None


def bracket_probabilities(sizes: Sequence[int]) -> np.ndarray:
    """Ray Tune's ``AsyncHyperBandScheduler.on_trial_add`` weights: bracket b with
    probability ∝ ``e^(sizes[b] - max(sizes))`` (``sizes``: each bracket's rung count)."""
    sizes_ = np.array(list(sizes))
    probs = np.e ** (sizes_ - sizes_.max())
    return probs / probs.sum()


def hyperband_brackets_of(seed: int, trials: int, sizes: Sequence[int]) -> list[int]:
    """The brackets of trials ``0 .. trials-1``: ``trials`` successive draws of
    ``np.random.RandomState(seed mod 2**32).choice(len(sizes), p=bracket_probabilities)``.

    Identical to what Ray Tune's ``AsyncHyperBandScheduler`` assigns when the global numpy
    generator is seeded with the same value (``np.random.seed(seed)``) and the trials are
    added in index order (each ``on_trial_add`` draws once with ``np.random.choice``); the
    agreement test (tests/unit/engine/train/test_hpo_hyperband.py) checks it against Ray's own
    scheduler. Trial i's bracket depends only on the seed, i and the bracket sizes (a
    prefix of one stream), never on how many trials come after it."""
    if len(sizes) <= 1:
        return [0] * trials
    rng = np.random.RandomState(int(seed) % 2**32)
    p = bracket_probabilities(sizes)
    return [int(rng.choice(len(sizes), p=p)) for _ in range(trials)]


class Asha:
    """``asha`` (``brackets=1``) and ``hyperband`` (more): :meth:`on_result` after each of a
    trial's epochs, in arrival order, says whether to stop it now. A trial at ``max_t`` has
    finished, which is no early stop. With several brackets, trial i is in bracket
    :meth:`bracket_of` (:func:`hyperband_brackets_of` of ``seed``)."""

    rule = "asha"

    def __init__(self, max_t: int, mode: str, grace_period: int, reduction_factor: int,
                 brackets: int = 1, seed: int = DEFAULT_SEED) -> None:
        self.max_t, self.sign = max_t, (-1.0 if mode == "min" else 1.0)
        grace = max(1, min(grace_period, max_t))
        self.brackets = [_Bracket(grace, max_t, reduction_factor, s) for s in range(brackets)]
        self.rule = "asha" if brackets == 1 else "hyperband"
        self.seed = seed
        self.sizes = [len(b.rungs) for b in self.brackets]
        self._assigned: list[int] = []  # brackets of trials 0..n-1 (a prefix of the stream)

    def bracket_of(self, trial: int) -> int:
        """Trial ``trial``'s bracket index."""
        if trial >= len(self._assigned):
            self._assigned = hyperband_brackets_of(
                self.seed, max(trial + 1, 2 * len(self._assigned)), self.sizes)
        return self._assigned[trial]

    def on_result(self, trial: int, epoch: int, value: float) -> bool:
        return self.judge(trial, epoch, value)[0]

    def judge(self, trial: int, epoch: int, value: float) -> tuple[bool, int | None]:
        """``(stop, rung)``: whether to stop the trial now, and the rung of its bracket that
        judged the result (None: no rung did — nothing was decided)."""
        if epoch >= self.max_t:
            return False, None
        bracket = self.brackets[self.bracket_of(trial)]
        return bracket.judge(trial, epoch, self.sign * value)


def hyperband_brackets(max_t: int, grace_period: int, reduction_factor: int) -> int:
    """As many brackets as the budget allows (what ray's cells ask Tune for)."""
    grace = max(1, min(grace_period, max_t))
    return max(1, int(math.log(max_t / grace, reduction_factor) + 1e-9) + 1)


class Median:
    """``median``: Ray Tune's ``MedianStoppingRule`` (``hard_stop``, never pausing);
    :meth:`on_result` after each epoch in arrival order."""

    rule = "median"

    def __init__(self, mode: str, grace_period: int,
                 min_samples: int = MEDIAN_MIN_SAMPLES) -> None:
        self.mode, self.grace, self.min_samples = mode, grace_period, min_samples
        self.results: dict[int, list[tuple[int, float]]] = {}
        self.stopped: set[int] = set()

    def _running_mean(self, trial: int, epoch: int) -> float:
        scoped = [v for t, v in self.results[trial] if self.grace <= t <= epoch]
        return float(np.mean(scoped)) if scoped else math.nan

    def on_result(self, trial: int, epoch: int, value: float) -> bool:
        return self.judge(trial, epoch, value)[0]

    def judge(self, trial: int, epoch: int, value: float) -> tuple[bool, int | None]:
        """``(stop, rung)``: the rule judges every epoch from ``grace_period`` on (rung =
        the epoch; too few other trials: continue), none before (rung None)."""
        if trial in self.stopped:
            return False, None
        self.results.setdefault(trial, []).append((epoch, float(value)))
        if epoch < self.grace:
            return False, None
        return self._stops(trial, epoch), epoch

    def _stops(self, trial: int, epoch: int) -> bool:
        others = [t for t, res in self.results.items() if res[-1][0] >= epoch and t != trial]
        means = [m for m in (self._running_mean(t, epoch) for t in others) if np.isfinite(m)]
        if len(means) < self.min_samples:
            return False
        median = float(np.median(means))
        values = [v for _, v in self.results[trial]]
        best = min(values) if self.mode == "min" else max(values)
        compare = min if self.mode == "min" else max
        if compare(median, best) != best:
            self.stopped.add(trial)
            return True
        return False


def judged(decider: Asha | Median, log: DecisionLog | None, trial: int, epoch: int,
           value: float) -> bool:
    """Whether ``decider`` stops ``trial`` after ``epoch`` with ``value``; the decision is
    recorded in ``log`` (decisions.json) when a rung judged the result."""
    stop, rung = decider.judge(trial, epoch, value)
    if rung is not None and log is not None:
        log.add(trial, rung, value, "stop" if stop else "continue")
    return stop


def decision_epochs(decider: Asha | Median, trial: int, budget: int) -> list[int]:
    """The epochs after which ``decider`` may judge ``trial`` (its epoch budget ``budget``):
    where a worker that must keep its weights as of a decision waits for it (mp, issue 50).

    ``asha``/``hyperband``: the milestones of the trial's bracket below its budget and
    ``max_t`` (epochs run one by one, so a result is recorded at a rung exactly at its
    milestone); ``median``: every epoch from ``grace_period`` on, below the budget. The
    last epoch of a trial is never a decision (it has finished)."""
    if isinstance(decider, Asha):
        bracket = decider.brackets[decider.bracket_of(trial)]
        return sorted(int(m) for m, _ in bracket.rungs if m < min(budget, decider.max_t))
    return list(range(max(1, int(decider.grace)), budget))


def bracket_record(decider: Asha | Median | None, job_ids: Sequence[str]) -> dict:
    """``executor_info.early_stop``'s record of hyperband's draw: ``seed`` and
    ``brackets_of`` (job id → bracket index); empty for every other scheduler."""
    if not isinstance(decider, Asha) or len(decider.brackets) < 2:
        return {}
    return {"seed": decider.seed,
            "brackets_of": {job: decider.bracket_of(i) for i, job in enumerate(job_ids)}}


def asynchronous(name: str, max_t: int, mode: str, grace_period: int,
                 reduction_factor: int, seed: int = DEFAULT_SEED) -> Asha | Median | None:
    """The decider of an asynchronous scheduler (None for ``fifo`` and ``sha``); ``seed``
    (the campaign seed) draws hyperband's brackets."""
    if name == "asha":
        return Asha(max_t, mode, grace_period, reduction_factor, 1)
    if name == "hyperband":
        return Asha(max_t, mode, grace_period, reduction_factor,
                    hyperband_brackets(max_t, grace_period, reduction_factor), seed=seed)
    if name == "median":
        return Median(mode, grace_period)
    return None


def pruning_warnings(name: str, trials: int, concurrent: int, max_t: int, grace_period: int,
                     reduction_factor: int, who: str = "") -> list[str]:
    """Settings under which ``name`` provably cannot stop any trial, one line each (and,
    for the asynchronous ones, one trial at a time: only compared with those before it).

    A rung can stop a trial only when at least two trials reach it: ``sha`` keeps
    ``max(1, n // η)``, so 2 trials at η = 4 still stop one; ``asha`` stops a trial that is
    worse than a quantile of those recorded before it, so any second trial can be stopped.
    Nothing can be stopped with one trial, or without a rung below the budget.
    """
    prefix = f"{who}: " if who else ""
    if name == "fifo":
        return []
    out = []
    if trials < 2:
        out.append(f"{prefix}{name} cannot stop any trial: the cell has {trials} trial")
    if name == "median" and trials <= MEDIAN_MIN_SAMPLES:
        out.append(f"{prefix}median cannot stop any trial: {trials} trial(s); a trial is "
                   f"compared with at least {MEDIAN_MIN_SAMPLES} others")
    if max_t <= grace_period:
        out.append(f"{prefix}{name} cannot stop any trial: the epoch budget ({max_t}) does "
                   f"not exceed grace_period ({grace_period})")
    if name in ("asha", "median", "hyperband") and concurrent == 1 and trials > 1:
        out.append(f"{prefix}{name} runs one trial at a time: each trial is only compared "
                   f"with those before it, and the first always runs to the end")
    return out


def first_stops(stops: Iterable[Stop]) -> dict[int, Stop]:
    """Trial → its stop (the first when several were recorded)."""
    out: dict[int, Stop] = {}
    for stop in stops:
        out.setdefault(stop.trial, stop)
    return out
