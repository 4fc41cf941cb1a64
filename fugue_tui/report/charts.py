"""Terminal charts as strings: the only module that imports plotext.

Every function builds a chart with plotext's figure API and returns ``figure.build()``
as text: nothing is printed, the terminal is neither queried nor cleared (plotext's
terminal-size limit is switched off, every chart gets an explicit size). plotext keeps
one global figure; each call clears it first, so calls do not leak into each other
(not thread-safe: call from one thread, as the report and the dashboard do).

Colour: ``color=None`` (the default) means colour unless the ``NO_COLOR`` environment
variable is set (https://no-color.org); ``color=False`` gives plain text (the
``colorless`` theme and no escape sequences) for files, pipes and tests.

Missing values (None or NaN) are never drawn, and never as 0: :func:`bar_chart` and
:func:`speedup_chart` leave their bars out and list their labels on a ``missing:`` line
under the chart; :func:`line_chart` drops the points.

What needs no plotext is beside it: the points (:mod:`.points`), the axis ticks
(:mod:`.ticks`), the speedup chart's bars (:mod:`.speedup_bars`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import plotext as plt

from fugue_tui.report.points import downsample, is_missing, step_points
from fugue_tui.report.ticks import nice_ticks

MISSING_PREFIX = "missing: "
#: Columns plotext needs besides the plot area (tick labels, frame), roughly.
_FRAME = 12
#: The most bars one terminal chart draws. plotext's cost grows with the bars (about 1.3 s
#: for 750 bars on the 2-core reference VM, bench part ``results_scale``) and a chart of
#: 1 500 lines is not read anyway; the tables list every cell and ``report --export``
#: (matplotlib) draws them all.
MAX_BARS = 100
MORE_PREFIX = "… "


def _use_color(color: bool | None) -> bool:
    if color is None:
        return "NO_COLOR" not in os.environ
    return bool(color)


def _figure(width: int, height: int, title: str | None, color: bool):
    plt.terminal.limit(False, False)  # the size we ask for, whatever the terminal is
    fig = plt.figure
    fig.clear.all()
    fig.plot_size(max(20, int(width)), max(5, int(height)))
    fig.theme("default" if color else "colorless")
    if title:
        fig.title(title)
    return fig


def _render(fig, color: bool) -> str:
    text = fig.build().string(colorless=not color)
    return "\n".join(line.rstrip() for line in text.splitlines())


def _fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def bar_chart(labels: Sequence[str], values: Sequence[float | None], title: str | None = None,
              width: int = 80, height: int | None = None,
              errors: Sequence[tuple[float, float] | None] | None = None,
              color: bool | None = None, reference: float | None = None,
              value_labels: Sequence[str] | None = None, max_bars: int | None = MAX_BARS
              ) -> str:
    """Horizontal bars, one per label, as text.

    ``errors``: an optional ``(low, high)`` interval per bar (None or NaN bounds: none),
    drawn as a line across the bar's row. ``reference``: a vertical line at that value
    (e.g. 1 for speedups). ``value_labels``: the text written inside each bar (default
    the value, plus the interval when there is one). Bars whose value is missing are left
    out and their labels listed on a final ``missing: a, b`` line. Empty ``value_labels``
    write nothing in the bars. More than ``max_bars`` bars (None: no limit): only the top
    ``max_bars`` are drawn (plotext draws the first bar at the bottom, so these are the
    LAST ``max_bars`` of the sequences) and a ``… N more bars not drawn`` line says so.
    """
    use_color = _use_color(color)
    drawn = [i for i, v in enumerate(values) if not is_missing(v)]
    hidden = 0
    if max_bars is not None and len(drawn) > max_bars:
        hidden, drawn = len(drawn) - max_bars, drawn[-max_bars:]
    missing = [str(labels[i]) for i, v in enumerate(values) if is_missing(v)]
    lines: list[str] = []
    if drawn:
        rows_per_bar = 3 if len(drawn) <= 10 else 2
        height = height or rows_per_bar * len(drawn) + 4
        fig = _figure(width, height, title, use_color)
        names = [str(labels[i]) for i in drawn]
        heights = [float(values[i]) for i in drawn]
        intervals = [_interval(errors[i]) if errors is not None else None for i in drawn]
        if value_labels is not None:
            inside = [str(value_labels[i]) for i in drawn]
        else:
            inside = [_fmt(h) for h in heights]
        fig.draw(fig.bar(names, heights, orientation="horizontal", width=0.5,
                         labeled=inside if any(inside) else False))
        for position, interval in enumerate(intervals, start=1):
            if interval:  # the interval: a line across the bar's row
                fig.draw(fig.segment(interval, (position, position)))
        if reference is not None:  # a vertical segment through every row
            fig.draw(fig.segment((float(reference), float(reference)), (0.5, len(drawn) + 0.5)))
        # Explicit x range from 0: plotext 6.1 gets the range of horizontal bars wrong.
        ends = heights + [e[1] for e in intervals if e] + ([float(reference)] if reference
                                                            is not None else [])
        starts = heights + [e[0] for e in intervals if e]
        low = min(0.0, min(starts))
        high = max(ends)
        high += 0.05 * ((high - low) or 1.0)
        fig.ruler("x").lim(low, high)
        # round ticks in plain decimals: plotext wrote 4.8e2 and uneven steps of its own
        columns = max(1, int(width) - max(len(n) for n in names) - 4)
        ticks, tick_labels = nice_ticks(low, high, max(2, min(6, columns // 8)))
        fig.ruler("x").ticks(ticks, tick_labels)
        lines.append(_render(fig, use_color))
    elif title:
        lines.append(title)
    if hidden:
        lines.append(f"{MORE_PREFIX}{hidden} more bars not drawn (a terminal chart draws at most "
                     f"{max_bars}; the table lists every cell, report --export draws them all)")
    if missing:
        lines.append(MISSING_PREFIX + ", ".join(missing))
    if not drawn and not missing:
        lines.append("(nothing to draw)")
    return "\n".join(lines)


def _interval(error: tuple[float, float] | None) -> tuple[float, float] | None:
    if error is None:
        return None
    low, high = error
    if is_missing(low) or is_missing(high):
        return None
    return float(low), float(high)


def line_chart(xs: Sequence[float], series: Mapping[str, Sequence[float]], title: str | None = None,
               width: int = 80, height: int = 15, color: bool | None = None,
               xlabel: str | None = None, ylabel: str | None = None) -> str:
    """One line per entry of ``series`` (name → y values over ``xs``), as text.

    Long series are reduced with :func:`downsample` to two points per character column of
    the plot area (about ``width - 12`` columns), which is all the terminal can show.
    """
    use_color = _use_color(color)
    fig = _figure(width, height, title, use_color)
    columns = max(1, int(width) - _FRAME)
    drawn = 0
    for name, ys in series.items():
        x, y = downsample(xs, ys, columns)
        if len(y):
            fig.draw(fig.signal(x.tolist(), y.tolist()).label(str(name)))
            drawn += 1
    if xlabel:
        fig.label(xlabel, axis="x")
    if ylabel:
        fig.label(ylabel, axis="y")
    if not drawn:
        return (title + "\n" if title else "") + "(nothing to draw)"
    return _render(fig, use_color)


def speedup_chart(speedup_df, width: int = 80, color: bool | None = None,
                  title: str | None = None) -> str:
    """Bars of the speedups in ``speedup_df`` (:func:`engine.results.analysis.speedups`), grouped
    by experiment then executor, with the bootstrap interval where there is one and a line
    at 1. seq rows (1 by definition) are not drawn; cells without a seq baseline (NaN) are
    listed as missing, never drawn as 0. Several machines: labels start with the machine.
    Below :func:`speedup_chart_width` plotext drops the title and labels: callers check
    it first (``report --width 40`` prints the tables only and says so). ``title``:
    default :data:`fugue_tui.report.speedup_bars.SPEEDUP_TITLE`.
    """
    # Imported here: the bars need pandas and the engine's baseline, the dashboard's
    # charts (metric_panels, timeline_chart) neither.
    from engine.results.derived import BASELINE_EXECUTOR
    from fugue_tui.report.speedup_bars import SPEEDUP_TITLE, speedup_bars

    bars = speedup_bars(speedup_df)
    if bars is None:
        return f"(no speedups to draw: only {BASELINE_EXECUTOR} rows)"
    labels, values, errors = bars
    return bar_chart(labels, values, title=title or SPEEDUP_TITLE, width=width, errors=errors,
                     color=color,
                     reference=1.0, value_labels=[""] * len(values))


def metric_panels(xs: Sequence[float], panels: Sequence[tuple[str, Sequence[float | None]]],
                  width: int = 60, height: int = 18, color: bool | None = None,
                  latest: str = "now") -> str:
    """Small line charts stacked vertically, one per ``(title, values)`` panel, sharing
    ``xs`` (seconds from the first point are drawn, from 0, so the axis reads "last N s";
    one point alone is drawn at 0 of a 0..1 s axis, never on a negative one). Each title
    gets the latest value, said with ``latest`` (``now 42.0`` while the cell runs, ``last``
    once it ended). Axes carry round ticks in plain decimals (:func:`nice_ticks`). Missing
    values (None, NaN) are dropped, never drawn as 0; a panel with none left says so on one
    line. ``height`` is shared among the panels (each at least 5 rows)."""
    if not panels:
        return "(nothing to draw)"
    each = max(5, int(height) // len(panels))
    start = float(xs[0]) if len(xs) else 0.0
    rel = [float(x) - start for x in xs]
    span = max(rel[-1] if rel else 0.0, 1.0)
    out = []
    for title, values in panels:
        ys = [float("nan") if is_missing(v) else float(v) for v in values]
        finite = [y for y in ys if math.isfinite(y)]
        value = next((y for y in reversed(ys) if math.isfinite(y)), None)
        head = f"{title}  {latest} {_fmt(value)}" if value is not None else f"{title}  (no data)"
        if value is None:
            out.append(head)
            continue
        use_color = _use_color(color)
        fig = _figure(width, each, head, use_color)
        x, y = downsample(rel, ys, max(1, int(width) - _FRAME))
        fig.draw(fig.signal(x.tolist(), y.tolist(), marker="braille").lines())
        low, high = min(finite), max(finite)
        if high - low < 1e-9 * max(1.0, abs(high)):  # a flat line: a band around it
            pad = max(abs(high) * 0.05, 1.0)
            low, high = low - pad, high + pad
        rows = max(2, each - 3)  # the plot area's rows (title and x axis take three)
        ticks, labels = nice_ticks(low, high, 2 if rows < 4 else 3, cover=True)
        low, high = min(low, ticks[0]), max(high, ticks[-1])
        fig.ruler("y").lim(low, high)
        fig.ruler("y").ticks(ticks, labels)
        columns = max(1, int(width) - _FRAME)
        ticks, labels = nice_ticks(0.0, span, max(2, min(6, columns // 8)))
        fig.ruler("x").lim(0.0, span)
        fig.ruler("x").ticks(ticks, [f"{t}s" for t in labels])
        out.append(_render(fig, use_color))
    return "\n".join(out)


def figure_chart(figure, width: int = 80, color: bool | None = None) -> str:
    """A :class:`fugue_tui.report.figures.Figure` as horizontal bars, in its order from the top:
    each label ends with the value as the tables print it (interval included), the
    interval is drawn across the bar, the reference line (1 for ratios) is drawn, and bars
    whose value is missing are listed on the ``missing:`` line, never drawn as 0. The
    figure's note is the last line."""
    bars = list(figure.bars)
    if not bars:
        return f"{figure.title}\n(no rows for this figure)"
    labels = [b.label if b.value is None else f"{b.label} {b.text}" for b in bars]
    legend: list[str] = []
    drawn = [i for i, b in enumerate(bars) if b.value is not None]
    if drawn and max(len(labels[i]) for i in drawn) > width * 0.45:
        # Labels wider than half the chart left the bars a few columns (80-column
        # terminals): number the bars and write each label in full under the chart.
        digits = len(str(len(bars)))
        for n, i in enumerate(drawn, start=1):
            legend.append(f"{n:>{digits}}  {labels[i]}")
            labels[i] = f"{n:>{digits}}"
    values = [b.value for b in bars]
    errors = [(b.low, b.high) if b.low is not None and b.high is not None else None
              for b in bars]
    # plotext draws the first bar at the bottom: reverse so the order reads downwards.
    text = bar_chart(labels[::-1], values[::-1], title=figure.title, width=width,
                     errors=errors[::-1], color=color, reference=figure.reference,
                     value_labels=[""] * len(bars))
    if figure.missing:  # bar_chart lists them bottom-up; list them in the figure's order
        head = [line for line in text.splitlines() if not line.startswith(MISSING_PREFIX)]
        text = "\n".join(head + legend + [MISSING_PREFIX + ", ".join(figure.missing)])
    elif legend:
        text = "\n".join([text] + legend)
    return text + ("\n" + figure.note if figure.note else "")


