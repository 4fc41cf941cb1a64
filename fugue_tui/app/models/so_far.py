"""The run screen's "speedup so far" line: each strategy cell's speedup over seq from the
rows this campaign has written up to now — the same analysis as the Results screen and
``fugue-tui report`` (:func:`engine.results.analysis.speedups`: ratio of mean ``T_group``,
the bootstrap interval once both sides have enough passes; a plain campaign's numbers
without pandas, :mod:`engine.results.light_speedups`) — fitted to one line with the
campaign's ETA (:mod:`fugue_tui.app.models.eta`). Textual-free; :func:`speedup_line` reads
files (call it from a worker).

A stream campaign (``arrivals``) is judged on its jobs' completion times, not on the
makespan (``T_group`` of a stream is mostly its last arrival: a "speedup" of it said ~1×
whatever the strategy): its line is ``p95 job completion so far:`` with each strategy's
mean ``jct_p95_s`` over its passes and that mean's interval, seq's included — the figures
of ``report``'s streams table (:func:`engine.results.stream_report.stream_cells`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.observe.state import CampaignState
from engine.results.derived import BASELINE_EXECUTOR

if TYPE_CHECKING:
    from fugue_tui.app.models.eta import Eta


def speedup_line(runs_dir: Path, campaign: str, n_boot: int = 500) -> str:
    """``speedup so far: D_ens unified_model 1.20× [0.95, 1.51] · …`` for ``campaign``'s
    rows in ``runs_dir`` (empty while no strategy cell has a seq baseline yet)."""
    model = SoFar(runs_dir, campaign)
    parts = model.parts(n_boot)
    return (model.head + " · ".join(" ".join(p) for p in parts)) if parts else ""


#: The strip's head: a batch campaign's speedups, a stream campaign's completion times.
SPEEDUP_HEAD = "speedup so far: "
STREAM_HEAD = "p95 job completion so far: "


class SoFar:
    """The speedups so far of campaign ``campaign`` in the runs folder ``runs_dir``, kept
    up to date incrementally: each :meth:`parts` reads only the group rows appended since
    the previous one (:class:`engine.results.tail.GroupTail`; the folder's other campaigns
    are parsed once, on the first call, and never kept) and reruns the analysis only when
    rows of the campaign arrived. Not thread-safe: one caller at a time (the run header's
    workers take a lock: a superseded one may still be running)."""

    def __init__(self, runs_dir: Path, campaign: str) -> None:
        from engine.results.analysis import speedups  # noqa: F401 (imported once, frozen)
        from engine.results.columns import GROUPS_FILE
        from engine.results.tail import GroupTail
        from fugue_tui.app.models.run import freeze_heap

        freeze_heap("analysis")  # pandas, numpy, pyarrow: out of every full collection
        self.tail = GroupTail(Path(runs_dir) / GROUPS_FILE, campaign)
        self._parts: list[tuple[str, str, str]] = []
        #: Rows arrived that the last answer does not include yet.
        self._dirty = False
        #: What the parts are (:data:`SPEEDUP_HEAD`, or :data:`STREAM_HEAD` once the
        #: campaign's rows are a stream's).
        self.head = SPEEDUP_HEAD

    def parts(self, n_boot: int = 500,
              cancelled: Callable[[], bool] = lambda: False) -> list[tuple[str, str, str]]:
        """Each strategy cell's ``(label, "1.20×", "[0.95, 1.51]")`` (``"1.20× on 1.93
        cores"`` where its rows recorded ``cores_used``; the interval
        ``(n=1/1, no interval yet)`` while a side has too few passes; labels from
        :func:`strip_labels`); empty while no strategy cell has a seq baseline yet. The
        previous answer when no row arrived since, or when ``cancelled()`` turned true
        before the analysis (a newer cell end superseded this one)."""
        from engine.results.analysis import speedups
        from engine.results.light_speedups import light_speedups

        if self.tail.update():
            self._dirty = True
        if not self._dirty or cancelled():
            return self._parts
        if self.tail.any_value("stream_sha256"):
            self.head = STREAM_HEAD
            self._parts, self._dirty = stream_parts(self.tail.runs().groups), False
            return self._parts
        # the plain case (every row ok, uncompiled, fifo: a campaign as the dashboard runs
        # it) in plain Python, ~2 ms; else the whole analysis, ~40 ms of pandas a call
        # (a third of the dashboard's CPU on a long campaign: issue 47, item 2)
        plain = self.tail.plain_rows()
        table = light_speedups(plain, n_boot=n_boot) if plain is not None else None
        if table is None:
            runs = self.tail.runs()
            table = (speedups(runs, n_boot=n_boot).to_dict("records") if len(runs.groups)
                     else [])
        if not table:
            self._parts, self._dirty = [], False
            return self._parts
        rows = []
        for row in table:
            value = row.get("speedup")
            if row["executor"] == BASELINE_EXECUTOR or value is None or not math.isfinite(value):
                continue
            rows.append(row)
        parts = []
        for row, label in zip(rows, strip_labels(rows), strict=True):
            low, high = row.get("ci_low"), row.get("ci_high")
            interval = (f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None
                        and math.isfinite(low) and math.isfinite(high)
                        else f"(n={int(row['n_strategy'])}/{int(row['n_seq'])}, no interval yet)")
            # the cores behind it (issue 46: mp and ray use several, seq one), when recorded
            cores = row.get("cores_used_mean")
            on = (f" on {cores:.2f} cores" if cores is not None and math.isfinite(cores)
                  else "")
            parts.append((label, f"{row['speedup']:.2f}×{on}", interval))
        self._parts, self._dirty = parts, False
        return parts


def stream_parts(groups: Any) -> list[tuple[str, str, str]]:
    """A stream campaign's strip items from its group rows (a ``Runs.groups`` frame): per
    strategy on the stream, seq first, ``(label, "1.53 s", "[1.44, 1.60]")`` — the mean
    ``jct_p95_s`` over its ok passes and the 95 % bootstrap interval of that mean
    (``(n=1, no interval yet)`` with too few passes); the label is the executor, with its
    ``max_parallel`` or configuration where two cells of one executor would look alike.
    Empty while no pass recorded the figure."""
    from engine.results.stream_report import stream_cells

    cells = [c for c in stream_cells(groups)
             if c["figures"]["jct_p95_s"]["mean"] is not None]
    names = [c["executor"] for c in cells]
    parts = []
    for cell, name in zip(cells, names, strict=True):
        if names.count(name) > 1:
            name += (f" max_parallel={cell['max_parallel']}" if cell.get("max_parallel")
                     is not None else f" {cell['config_key'][:8]}")
        figure = cell["figures"]["jct_p95_s"]
        low, high = figure["ci_low"], figure["ci_high"]
        interval = (f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None
                    else f"(n={figure['n']}, no interval yet)")
        parts.append((name, f"{figure['mean']:.2f} s", interval))
    return parts


#: Seconds between two analyses of the strip at most once per this window: cell ends closer
#: together are folded into one (about 30 ms of pandas each, whatever the rows: issue 47,
#: item 2's 5 % bound); short enough that the strip follows each cell end within 5 s.
STRIP_WINDOW_S = 3.0


class Coalesce:
    """At most one analysis per ``window`` seconds of ``clock`` (monotonic): a request
    (:meth:`ask`) while one is pending is folded into it, one within ``window`` of the last
    start waits for the window's end. Textual-free; the run header's timer calls
    :meth:`start` when it runs the analysis."""

    def __init__(self, window: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window = STRIP_WINDOW_S if window is None else window  # None: the module's, now
        self.clock = clock
        self._last = -math.inf
        #: An analysis asked for and not started yet (a later ask is folded into it).
        self.pending = False

    def ask(self) -> float | None:
        """Seconds to wait before the analysis (0: now); None when one is pending already
        (this request is folded into it: it reads every row arrived by then)."""
        if self.pending:
            return None
        self.pending = True
        return max(0.0, self._last + self.window - self.clock())

    def start(self) -> None:
        """The analysis starts now: the next one waits a window from here."""
        self.pending = False
        self._last = self.clock()


def speedup_parts(runs_dir: Path, campaign: str,
                  n_boot: int = 500) -> list[tuple[str, str, str]]:
    """:meth:`SoFar.parts` of a fresh :class:`SoFar` (reads the group file once)."""
    return SoFar(runs_dir, campaign).parts(n_boot)


def _number(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value or "")
    return "" if not math.isfinite(number) else f"{number:g}"


def _text(value: Any) -> str:
    text = "" if value is None else str(value)
    return "" if text == "nan" else text


#: The axes that may tell a strip's cells apart, in the order a label names them: each a
#: function of a speedup row giving the value compared and the words shown.
AXES: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("K", lambda r: f"K={_number(r.get('K'))}" if _number(r.get("K")) else ""),
    ("precision", lambda r: _text(r.get("precision")) or "fp32"),
    ("scheduler", lambda r: _text(r.get("scheduler")) or "fifo"),
    ("device", lambda r: _text(r.get("gpu_name")) or "cpu"),
    ("compile_mode", lambda r: f"compile={_text(r.get('compile_mode')) or 'off'}"),
    ("features", lambda r: _text(r.get("features"))),
    ("mp_start", lambda r: _text(r.get("mp_start"))),
    ("tune_actors", lambda r: _text(r.get("tune_actors"))),
    ("rung", lambda r: f"rung {_text(r.get('rung'))}" if _text(r.get("rung")) else ""),
    ("machine", lambda r: _text(r.get("machine"))),
)


def strip_labels(rows: list[dict[str, Any]]) -> list[str]:
    """A label per speedup row (:func:`engine.results.analysis.speedups`' columns):
    ``exp executor`` and the axes (:data:`AXES`: K, precision, scheduler, device, …) that
    tell cells of the same experiment and executor apart among ``rows`` — a K sweep's
    ``D_ens unified_model K=8`` and ``K=16`` — and nothing else, so an ordinary campaign
    keeps ``D_ens unified_model``. Only the fewest axes that separate the rows are named (in
    :data:`AXES`' order; one that separates nothing the earlier ones left alike is skipped),
    each on every row that has a value for it. Rows still alike (they differ in an option no axis names)
    get every axis with a value."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((_text(row.get("exp_id")), _text(row.get("executor"))), []).append(row)
    differ = [(name, words) for name, words in AXES
              if any(len({words(r) for r in group}) > 1 for group in groups.values())]

    def label(row: dict[str, Any], axes: list[tuple[str, Callable[[dict[str, Any]], str]]]) -> str:
        parts = [_text(row.get("exp_id")), _text(row.get("executor"))]
        return " ".join(parts + [w for w in (words(row) for _, words in axes) if w])

    # The fewest axes that tell the rows apart, in AXES' order: an axis is named only when it
    # separates rows the ones before it left alike. A K sweep's unified_model cells differ in
    # K and, as a consequence, in features (K = 1 does not vectorise): 'K=1' says it all, and
    # the features would push a whole item off an 80-column strip (issue 47, items 4 and 5).
    shown: list[tuple[str, Callable[[dict[str, Any]], str]]] = []
    for axis in differ:
        if len({label(r, shown) for r in rows}) == len(rows):
            break
        if len({label(r, [*shown, axis]) for r in rows}) > len({label(r, shown) for r in rows}):
            shown.append(axis)
    labels = [label(r, shown) for r in rows]
    if len(set(labels)) < len(labels):
        every = [(n, w) for n, w in AXES if n not in ("precision", "scheduler", "device",
                                                      "compile_mode")]
        labels = [label(r, [*shown, *(a for a in every if a not in shown)])
                  if labels.count(labels[i]) > 1 else labels[i] for i, r in enumerate(rows)]
    return labels


def fit_strip(parts: list[tuple[str, str, str]], eta: Eta | None, width: int,
              head: str = SPEEDUP_HEAD) -> str:
    """The run header's strip — each speedup so far and the ETA — in one line of
    ``width`` cells (the header is at most three lines: a strip that wrapped was cut off,
    at 160 columns too). Tries, in order: everything; the ETA without its explanation;
    the speedups without their intervals; without their configuration (experiment and
    executor only); without the cores behind each ratio; as many of those as fit and
    ``+N more (v: results)``. The ETA
    (:meth:`Eta.text <fugue_tui.app.models.eta.Eta.text>`) is kept in each, its spread
    included. ``head``: what the items are (:data:`SPEEDUP_HEAD`, :data:`STREAM_HEAD`);
    the shortest forms say ``so far:``."""
    eta_long = eta.text(long=True) if eta is not None else ""
    eta_short = eta.text(long=False) if eta is not None else ""
    full = [" ".join(p) for p in parts]
    bare = [f"{label} {value}" for label, value, _ in parts]
    # the experiment and executor only (a configuration such as vf:1,s:0,fl:0 dropped),
    # unless that would leave two items alike (a K sweep's K=8 and K=16: issue 47, item 4)
    heads = [" ".join(label.split()[:2]) for label, _, _ in parts]
    short = [f"{head if heads.count(head) == 1 else label} {value}"
             for head, (label, value, _) in zip(heads, parts, strict=True)]

    # the ratio alone (" on 0.91 cores" dropped): at 80 columns a whole item or two fit
    tiny = [f"{head if heads.count(head) == 1 else label} {value.split(' on ', 1)[0]}"
            for head, (label, value, _) in zip(heads, parts, strict=True)]

    # the short forms keep what the numbers are: a stream's are p95 completion times
    short_head = "p95 so far: " if head == STREAM_HEAD else "so far: "

    def line(head: str, items: list[str], tail: str) -> str:
        body = (head + " · ".join(items)) if items else ""
        return " · ".join(p for p in (body, tail) if p)

    for first, items, tail in ((head, full, eta_long),
                               (head, full, eta_short),
                               (head, bare, eta_short),
                               (short_head, bare, eta_short),
                               (short_head, short, eta_short),
                               (short_head, tiny, eta_short)):
        text = line(first, items, tail)
        if len(text) <= width:
            return text
    for shown in range(len(tiny) - 1, -1, -1):
        more = f"+{len(tiny) - shown} more (v: results)"
        text = line(short_head, [*tiny[:shown], more], eta_short)
        if len(text) <= width or shown == 0:
            return text if len(text) <= width else text[: max(0, width - 1)] + "…"
    return line("", [], eta_short)


def comparable(state: CampaignState) -> bool:
    """Whether some experiment has a finished seq cell and a finished cell of another
    executor: only then can a speedup exist (loading the rows and the analysis, pandas
    included, cost a dashboard about a second of CPU: not for nothing)."""
    from fugue_tui.app.models.cells import split_label

    seen: dict[str, set[str]] = {}
    for cell in state.cells.values():
        if cell.state == "done":
            exp, executor, _, _ = split_label(cell.label)
            seen.setdefault(exp, set()).add(executor)
    return any(BASELINE_EXECUTOR in executors and len(executors) > 1 for executors in seen.values())
