"""K sweeps and advice as the report and the dashboard show them (issue 23): the
throughput-vs-K chart of each workload with its knees marked, a table per curve, the
advice lines, and the export (``knee.png`` / ``knee.svg`` figure, ``knee.csv`` table).

The numbers come from :mod:`engine.results.knee` and :mod:`engine.results.advise` (pure
functions of the rows); this module only lays them out. A value that was not measured is
"—", never 0.
"""

from __future__ import annotations

import csv
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from fugue_tui.format import MISSING, fmt_number

#: The files an export of the sweeps owns (the figure per image format, the table).
KNEE_FIGURE = "knee"
KNEE_TABLE = "knee.csv"


@dataclass
class SweepView:
    """What the report and the Results screen draw: the curves (grouped per workload and
    machine, in load order), the advice, and per stream its advice (``streams``: the
    dicts of :func:`engine.results.stream_advice.stream_advice`, issue 52)."""

    curves: list[Any] = field(default_factory=list)
    advice: list[Any] = field(default_factory=list)
    fraction: float = 0.10
    streams: list[dict[str, Any]] = field(default_factory=list)

    def workloads(self) -> list[tuple[str, list[Any]]]:
        """``(title, curves)`` per workload and machine."""
        out: dict[str, list[Any]] = {}
        for curve in self.curves:
            machine = curve.provenance.get("machine") or "unknown machine"
            gpu = curve.provenance.get("gpu_name") or "no GPU"
            out.setdefault(f"{curve.exp_id} on {machine} · {gpu}", []).append(curve)
        return list(out.items())


def analyse(runs: Any, fraction: float = 0.10, advise: bool = True, n_boot: int = 2000,
            by_campaign: bool = False, per_core: bool = False) -> SweepView:
    """The curves and (with ``advise``) the advice of ``runs``, the batch's and each
    stream's (``per_core``: the batch advice ranked by speedup per core, ``report --advise
    --per-core``)."""
    from engine.results.advise import advise as advise_rows
    from engine.results.knee import curves
    from engine.results.stream_advice import stream_advice

    # a stream's cells are no K sweep and no batch: their advice is stream_advice's (the
    # batch advice recommended "seq (K = 10)" beside the stream advice's "ray")
    batch = runs.batch_only()
    found = curves(batch, fraction=fraction, by_campaign=by_campaign, n_boot=n_boot)
    advice = advise_rows(batch, fraction=fraction, by_campaign=by_campaign,
                         n_boot=n_boot, per_core=per_core) if advise else []
    streams = stream_advice(runs.groups, by_campaign) if advise else []
    return SweepView(found, advice, fraction, streams)


def charts(view: SweepView, width: int = 80, color: bool | None = None) -> list[str]:
    """One terminal chart per workload: each strategy's throughput against K, knees
    marked (:func:`fugue_tui.report.charts.knee_chart`)."""
    from fugue_tui.report.charts import knee_chart

    out = []
    for title, group in view.workloads():
        metric = "train samples/s" if all(c.metric == "train_throughput_sps" for c in group) \
            else "samples/s"
        series = [(c.label, c.ks, [p.throughput for p in c.points], c.knee) for c in group]
        out.append(knee_chart(series, title=f"{title}: training throughput vs K", width=width,
                              color=color, ylabel=metric))
    return out


def curve_table(curve: Any, width: int | None = None) -> Table:
    """One curve as a Rich table: K, passes, throughput [interval], gain per doubling,
    energy per model, peak memory, T_group, and the knee / best marks. Headers are on one
    line where the table then fits in ``width`` (None: always), else in the two-line
    shape an 80-column terminal needs (``report --width 160`` drew the 80-column shape)."""
    table = _curve_table(curve, wide=True)
    if width is not None and _natural_width(table) > width:
        table = _curve_table(curve, wide=False)
    return table