#: Markers of the curves of :func:`knee_chart`, one per strategy (colourless-safe).
_CURVE_MARKERS = ("o", "x", "+", "*", "#", "%", "@", "&")
#: The knee's marker.
KNEE_MARKER = "◆"


def knee_chart(series: Sequence[tuple[str, Sequence[int], Sequence[float], int | None]],
               title: str | None = None, width: int = 80, height: int = 16,
               color: bool | None = None, ylabel: str = "samples/s") -> str:
    """Throughput against K on a log2 axis, one line per ``(label, ks, values, knee)``
    (a K sweep's curves, :mod:`engine.results.knee`), each knee marked with
    :data:`KNEE_MARKER` and labelled ``knee K=8``. Missing values (None, NaN) are
    dropped, never drawn as 0. A key line under the chart names each curve's marker and
    knee (no legend box over the lines)."""
    use_color = _use_color(color)
    fig = _figure(width, height, title, use_color)
    ks_all = sorted({int(k) for _, ks, _, _ in series for k in ks})
    if not ks_all:
        return (title + "\n" if title else "") + "(nothing to draw)"
    key, top = [], 0.0
    for i, (label, ks, values, knee) in enumerate(series):
        points = [(math.log2(int(k)), float(v)) for k, v in zip(ks, values, strict=True)
                  if not is_missing(v) and int(k) > 0]
        if not points:
            key.append(f"{label}: nothing measured")
            continue
        marker = _CURVE_MARKERS[i % len(_CURVE_MARKERS)]
        xs, ys = zip(*points, strict=True)
        top = max(top, *ys)
        fig.draw(fig.signal(list(xs), list(ys), marker=marker).lines())
        at = dict(zip(ks, values, strict=True)).get(knee) if knee is not None else None
        if at is not None and not is_missing(at):
            fig.draw(fig.signal([math.log2(knee)], [float(at)], marker=KNEE_MARKER))
        key.append(f"{marker} {label}: " + (f"knee K={knee}" if knee is not None
                                             else "no knee in the sweep"))
    positions = [math.log2(k) for k in ks_all]
    fig.ruler("x").ticks(positions, [str(k) for k in ks_all])
    if len(positions) > 1:
        fig.ruler("x").lim(positions[0] - 0.1, positions[-1] + 0.1)
    # plain round numbers (plotext's own labels turn to 4.5e5 above 99,999 samples/s)
    ticks, labels = nice_ticks(0.0, top * 1.08 or 1.0, max(3, min(6, (height - 4) // 2)),
                               cover=True)
    fig.ruler("y").lim(0.0, ticks[-1])
    fig.ruler("y").ticks(ticks, labels)
    fig.label("K (models at once, log2 axis)", axis="x")
    if ylabel:
        fig.label(ylabel, axis="y")
    return _render(fig, use_color) + "\n" + f"{KNEE_MARKER} knee   " + "   ".join(key)


#: Marks where an hpo cell's time to best falls on its best-so-far curve.
BEST_MARKER = "★"


def best_so_far_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]],
                                             float | None, float | None]],
                      title: str | None = None, width: int = 80, height: int = 16,
                      color: bool | None = None, ylabel: str = "best val_loss") -> str:
    """Best-so-far validation metric against seconds since the group window opened, one
    step line per ``(label, curve, time_to_best_s, end_s)`` (issue 25: an hpo cell's
    representative pass, :mod:`engine.results.hpo_curves`), each time to best marked
    with :data:`BEST_MARKER`. A series without a curve is named on the key line as
    "nothing validated", never drawn as 0."""
    use_color = _use_color(color)
    fig = _figure(width, height, title, use_color)
    key = []
    drawn = False
    for i, (label, curve, ttb, end) in enumerate(series):
        xs, ys = step_points(curve, end)
        if not xs:
            key.append(f"{label}: nothing validated")
            continue
        marker = _CURVE_MARKERS[i % len(_CURVE_MARKERS)]
        fig.draw(fig.signal(xs, ys, marker=marker).lines())
        drawn = True
        text = f"{marker} {label}"
        if ttb is not None and not is_missing(ttb):
            # the curve's value at the time to best: the step holding then
            at = next((v for t, v in reversed(list(curve)) if t <= ttb + 1e-12), curve[0][1])
            fig.draw(fig.signal([float(ttb)], [float(at)], marker=BEST_MARKER))
            text += f": best known at {ttb:.2f} s"
        key.append(text)
    if not drawn:
        return (title + "\n" if title else "") + "(nothing to draw)\n" + "   ".join(key)
    fig.label("seconds since the group window opened", axis="x")
    if ylabel:
        fig.label(ylabel, axis="y")
    return _render(fig, use_color) + "\n" + f"{BEST_MARKER} time to best   " + "   ".join(key)


