"""The results figures as data: one analysis for the dashboard's Results screen, ``fugue-tui
report`` and the exports (PNG/SVG, LaTeX). Textual-free, plotext-free, matplotlib-free.

Every number comes from :func:`engine.results.analysis.speedups` (ratio-of-means speedups against
the seq baseline of the same machine and stack, bootstrap intervals only with >=
:data:`engine.results.analysis.MIN_BOOT_N` passes on both sides), plus two aggregates computed here
on the same ok rows and the same cell keys: the peak RSS of a cell, and the unified model's
ablation ladder (``rung`` column: mean ``throughput_group`` of each rung ÷ that of rung A,
same machine, stack and experiment). A value that was not measured is ``None`` in a
:class:`Bar` — drawn by nobody, listed as missing by everybody.

Figures (:data:`FIGURE_KEYS`): ``speedup``, ``wall_clock`` (mean ``T_group``),
``throughput`` (mean ``throughput_group``), ``energy`` (J per trained model),
``memory`` (peak VRAM, else peak RSS of the cell's process tree), ``parity`` (mean
validation accuracy, the interval being the seq baseline's [min, max] over its jobs),
``ladder`` and ``completion``: a stream campaign's strategies (``arrivals``) on their
jobs' p95 completion time, the mean ``jct_p95_s`` over passes with that mean's interval
(:func:`engine.results.stream_report.stream_cells`, report's streams table). A stream
cell's ``speedup`` is the ratio of makespans, which its last arrival dominates: the
speedup figure leaves stream cells out and says so (as ``report``'s speedup chart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from engine.define.matrix import STREAM_ID
from engine.results.derived import BASELINE_EXECUTOR, PARITY_NA, parity_words
from fugue_tui.format import finite, fmt_number

#: The figures, in the order they are shown and exported.
FIGURE_KEYS = ("speedup", "wall_clock", "throughput", "energy", "memory", "parity", "ladder",
               "completion")


@dataclass(frozen=True)
class Bar:
    """One bar: ``value`` None when not measured (never drawn as 0); ``low``/``high`` an
    interval or None; ``text`` the value as the tables print it."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    text: str = ""


@dataclass
class Figure:
    key: str
    title: str
    unit: str
    bars: list[Bar] = field(default_factory=list)
    #: A vertical reference line (1 for ratios), or None.
    reference: float | None = None
    #: What the bars and intervals are, in one sentence (under the chart and the file).
    note: str = ""

    @property
    def missing(self) -> list[str]:
        return [b.label for b in self.bars if b.value is None]

    @property
    def drawn(self) -> list[Bar]:
        return [b for b in self.bars if b.value is not None]


def cell_label(row: dict[str, Any], machines: int = 1) -> str:
    """``exp executor`` plus compile mode, scheduler, features, mp's start, Ray Tune's actors,
    ablation rung and precision (other than fp32) when set; the machine first when the rows come from several."""
    parts = [str(row.get("exp_id", "")), str(row.get("executor", ""))]
    mode = str(row.get("compile_mode", "") or "off")
    if mode != "off":
        parts.append(f"compile={mode}")
    for key in ("scheduler", "features", "mp_start", "tune_actors"):
        value = str(row.get(key, "") or "")
        if value and value != "nan":
            parts.append(value)
    rung = str(row.get("rung", "") or "")
    if rung and rung != "nan":
        parts.append(f"rung {rung}")
    precision = str(row.get("precision", "") or "")
    if precision and precision not in ("fp32", "nan"):
        parts.append(precision)
    if row.get("_swept"):  # a K sweep's cells share the experiment: K tells them apart
        parts.append(f"K={int(row['K'])}")
    label = " ".join(parts)
    return f"{row.get('machine')}: {label}" if machines > 1 else label