def _natural_width(table: Table) -> int:
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(width=100_000, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def _curve_table(curve: Any, wide: bool) -> Table:
    from engine.results.knee import curve_table as frame_of

    mem = "VRAM MiB" if curve.mem_metric == "vram_peak_mb" else "RSS MiB"
    table = Table(title=f"{curve.exp_id} {curve.label}: knee {curve.knee_text}; best K = "
                        f"{curve.best_k}", title_justify="left")
    gain = "gain / doubling" if wide else "gain /\ndoubling"
    for name in ("K", "n", "samples/s", "95% CI", gain, "J/model", mem, "T_group s", ""):
        table.add_column(name, justify="left" if name in ("", "95% CI") else "right",
                         no_wrap=wide)
    for row in frame_of(curve).to_dict("records"):
        interval = (f"[{row['low']:,.0f}, {row['high']:,.0f}]"
                    if math.isfinite(row["low"]) else "n/a")
        gain_value = row["gain_per_doubling"]
        table.add_row(str(row["K"]), str(row["n"]), fmt_number(row["throughput"], ",.0f"),
                      interval, f"{gain_value:+.0%}" if math.isfinite(gain_value) else MISSING,
                      fmt_number(row["energy_per_model_j"], ",.1f"),
                      fmt_number(row["mem_peak_mb"], ",.0f"),
                      fmt_number(row["T_group_mean"], ".2f"), row["mark"])
    return table


def rule_lines(view: SweepView) -> list[str]:
    """How the knee is defined, once under the sweeps."""
    return [f"knee = the smallest K from which the throughput gain per doubling of K, to "
            f"every larger K of the sweep, is below {view.fraction:.0%} (gain per doubling = "
            f"(X(K2)/X(K1))^(1/log2(K2/K1)) - 1); change it with --knee-fraction. Intervals: "
            f"percentile bootstrap, only with >= 5 passes at every K."]


def print_sweeps(view: SweepView, console: Any, width: int = 80,
                 color: bool | None = None) -> None:
    """The charts, then a table per curve, then the rule (nothing without a sweep)."""
    if not view.curves:
        return
    for chart in charts(view, width=width, color=color):
        console.print(Text.from_ansi(chart) if color else Text(chart))
    for curve in view.curves:
        console.print(curve_table(curve, width=width))
    for line in rule_lines(view):
        console.print(Text(line))


def advice_lines(view: SweepView) -> list[str]:
    """The advice of every workload, then per stream the strategy with the lowest p95 job
    completion time (issue 52, :mod:`engine.results.stream_advice`'s ``text``), as text
    lines (a blank line between them); "no advice" only where there is neither."""
    out: list[str] = []
    for advice in view.advice:
        if out:
            out.append("")
        out.extend(advice.lines())
    for stream in view.streams:
        if out:
            out.append("")
        out.extend(stream["text"].splitlines())
    if not out:
        out.append("no advice: no ok row to compare")
    return out


def print_advice(view: SweepView, console: Any) -> None:
    """The advice section (:func:`advice_lines`)."""
    console.print(Text("advice (fugue-tui report --advise)", style="bold"))
    for line in advice_lines(view):
        console.print(Text(line), soft_wrap=True)


def planned_files(formats: list[str]) -> list[str]:
    """The files :func:`export_sweeps` owns for ``formats`` (known before reading)."""
    return [f"{KNEE_FIGURE}.{f}" for f in ("png", "svg") if f in formats] + [KNEE_TABLE]


def export_sweeps(view: SweepView, out: Path, formats: list[str]) -> list[Path]:
    """Write the sweeps' figure (``knee.png`` / ``knee.svg``: one panel per workload,
    throughput against K on a log2 axis, knees marked, intervals as error bars) and table
    (``knee.csv``: one row per curve and K); nothing without a sweep. Returns the paths."""
    if not view.curves:
        return []
    from engine.results.knee import curve_table as frame_of

    written = []
    path = out / KNEE_TABLE
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["machine", "gpu_name", "exp_id", "strategy", "metric", "K", "n",
                         "throughput", "low", "high", "gain_per_doubling",
                         "energy_per_model_j", "mem_peak_mb", "mem_metric", "T_group_mean",
                         "mark", "knee", "knee_fraction", "best_k"])
        for curve in view.curves:
            for row in frame_of(curve).to_dict("records"):
                writer.writerow([curve.provenance.get("machine", ""),
                                 curve.provenance.get("gpu_name", ""), curve.exp_id,
                                 curve.label, curve.metric, row["K"], row["n"]]
                                + [_csv(row[c]) for c in ("throughput", "low", "high",
                                                          "gain_per_doubling",
                                                          "energy_per_model_j",
                                                          "mem_peak_mb")]
                                + [curve.mem_metric, _csv(row["T_group_mean"]), row["mark"],
                                   "" if curve.knee is None else curve.knee, curve.fraction,
                                   curve.best_k])
    written.append(path)
    for fmt in ("png", "svg"):
        if fmt in formats:
            written.append(_figure(view, out / f"{KNEE_FIGURE}.{fmt}", fmt))
    return written


def _csv(value: float) -> str:
    """Missing stays empty in the table, never 0."""
    return "" if value is None or not math.isfinite(value) else repr(float(value))


def _figure(view: SweepView, path: Path, fmt: str) -> Path:
    from fugue_tui.report.export import _pyplot

    plt = _pyplot()
    groups = view.workloads()
    fig, axes = plt.subplots(len(groups), 1, figsize=(8.0, 3.6 * len(groups)),
                             layout="constrained", squeeze=False)
    try:
        for ax, (title, group) in zip(axes[:, 0], groups, strict=True):
            for curve in group:
                ks = curve.ks
                ys = [p.throughput for p in curve.points]
                lows = [p.throughput - p.low if math.isfinite(p.low) else 0 for p in curve.points]
                highs = [p.high - p.throughput if math.isfinite(p.high) else 0
                         for p in curve.points]
                line = ax.errorbar(ks, ys, yerr=[lows, highs], marker="o", capsize=3,
                                   label=curve.label)
                if curve.knee is not None:
                    at = curve.point(curve.knee).throughput
                    ax.plot([curve.knee], [at], marker="D", markersize=10, color="#c44e52",
                            zorder=5)
                    ax.annotate(f"knee K={curve.knee}", (curve.knee, at),
                                textcoords="offset points", xytext=(6, -14), fontsize=8,
                                color=line[0].get_color())
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({k for c in group for k in c.ks}),
                          [str(k) for k in sorted({k for c in group for k in c.ks})])
            ax.set_ylim(bottom=0)
            ax.set_xlabel("K (models trained at once)")
            ax.set_ylabel("training samples/s")
            ax.set_title("\n".join(textwrap.wrap(title + ": throughput vs K", 80)),
                         fontsize=10)
            ax.legend(fontsize=8)
        fig.text(0.01, 0.0, textwrap.fill(rule_lines(view)[0], 130), fontsize=6,
                 va="bottom", ha="left")
        fig.get_layout_engine().set(rect=(0, 0.05, 1, 0.95))
        metadata = {"Date": None} if fmt == "svg" else {"Software": "fugue-tui"}
        fig.savefig(path, format=fmt, metadata=metadata, dpi=120)
    finally:
        plt.close(fig)
    return path