def timeline_chart(span: float, panels: Sequence[tuple[str, Sequence[float], Sequence[float]]],
                   marks: Sequence[tuple[float, str]], width: int = 80, height: int = 12,
                   color: bool | None = None, latest: str = "now") -> str:
    """Stacked line charts over one shared time axis of ``span`` seconds (from 0): each
    panel ``(title, xs, ys)`` (xs in seconds from 0; NaN ys are gaps, never 0), with a
    dotted vertical line at each ``(x, label)`` of ``marks`` (cell starts and ends) and the
    non-empty labels written at the top of the first panel. A panel whose ys are all
    missing is one line, ``title: not measured``. Each title gets the latest value, said
    with ``latest``. ``height`` is shared among the drawn panels (each at least 5 rows)."""
    drawn = [p for p in panels if any(math.isfinite(y) for y in p[2])]
    out = [f"{title}: not measured" for title, _, ys in panels
           if not any(math.isfinite(y) for y in ys)]
    if not drawn:
        return "\n".join(out) or "(nothing to draw)"
    each = max(5, int(height) // len(drawn))
    span = max(float(span), 1.0)
    use_color = _use_color(color)
    columns = max(1, int(width) - _FRAME)
    charts = []
    for n, (title, xs, ys) in enumerate(drawn):
        finite = [y for y in ys if math.isfinite(y)]
        value = next(y for y in reversed(list(ys)) if math.isfinite(y))
        fig = _figure(width, each, f"{title}  {latest} {_fmt(value)}", use_color)
        x, y = downsample(xs, ys, columns)
        fig.draw(fig.signal(x.tolist(), y.tolist(), marker="braille").lines())
        low, high = min(0.0, min(finite)), max(finite)  # utilisation and memory from 0
        if high - low < 1e-9 * max(1.0, abs(high)):
            high = low + max(abs(high) * 0.1, 1.0)
        ticks, labels = nice_ticks(low, high, 2 if each < 7 else 3, cover=True)
        low, high = min(low, ticks[0]), max(high, ticks[-1])
        for at, label in marks:
            if 0.0 <= at <= span:
                fig.line(at, orientation="v", style="dotted")
                if n == 0 and label:
                    fig.draw(fig.text(at, high, label))
        fig.ruler("y").lim(low, high)
        fig.ruler("y").ticks(ticks, labels)
        fig.ruler("x").lim(0.0, span)
        xt, xl = nice_ticks(0.0, span, max(2, min(6, columns // 8)))
        fig.ruler("x").ticks(xt, [f"{t}s" for t in xl])
        charts.append(_render(fig, use_color))
    return "\n".join(charts + out)


#: The stream jobs chart's marks (:func:`jobs_chart`): what each means is said on the key
#: line under the chart (:data:`JOB_KEY`).
ARRIVAL_MARK, QUEUED_MARK, BAR_MARK, FAILED_MARK = "◆", "┄", "━", "✗"
#: The key line of :func:`jobs_chart`, and its short form for a narrow pane.
JOB_KEY = (f"{ARRIVAL_MARK} arrival  {QUEUED_MARK} queued  {BAR_MARK} admitted → completed  "
           f"{FAILED_MARK} failed")
JOB_KEY_SHORT = (f"{ARRIVAL_MARK} arrival {QUEUED_MARK} queued {BAR_MARK} admitted→done "
                 f"{FAILED_MARK} failed")
_JOB_COLORS = {ARRIVAL_MARK: "magenta", QUEUED_MARK: "gray", BAR_MARK: "blue",
               FAILED_MARK: "red"}


def jobs_chart(span: float, jobs: Sequence[tuple[int, float, float | None, float, bool]],
               lanes: int, marks: Sequence[tuple[float, str]], title: str, width: int = 80,
               height: int = 8, color: bool | None = None) -> str:
    """A stream's jobs on the timeline's axis of ``span`` seconds (from 0), one
    ``(lane, arrival, admitted, end, failed)`` each (seconds from 0; ``admitted`` None: not
    admitted; ``end``: its completion, or where its marks stop while it runs or waits): on
    its lane (0 at the top, ``lanes`` in all) a :data:`ARRIVAL_MARK` at its arrival,
    :data:`QUEUED_MARK` from there to its admission (the queueing delay), a :data:`BAR_MARK`
    bar from its admission to ``end``, and :data:`FAILED_MARK` there when it failed; a
    dotted line at each ``(x, label)`` of ``marks`` (cell starts and ends, as
    :func:`timeline_chart`). The lane axis has no ticks: a lane is a place, not a quantity.
    Each kind of mark is one plotext signal of points two per column (a stream of
    thousands of jobs costs what a few signals cost, not a signal per job)."""
    use_color = _use_color(color)
    span = max(float(span), 1.0)
    fig = _figure(width, max(5, int(height)), title, use_color)
    columns = max(1, int(width) - _FRAME)
    step = span / columns / 2
    points: dict[str, tuple[list[float], list[float]]] = {
        m: ([], []) for m in (QUEUED_MARK, BAR_MARK, FAILED_MARK, ARRIVAL_MARK)}

    def run(symbol: str, start: float, end: float, y: float) -> None:
        n = max(1, int((end - start) / step)) + 1
        xs, ys = points[symbol]
        xs.extend(start + (end - start) * i / (n - 1) if n > 1 else start for i in range(n))
        ys.extend([y] * n)

    for lane, arrival, admitted, end, failed in jobs:
        y = float(lanes - lane)  # plotext's y grows upwards: lane 0 on top
        waited_until = end if admitted is None else admitted
        if waited_until > arrival:
            run(QUEUED_MARK, arrival, waited_until, y)
        if admitted is not None:
            run(BAR_MARK, admitted, max(admitted, end), y)
            if failed:
                points[FAILED_MARK][0].append(end)
                points[FAILED_MARK][1].append(y)
        points[ARRIVAL_MARK][0].append(arrival)
        points[ARRIVAL_MARK][1].append(y)
    for at, _ in marks:
        if 0.0 <= at <= span:
            fig.line(at, orientation="v", style="dotted")
    for symbol, (xs, ys) in points.items():  # later kinds drawn over earlier ones
        if xs:
            fig.draw(fig.signal(xs, ys, marker=plt.marker(symbol, pixel=_JOB_COLORS[symbol])
                                if use_color else symbol))
    fig.ruler("y").lim(0.5, max(1, lanes) + 0.5)
    fig.ruler("y").ticks([], [])
    fig.ruler("x").lim(0.0, span)
    xt, xl = nice_ticks(0.0, span, max(2, min(6, columns // 8)))
    fig.ruler("x").ticks(xt, [f"{t}s" for t in xl])
    return _render(fig, use_color)