def mark_sweeps(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (speedup rows) with ``_swept``: True where the machine and experiment
    have cells at several K (a K sweep), so that :func:`cell_label` names the K."""
    if not len(table) or "K" not in table.columns:
        return table.assign(_swept=False)
    nunique = table.groupby(["machine", "exp_id"], sort=False)["K"].transform("nunique")
    return table.assign(_swept=(nunique > 1).to_numpy())


def _extra(runs, keys: list[str]) -> pd.DataFrame:
    """Per cell: the highest ``rss_peak_mb`` of its ok rows (NaN when none recorded it)."""
    g = runs.groups
    ok = g[(g["status"] == "ok") & g["T_group"].notna()]
    rss = pd.to_numeric(ok["rss_peak_mb"], errors="coerce") if "rss_peak_mb" in ok.columns \
        else pd.Series(np.nan, index=ok.index)
    frame = ok[keys].assign(rss_peak_mb=rss.to_numpy(float))
    if not len(frame):
        return pd.DataFrame(columns=keys + ["rss_peak_mb_max"])
    return frame.groupby(keys, sort=False, dropna=False)["rss_peak_mb"].max() \
        .rename("rss_peak_mb_max").reset_index()


def ladder_table(runs, by_campaign: bool = False, n_boot: int = 2000, seed: int = 0
                 ) -> pd.DataFrame:
    """The ablation ladder: per provenance key × experiment × compile mode × rung (ok rows
    with a ``rung``), ``n``, ``throughput_mean`` and ``relative`` = its mean ÷ rung A's
    mean (a ratio of means; NaN without rung A), with a percentile-bootstrap interval
    (``low``/``high``) only when both sides have >= MIN_BOOT_N rows."""
    from engine.define.axes import ABLATION_LADDER
    from engine.results.analysis import CI_PERCENTILES, MIN_BOOT_N, provenance_columns
    from engine.results.derived import LADDER_BASE_RUNG, derived

    prov = provenance_columns(by_campaign)
    columns = prov + ["exp_id", "rung", "n", "throughput_mean", "relative", "low", "high"]
    g = runs.groups
    if "rung" not in g.columns:
        return pd.DataFrame(columns=columns)
    ok = g[(g["status"] == "ok") & (g["rung"].fillna("") != "")
           & g["throughput_group"].notna()]
    if not len(ok):
        return pd.DataFrame(columns=columns)
    order = {r.name: i for i, r in enumerate(ABLATION_LADDER)}
    out = []
    for key, part in ok.groupby(prov + ["exp_id"], sort=False, dropna=False):
        by_rung = {r: p["throughput_group"].to_numpy(float) for r, p in part.groupby("rung")}
        base = by_rung.get(LADDER_BASE_RUNG)
        for rung in sorted(by_rung, key=lambda r: (order.get(r, len(order)), r)):
            values = by_rung[rung]
            mean = float(values.mean())
            rel = low = high = math.nan
            if base is not None and base.mean() > 0:
                rel = derived("relative").compute(mean, float(base.mean()))
                if rung != LADDER_BASE_RUNG and len(values) >= MIN_BOOT_N and len(base) >= MIN_BOOT_N \
                        and n_boot > 0:
                    rng = np.random.default_rng([seed, len(values), len(base)])
                    num = rng.choice(values, (n_boot, len(values))).mean(axis=1)
                    den = rng.choice(base, (n_boot, len(base))).mean(axis=1)
                    low, high = np.percentile(num / den, CI_PERCENTILES)
            out.append(dict(zip(prov + ["exp_id"], key, strict=False)) | {
                "rung": rung, "n": len(values), "throughput_mean": mean, "relative": rel,
                "low": float(low), "high": float(high)})
    return pd.DataFrame(out, columns=columns)


@dataclass
class Results:
    """Everything the Results screen, the report and the exports show."""

    table: pd.DataFrame          # engine.results.analysis.speedups (+ rss_peak_mb_max)
    ladder: pd.DataFrame         # ladder_table
    figures: list[Figure]

    def figure(self, key: str) -> Figure:
        return next(f for f in self.figures if f.key == key)


def _slower_but_faster(labelled: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Why a speedup below 1 can sit beside a higher throughput than seq's: the cell trained
    more samples (``throughput_group`` is samples ÷ ``T_group``, the speedup compares the
    ``T_group`` alone), so it took longer yet moved more samples a second. One line per such
    cell, with both ratios, against the seq row of its experiment on its machine."""
    def same(r: dict[str, Any]) -> tuple:  # the seq row of the same workload: K and
        return (r["exp_id"], r.get("machine"), r.get("K"), r.get("precision"))  # precision

    seq = {same(r): r for _, r in labelled if r["executor"] == BASELINE_EXECUTOR}
    out = []
    for label, r in labelled:
        base = seq.get(same(r))
        speedup = finite(r.get("speedup"))
        if base is None or r["executor"] == BASELINE_EXECUTOR or speedup is None or speedup >= 1:
            continue
        mine, theirs = (finite(x.get("throughput_group_mean")) for x in (r, base))
        if mine is None or theirs is None or theirs <= 0 or mine <= theirs:
            continue
        faster = mine / theirs
        out.append(f"{label}: speedup {speedup:.3f} < 1 though its throughput is "
                   f"{faster:.2f}× {BASELINE_EXECUTOR}'s: it trained about {faster / speedup:.2f}× the "
                   "samples, so its T_group is longer while it trains faster")
    return out


def completion_bars(runs, by_campaign: bool = False) -> list[Bar]:
    """The ``completion`` figure's bars: per stream cell
    (:func:`engine.results.stream_report.stream_cells`) its mean ``jct_p95_s`` and the
    mean's interval, labelled ``stream <executor>`` (the stream's hash, the machine, the
    configuration added where needed to tell bars apart); ``[]`` without stream rows."""
    from engine.results.stream_report import stream_cells

    cells = stream_cells(runs.groups, by_campaign)
    streams = len({c["stream_sha256"] for c in cells})
    machines = len({c.get("machine") for c in cells})
    labels = []
    for c in cells:
        head = f"{c.get('machine')}: " if machines > 1 else ""
        which = f"stream {c['stream_sha256'][:8]}" if streams > 1 else "stream"
        labels.append(f"{head}{which} {c['executor']}")
    bars = []
    for label, c in zip(labels, cells, strict=True):
        if labels.count(label) > 1:
            label += f" {c['config_key'][:8]}"
        figure = c["figures"]["jct_p95_s"]
        value, low, high = (finite(figure[k]) for k in ("mean", "ci_low", "ci_high"))
        text = fmt_number(value, ".2f") + (f" [{low:.2f}, {high:.2f}]" if low is not None
                                           and high is not None else "")
        bars.append(Bar(label, value, low, high, text))
    return bars


def build(runs, by_campaign: bool = False, n_boot: int = 2000,
          baseline_precision: str | None = None) -> Results:
    """The table and the figures of ``runs`` (:class:`engine.results.load.Runs`)."""
    from engine.results.analysis import MIN_BOOT_N, cell_columns, speedups

    keys = cell_columns(by_campaign)
    table = speedups(runs, by_campaign=by_campaign, n_boot=n_boot,
                     baseline_precision=baseline_precision)
    if len(table):
        table = table.merge(_extra(runs, keys), on=keys, how="left", sort=False)
    else:
        table = table.assign(rss_peak_mb_max=pd.Series(dtype=float))
    ladder = ladder_table(runs, by_campaign=by_campaign, n_boot=n_boot)
    rows = mark_sweeps(table).to_dict("records")
    machines = len({r["machine"] for r in rows})
    labelled = [(cell_label(r, machines), r) for r in rows]

    def bars(column: str, fmt: str, rows_=labelled) -> list[Bar]:
        return [Bar(label, finite(r.get(column)), text=fmt_number(finite(r.get(column)), fmt))
                for label, r in rows_]

    speed = []
    for label, r in labelled:
        if r["executor"] == BASELINE_EXECUTOR or r["exp_id"] == STREAM_ID:
            continue  # a stream cell's ratio is of makespans: the completion figure
        value, low, high = (finite(r.get(c)) for c in ("speedup", "ci_low", "ci_high"))
        text = fmt_number(value, ".3f") + (f" [{low:.3f}, {high:.3f}]" if low is not None
                                     and high is not None else "")
        speed.append(Bar(label, value, low, high, text))
    memory = []
    for label, r in labelled:
        vram, rss = finite(r.get("vram_peak_mb_max")), finite(r.get("rss_peak_mb_max"))
        value = vram if vram is not None else rss
        what = "VRAM" if vram is not None else ("RSS" if rss is not None else "")
        memory.append(Bar(label, value, text=f"{fmt_number(value, ',.0f')} MiB {what}".strip()))
    parity = []
    for label, r in labelled:
        acc = finite(r.get("acc_mean"))
        low, high = finite(r.get("seq_acc_min")), finite(r.get("seq_acc_max"))
        flag = parity_words(r.get("parity"), r.get("parity_failed"), r.get("parity_on"))
        flag = "" if flag == PARITY_NA else flag
        parity.append(Bar(label, acc, low, high, f"{fmt_number(acc, '.3f')} {flag}".strip()))
    lad = []
    lmachines = len(set(ladder["machine"])) if len(ladder) else 0
    for r in ladder.to_dict("records"):
        value, low, high = (finite(r.get(c)) for c in ("relative", "low", "high"))
        head = f"{r['machine']}: " if lmachines > 1 else ""
        lad.append(Bar(f"{head}{r['exp_id']} rung {r['rung']}", value, low, high,
                       fmt_number(value, ".3f") + (f" [{low:.3f}, {high:.3f}]"
                                             if low is not None and high is not None else "")))
    base = BASELINE_EXECUTOR
    ratio = (f"ratio of means over passes; 95% bootstrap interval only with >= {MIN_BOOT_N} "
             "passes on both sides; never across machines")
    baseline = {r["exp_id"] for r in rows if r["executor"] == BASELINE_EXECUTOR}
    orphans = sorted({r["exp_id"] for _, r in labelled if r["executor"] != BASELINE_EXECUTOR
                      and finite(r.get("speedup")) is None and r["exp_id"] not in baseline})
    speed_note = ratio
    for line in _slower_but_faster(labelled):
        speed_note += f"; {line}"
    completion = completion_bars(runs, by_campaign)
    if completion and any(r["exp_id"] == STREAM_ID for _, r in labelled
                          if r["executor"] != BASELINE_EXECUTOR):
        speed_note += ("; stream cells left out (a stream's T_group is its makespan, "
                       "mostly its last arrival): the p95 job completion figure compares them")
    if orphans:  # a missing bar must say why: here, no seq row to divide by
        speed_note += (f"; missing for {', '.join(orphans)}: no {base} row of that experiment "
                       f"among the rows shown (a filter that leaves {base} out leaves no "
                       "baseline)")
    figures = [
        Figure("speedup", f"speedup over {base} (mean {base} T_group ÷ mean T_group; 1 = {base})",
               "×",
               speed, 1.0, speed_note),
        Figure("wall_clock", "wall-clock: mean T_group per cell", "s",
               bars("T_group_mean", ".2f"), None, "mean over the cell's ok passes"),
        Figure("throughput", "throughput: mean samples/s of the group", "samples/s",
               bars("throughput_group_mean", ",.0f"), None, "mean throughput_group over passes"),
        Figure("energy", "energy per trained model", "J",
               bars("energy_per_model_j", ",.1f"), None,
               "mean energy_group / K over the passes that measured energy"),
        Figure("memory", "peak memory (VRAM with a GPU, else RSS of the cell's process tree)",
               "MiB", memory, None, "highest peak over passes"),
        Figure("parity", f"accuracy parity: mean val acc (interval: the {base} baseline's "
               "[min, max] over its jobs)", "acc", parity, None,
               f"within / OUTSIDE: the cell's mean accuracy and loss lie within / outside the "
               f"{base} spread widened by the precision's band; OUTSIDE names which failed"),
        Figure("ladder", "unified-model ablation ladder: throughput relative to rung A", "×",
               lad, 1.0, ratio.replace("passes on both sides", "passes of both rungs")),
        Figure("completion", "p95 job completion time on each stream (arrival → done; "
               "lower is better)", "s", completion, None,
               f"mean jct_p95_s over the cell's ok passes; 95% bootstrap interval of the mean "
               f"only with >= {MIN_BOOT_N} passes; each stream's strategies together, "
               f"{base} first"),
    ]
    return Results(table, ladder, figures)
