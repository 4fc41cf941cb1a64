"""The advice as data and as words: one candidate (:class:`Option`), one workload's
advice (:class:`Advice`, its lines), and the verdict on the two best candidates — whether
their intervals tell them apart and how many passes would (:func:`passes_to_separate`).
How the candidates are found and ranked is :mod:`engine.results.advise` (its module doc
states the rules these words report). No torch, no UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.results.analysis import MIN_BOOT_N
from engine.results.derived import BASELINE_EXECUTOR, DEFAULT_FRACTION, FIFO
from engine.results.knee import Curve
from engine.results.per_core import line as per_core_line

#: Executors whose ``max_parallel`` (jobs at once) is worth recommending.
PARALLEL = ("mp", "ray")
#: Why a speedup is missing where the cell has no seq baseline (the table's "n/a (no seq)").
NO_SEQ = f"no {BASELINE_EXECUTOR} ({FIFO}) row at this K"


@dataclass(frozen=True)
class Option:
    """One candidate: a strategy at one K, with what was measured there."""

    label: str
    executor: str
    K: int
    n: int
    n_seq: int
    speedup: float
    ci_low: float
    ci_high: float
    #: The ranking measure and its interval (speedup, or throughput with a sweep).
    score: float
    score_low: float
    score_high: float
    throughput: float = math.nan
    energy_per_model_j: float = math.nan
    max_parallel: float = math.nan
    curve: Curve | None = None
    #: End to end (module doc): speedup over seq of ``setup_s + T_group`` with its interval
    #: (NaN: some row has no ``setup_s``, or no seq row), and the cell's means (s).
    e2e_speedup: float = math.nan
    e2e_low: float = math.nan
    e2e_high: float = math.nan
    setup_s: float = math.nan
    T_group: float = math.nan
    #: Conditions (issue 46, :mod:`engine.results.conditions`): the highest host load
    #: over the cell's rows and the host's cores (NaN: not recorded), how many of its
    #: rows were busy and how many had a window under 1 s, and its seq baseline's busy
    #: rows and highest load.
    host_load_max: float = math.nan
    host_cores: float = math.nan
    busy_n: int = 0
    short_n: int = 0
    seq_busy_n: int = 0
    seq_host_load_max: float = math.nan
    #: ``--per-core`` (:mod:`engine.results.per_core`): the cell's mean cores_used (NaN:
    #: not recorded), how many of its rows recorded it, of how many, and the speedup per
    #: core with its interval (NaN unless ranked per core).
    per_core_cores: float = math.nan
    per_core_rows: int = 0
    per_core_of: int = 0
    per_core: float = math.nan
    per_core_low: float = math.nan
    per_core_high: float = math.nan
    #: Mean CPU cores the cell's processes used over the group window (issue 46: a speedup
    #: on a CPU campaign is partly cores); NaN where no row recorded it.
    cores_used: float = math.nan
    #: The speedup's own baseline: seq under fifo, whose speedup is exactly 1 with no
    #: width. Seq under another scheduler is a candidate like any other, with its speedup
    #: over seq fifo (:func:`engine.results.analysis.speedups`).
    baseline: bool = False

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.score_low) and math.isfinite(self.score_high)

    @property
    def half_width(self) -> float:
        return (self.score_high - self.score_low) / 2 if self.has_interval else math.nan


@dataclass(frozen=True)
class Advice:
    """The advice for one workload on one machine (module doc); :meth:`lines` as text."""

    provenance: dict[str, Any]
    exp_id: str
    swept: bool
    measure: str
    #: None when no candidate has a speedup to rank on (no seq (fifo) baseline at its K):
    #: the verdict says so, as the table's "n/a (no seq)" does.
    recommended: Option | None
    runner_up: Option | None
    #: True / False when both have intervals; None when an interval is missing.
    distinguishable: bool | None
    verdict: str
    #: More passes needed to separate the two best (None: not computable or not needed).
    more_passes: int | None
    cells: int
    rows: int
    passes: tuple[int, int]
    fraction: float = DEFAULT_FRACTION
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: True when a row of the two compared cells or of their seq baseline was measured on
    #: a busy host (issue 46): the verdict then refuses to call the difference resolved.
    host_busy: bool = False
    #: The recorded host load and cores over the compared rows, as one line ("" when no
    #: row recorded a load).
    host: str = ""
    #: Ranked by speedup per core (``--per-core``).
    per_core: bool = False

    @property
    def machine(self) -> str:
        p = self.provenance
        parts = [str(p.get("machine") or "unknown machine"), p.get("gpu_name") or "no GPU",
                 f"torch {p.get('torch_version') or '?'}"]
        return " · ".join(parts)

    @property
    def how(self) -> str:
        """``unified_model, K = 16 models at once (the knee)`` and the like ("" without a
        recommendation)."""
        rec = self.recommended
        if rec is None:
            return ""
        if self.swept and rec.curve is not None:
            where = ("the knee" if rec.curve.knee == rec.K
                     else "its best K; no knee inside the sweep")
            # seq trains its K models one after another, never at once
            together = (", one after another" if rec.executor == BASELINE_EXECUTOR
                        else " at once")
            text = f"{rec.label}, K = {rec.K} models{together} ({where})"
        else:
            text = f"{rec.label} (K = {rec.K})"
        if rec.executor in PARALLEL and math.isfinite(rec.max_parallel):
            text += f", max_parallel = {int(rec.max_parallel)}"
        return text

    def lines(self) -> list[str]:
        """The advice as plain text lines (the report and the dashboard print these)."""
        rec = self.recommended
        if rec is None:  # nothing ranked: the verdict says why
            return [f"{self.exp_id} on {self.machine}", f"  {self.verdict}",
                    f"  evidence: {self.cells} cells, {self.rows} ok rows, "
                    f"{_passes_text(self.passes)}; {self.measure}",
                    *(f"  note: {n}" for n in self.notes)]
        out = [f"{self.exp_id} on {self.machine}", f"  recommended: {self.how}"]
        out.append(f"  end-to-end speedup over seq at K = {rec.K} (setup + T_group, what you "
                   f"wait for): {_speed_text(rec, rec.e2e_speedup, rec.e2e_low, rec.e2e_high, _e2e_missing(rec))}"
                   f"{_times_text(rec)}")
        out.append(f"  speedup over seq at K = {rec.K} (T_group only, set-up excluded): "
                   f"{_speed_text(rec, rec.speedup, rec.ci_low, rec.ci_high, NO_SEQ)}"
                   f"{_cores_text(rec)}")
        if self.per_core:
            out.append(f"  {per_core_line(rec)}")
        energy = number_text(rec.energy_per_model_j, ",.1f", " J") if math.isfinite(
            rec.energy_per_model_j) else "not measured"
        out.append(f"  energy per trained model: {energy}")
        if rec.curve is not None:
            c = rec.curve
            out.append(f"  training throughput at K = {rec.K}: {number_text(rec.throughput, ',.0f')} "
                       f"samples/s{_interval(c.point(rec.K).low, c.point(rec.K).high)}; "
                       f"best at K = {c.best_k}"
                       f" ({number_text(c.point(c.best_k).throughput, ',.0f')} samples/s; not "
                       f"ranked on: it leaves out the rest of the group window)")
            moves = ", ".join(f"{f:.0%}: {('K = ' + str(k)) if k else 'none'}"
                              for f, k in c.knees.items())
            out.append(f"  knee at {self.fraction:.0%} per doubling: {c.knee_text}; "
                       f"with another fraction: {moves}")
        out.append(f"  {self.verdict}")
        if self.host:
            out.append(f"  {self.host}")
        out.append(f"  evidence: {self.cells} cells, {self.rows} ok rows, "
                   f"{_passes_text(self.passes)}; ranked by {self.measure}")
        out.extend(f"  note: {n}" for n in self.notes)
        return out


def _e2e_missing(rec: Option) -> str:
    """Why ``rec`` has no end-to-end speedup: only what applies (its T_group speedup's
    baseline, or ``setup_s``)."""
    if not math.isfinite(rec.speedup):
        return NO_SEQ
    if not math.isfinite(rec.setup_s):
        return "no setup_s recorded"
    return "setup_s missing from some rows of this cell or of its seq baseline"


def _speed_text(rec: Option, value: float, low: float, high: float, missing: str) -> str:
    """``value`` with its interval; ``missing`` says why when there is none."""
    if rec.baseline and value == 1.0:
        return "1× (it is the baseline)"
    if not math.isfinite(value):
        return f"n/a ({missing})"
    text = number_text(value, ".2f", "×")
    if math.isfinite(low) and math.isfinite(high):
        return text + f" [{low:.2f}, {high:.2f}]"
    return text + " (no interval: needs >= {} passes a side)".format(MIN_BOOT_N)


def _cores_text(rec: Option) -> str:
    """The cores behind the speedup (issue 46), when the rows recorded them; nothing is
    said otherwise (never 0)."""
    if not math.isfinite(rec.cores_used):
        return ""
    return f"; {rec.cores_used:.2f} CPU cores used (cores_used)"


def _times_text(rec: Option) -> str:
    if not (math.isfinite(rec.setup_s) and math.isfinite(rec.T_group)):
        return ""
    return f"; set-up {rec.setup_s:,.1f} s + T_group {rec.T_group:,.2f} s"


def number_text(value: float, fmt: str, unit: str = "") -> str:
    """``value`` formatted with ``fmt`` and ``unit``; "—" when missing (never 0)."""
    return f"{value:{fmt}}{unit}" if value is not None and math.isfinite(value) else "—"


def _interval(low: float, high: float) -> str:
    return f" [{low:,.0f}, {high:,.0f}]" if math.isfinite(low) and math.isfinite(high) else ""


def _passes_text(passes: tuple[int, int]) -> str:
    low, high = passes
    return f"{low} passes each" if low == high else f"{low}–{high} passes per cell"


def passes_to_separate(x1: float, w1: float, x2: float, w2: float, n: int) -> int | None:
    """Total passes after which intervals of half-widths ``w1``, ``w2`` (at ``n``
    passes) around ``x1``, ``x2`` no longer overlap, the half-widths shrinking as 1/√n
    (module doc); None when the estimates are equal (no number of passes separates
    them). At least ``n + 1``.

    >>> passes_to_separate(2.0, 0.3, 1.8, 0.1, 5)  # (0.4 / 0.2)^2 * 5 = 20 -> 21
    21
    """
    gap = abs(x1 - x2)
    if gap <= 0 or not math.isfinite(gap):
        return None
    need = n * ((w1 + w2) / gap) ** 2
    return max(n + 1, math.floor(need) + 1)


def compare_best(best: Option, second: Option | None,
                 measure: str) -> tuple[bool | None, str, int | None]:
    """The best candidate against the runner-up on ``measure``'s 95 % intervals
    (:mod:`engine.results.advise`, "Distinguishable?"): (told apart — None when it cannot
    be said, the verdict's words, how many more passes would tell them apart or None)."""
    if second is None:
        return None, "only one strategy was measured: nothing to compare it with", None
    n = min(best.n, second.n)
    name = f"{best.label} (K = {best.K}) vs {second.label} (K = {second.K})"
    seq_fixed = measure == "speedup" and second.baseline
    widths = [best.half_width, 0.0 if seq_fixed else second.half_width]
    if not all(math.isfinite(w) for w in widths):
        short = max(0, MIN_BOOT_N - n)
        return None, (f"{name}: no interval with {n} passes (intervals need >= {MIN_BOOT_N} "
                       f"passes a side): run {short} more to tell them apart"), short or None
    low2 = second.score if seq_fixed else second.score_low
    high2 = second.score if seq_fixed else second.score_high
    if best.score_low > high2 or low2 > best.score_high:
        return True, (f"{name}: distinguishable with {n} passes (the 95% intervals do not "
                      f"overlap)"), None
    total = passes_to_separate(best.score, widths[0], second.score, widths[1], n)
    if total is None:
        return False, (f"{name}: not distinguishable with {n} passes, and equal estimates: no "
                       f"number of passes would separate them"), None
    return False, (f"{name}: not distinguishable with {n} passes; about {total - n} more "
                   f"({total} in all) would separate them if the estimates hold (interval "
                   f"half-width shrinking as 1/√n)"), total - n
