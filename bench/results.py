"""The benchmark results format: raw rows in ``bench/results/<part>.csv``, rendered to
``bench/RESULTS.md``.

Every benchmark part appends one row per (figure, variant, repetition) to its CSV through
:func:`engine.results.store.append_rows` (locked, atomic). Columns (:data:`COLUMNS`):

* ``part``, ``figure``, ``variant``, ``repetition`` (1..n), ``value``, ``unit``;
* the figure's description, the same on each of its rows: ``baseline`` (the variant that
  ratios divide by; empty: no ratio), ``target`` (a bound on the ratio such as ``>=0.9``;
  empty: none), ``note`` (what the figure includes and excludes);
* ``run_id``: one invocation of a part; repetition ``r`` of two variants with the same
  ``run_id`` were measured back to back, so their ratio is a per-repetition ratio;
* provenance: ``timestamp``, ``host``, ``cpu_model``, ``cpu_cores``, ``python_version``,
  ``torch_version``, ``fugue_tui_version``, ``fugue_tui_commit``, ``command``;
* ``setting`` (last, added by issue 42): the kernel-dispatch setting the run was made
  under, as ``NAME=VALUE`` pairs joined by spaces (``MKL_CBWR=COMPATIBLE``); empty: the
  default dispatch (rows written before the column have it empty, and were).

``RESULTS.md`` is a function of the CSV files only (:func:`render`): for each part, the
latest run (the ``run_id`` of the file's last row; one latest run per ``setting`` when a
part was run under several, each with the setting in its machine line), one table row per
figure and variant
with n, the median and its spread (interquartile range and min–max), and for
non-baseline variants the ratio of medians with the spread of the per-repetition ratios
(IQR and min–max). A ratio is marked "not resolvable here" when the IQR of its
per-repetition ratios straddles the target (or 1 when there is no target), or, without a
target, is wider than the difference the ratio claims (``|ratio − 1|``); "met" and
"not met" are decided by the per-repetition ratios (their IQR wholly on one side of the
target), and a ratio of medians on the other side makes the claim not resolvable. The IQR,
not the min–max range, decides: on a shared machine one repetition that another process
slowed down would otherwise veto every claim; the min–max range is shown beside it.
A ratio target at parity (``>1`` or ``<1``: "the baseline is ahead of this variant") is
worded as what it says: "met (ahead)", "tied (per-repetition IQR includes 1)" or "not met
(behind)"; "not resolvable here" remains for a ratio of medians on the other side of 1
than that IQR.

``python -m bench.results`` re-renders ``RESULTS.md``; ``--check`` re-renders in memory and
exits 1 when the file differs. Torch-free.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.measure.provenance import dist_version, host_facts
from engine.results.read import read_rows
from engine.results.store import append_rows
from engine.results.values import timestamp_now

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "RESULTS.md"

MEASURE_COLUMNS: tuple[str, ...] = ("part", "figure", "variant", "repetition", "value", "unit")
FIGURE_COLUMNS: tuple[str, ...] = ("baseline", "target", "note", "run_id")
PROVENANCE_COLUMNS: tuple[str, ...] = (
    "timestamp", "host", "cpu_model", "cpu_cores", "python_version", "torch_version",
    "fugue_tui_version", "fugue_tui_commit", "command",
)
#: Added after the others (a new column goes at the end of the order).
SETTING_COLUMNS: tuple[str, ...] = ("setting",)
COLUMNS: tuple[str, ...] = (MEASURE_COLUMNS + FIGURE_COLUMNS + PROVENANCE_COLUMNS
                            + SETTING_COLUMNS)

NOT_RESOLVABLE = "not resolvable here"
#: The verdicts of a ratio target at parity (``>1``, ``<1``): the claim is that the
#: baseline is ahead of the variant (peers: the peer's time ÷ ours above 1).
AHEAD, TIED, BEHIND = "met (ahead)", "tied (per-repetition IQR includes 1)", "not met (behind)"
_OPS = (">=", "<=", ">", "<")


@dataclass(frozen=True)
class Figure:
    """One measured quantity of a part, compared across variants.

    ``target`` bounds ``variant / baseline`` (``">=0.9"``: the variant keeps at least 90 %
    of the baseline's value).
    """

    name: str
    unit: str
    baseline: str = ""
    target: str = ""
    note: str = ""


def aligned(values: dict[str, dict[int, float]]) -> dict[str, list[float]]:
    """Per variant, its values at the repetitions (passes) every variant has, in order: the
    per-repetition ratios stay paired when a pass lost a variant's row."""
    common = sorted(set.intersection(*(set(v) for v in values.values())))
    return {k: [v[p] for p in common] for k, v in values.items()}


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def provenance(command: str, torch_version: str | None = None,
               setting: str = "") -> dict[str, Any]:
    """The provenance columns of a row measured now by ``command`` under the kernel-dispatch
    ``setting`` (``"MKL_CBWR=COMPATIBLE"``; empty: the default)."""
    facts = host_facts()
    return {
        "timestamp": timestamp_now(), "host": facts["host"], "cpu_model": facts["cpu_model"],
        "cpu_cores": facts["cpu_cores"], "python_version": facts["python_version"],
        "torch_version": torch_version or dist_version("torch"),
        "fugue_tui_version": facts["fugue_tui_version"],
        "fugue_tui_commit": facts["fugue_tui_commit"], "command": command,
        "setting": setting,
    }


def figure_rows(part: str, figure: Figure, values: Mapping[str, Sequence[float]], run_id: str,
                prov: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for ``values[variant][repetition - 1]``, in variant then repetition order."""
    rows = []
    for variant, series in values.items():
        for i, value in enumerate(series, start=1):
            rows.append({"part": part, "figure": figure.name, "variant": variant,
                         "repetition": i, "value": float(value), "unit": figure.unit,
                         "baseline": figure.baseline, "target": figure.target,
                         "note": figure.note, "run_id": run_id, **prov})
    return rows


def csv_path(part: str, results_dir: str | Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / f"{part}.csv"


def append(part: str, rows: Sequence[Mapping[str, Any]],
           results_dir: str | Path = RESULTS_DIR) -> Path:
    """Append ``rows`` to ``<results_dir>/<part>.csv`` (locked, atomic); return the path."""
    path = csv_path(part, results_dir)
    append_rows(path, rows, COLUMNS)
    return path


# --------------------------------------------------------------------------- statistics

def parse_target(target: str) -> tuple[str, float] | None:
    """``">=0.9"`` → ``(">=", 0.9)``; empty → ``None``. Raises ``ValueError`` otherwise."""
    text = target.strip().replace(" ", "")
    if not text:
        return None
    for op in _OPS:
        if text.startswith(op):
            return op, float(text[len(op):])
    raise ValueError(f"target {target!r}: expected one of {', '.join(_OPS)} and a number")


def _meets(value: float, op: str, bound: float) -> bool:
    return {">=": value >= bound, "<=": value <= bound, ">": value > bound,
            "<": value < bound}[op]


def iqr(values: Sequence[float]) -> tuple[float, float]:
    """First and third quartiles (``statistics.quantiles``, inclusive method)."""
    if not values:
        return math.nan, math.nan
    if len(values) == 1:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class RatioSummary:
    ratio: float            # median(variant) / median(baseline)
    q1: float               # IQR of the per-repetition ratios
    q3: float
    low: float              # min–max of the per-repetition ratios
    high: float
    n: int                  # repetitions with both values
    verdict: str            # "met" | "not met" | NOT_RESOLVABLE | "" (no target, resolvable)


def judge_ratio(ratio: float, per_rep: Sequence[float], target: str) -> RatioSummary:
    """Summarise a ratio and decide what it can claim (see the module doc)."""
    n = len(per_rep)
    if n == 0 or not math.isfinite(ratio):
        return RatioSummary(ratio, math.nan, math.nan, math.nan, math.nan, n, NOT_RESOLVABLE)
    q1, q3 = iqr(per_rep)
    low, high = min(per_rep), max(per_rep)
    parsed = parse_target(target)
    reference = parsed[1] if parsed else 1.0
    straddles = q1 <= reference <= q3
    # Without a target the ratio claims a difference from 1, which a spread wider than that
    # difference does not support; against a bound, an IQR wholly on one side settles it
    # however wide it is (0.6-1.2 under a <=2 bound meets it).
    too_wide = parsed is None and (q3 - q1) > abs(ratio - reference)
    at_parity = parsed is not None and parsed[1] == 1.0 and parsed[0] in (">", "<")
    if n >= 2 and straddles and at_parity:
        verdict = TIED
    elif n < 2 or straddles or too_wide:
        verdict = NOT_RESOLVABLE
    elif parsed is None:
        verdict = ""
    else:
        # The per-repetition ratios decide (their IQR lies wholly on one side of the target
        # here); the ratio of medians must agree, else neither claim stands: two medians
        # taken from different repetitions can meet a bound that no repetition met.
        iqr_meets = _meets(q1, *parsed) and _meets(q3, *parsed)
        if iqr_meets != _meets(ratio, *parsed):
            verdict = NOT_RESOLVABLE
        elif at_parity:
            verdict = AHEAD if iqr_meets else BEHIND
        else:
            verdict = "met" if iqr_meets else "not met"
    return RatioSummary(ratio, q1, q3, low, high, n, verdict)


def judge_value(values: Sequence[float], target: str) -> str:
    """Verdict of an absolute bound (a figure without a baseline, e.g. ``"<=1"`` s): "met",
    "not met (median X× the bound)", or :data:`NOT_RESOLVABLE` when the values' IQR
    straddles the bound."""
    parsed = parse_target(target)
    if parsed is None or not values:
        return ""
    q1, q3 = iqr(values)
    if len(values) < 2 or q1 <= parsed[1] <= q3:
        return NOT_RESOLVABLE
    median = statistics.median(values)
    if _meets(median, *parsed):
        return "met"
    return f"not met (median {median / parsed[1]:.2f}× the bound)" if parsed[1] else "not met"


# --------------------------------------------------------------------------- rendering

def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "—"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.4g}"


def _fmt_ratio(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "—"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _latest_run(rows: list[dict[str, str]]) -> tuple[str, list[dict[str, str]], int]:
    run_ids = list(dict.fromkeys(r.get("run_id", "") for r in rows))
    latest = rows[-1].get("run_id", "")
    return latest, [r for r in rows if r.get("run_id", "") == latest], len(run_ids) - 1


def _table_rows(run: list[dict[str, str]]) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The table cells of one run (one list per figure and variant, in the columns of
    :func:`render_part`) and the figures' notes."""
    table: list[list[str]] = []
    notes: list[tuple[str, str]] = []
    figures = list(dict.fromkeys(r["figure"] for r in run))
    for figure in figures:
        frows = [r for r in run if r["figure"] == figure]
        meta = frows[0]
        baseline, target, unit = meta.get("baseline", ""), meta.get("target", ""), meta["unit"]
        if meta.get("note"):
            notes.append((figure, meta["note"]))
        series: dict[str, dict[int, float]] = {}
        for r in frows:
            series.setdefault(r["variant"], {})[int(r["repetition"])] = float(r["value"])
        variants = list(series)
        if baseline in series:  # the baseline first
            variants.remove(baseline)
            variants.insert(0, baseline)
        # A target is a row's: one figure may bound some variants and not others (peers
        # bounds the two peer tools' stacked times, not ours); the figure's first row is
        # its baseline's, which has none.
        targets = {r["variant"]: r.get("target", "") for r in frows if r.get("target")}
        for variant in variants:
            target = targets.get(variant, meta.get("target", ""))
            values = [series[variant][k] for k in sorted(series[variant])]
            median = statistics.median(values)
            q1, q3 = iqr(values)
            cells = [figure, variant + (" (baseline)" if variant == baseline else ""), unit,
                     str(len(values)), _fmt(median), f"{_fmt(q1)}–{_fmt(q3)}",
                     f"{_fmt(min(values))}–{_fmt(max(values))}"]
            if baseline and baseline in series and variant != baseline:
                base = series[baseline]
                base_median = statistics.median(base.values())
                per_rep = [series[variant][k] / base[k] for k in sorted(series[variant])
                           if k in base and base[k] != 0]
                summary = judge_ratio(median / base_median if base_median else math.nan,
                                      per_rep, target)
                cells += [_fmt_ratio(summary.ratio),
                          f"{_fmt_ratio(summary.q1)}–{_fmt_ratio(summary.q3)} (n={summary.n})",
                          f"{_fmt_ratio(summary.low)}–{_fmt_ratio(summary.high)}",
                          target or "—", summary.verdict or "—"]
            elif target and not baseline:  # an absolute bound on the value itself
                cells += ["—", "—", "—", target, judge_value(values, target)]
            else:
                cells += ["—", "—", "—", "—", "—"]
            table.append(cells)
    return table, notes


def targets_summary(parts: Mapping[str, list[dict[str, str]]]) -> str:
    """The "Targets" section: every figure with a target in each part's latest run, its
    measured value (the median, or the ratio of medians) and the verdict, with the run's
    median 1-minute load for context."""
    lines = ["## Targets", "",
             "Every published target, from each part's latest run (details in its section "
             "below).", "",
             "| part | figure | variant | measured | target | verdict | run | load (median) |",
             "|---|---|---|---|---|---|---|---|"]
    found = False
    for part, rows in parts.items():
        run_id, run, _ = _latest_run(rows)
        loads = [float(r["value"]) for r in run if r["figure"] == "load_1min"]
        load = _fmt(statistics.median(loads)) if loads else "—"
        table, _ = _table_rows(run)
        for cells in table:
            if cells[10] in ("—", ""):
                continue
            found = True
            measured = (f"ratio {cells[7]}" if cells[7] != "—" else f"{cells[4]} {cells[2]}")
            lines.append("| " + " | ".join(_cell(c) for c in (
                part, cells[0], cells[1], measured, cells[10], cells[11] or "—",
                f"`{run_id}` {run[0].get('timestamp', '')[:8]}", load)) + " |")
    if not found:
        return ""
    lines.append("")
    return "\n".join(lines)


def by_setting(rows: list[dict[str, str]]) -> list[list[dict[str, str]]]:
    """A part's rows split by ``setting``, each in file order; the settings in the order of
    their latest rows (the default first when it is older)."""
    groups: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault(r.get("setting") or "", []).append(r)
    last = {key: max(i for i, r in enumerate(rows) if (r.get("setting") or "") == key)
            for key in groups}
    return [groups[key] for key in sorted(groups, key=last.__getitem__)]


def render_part(part: str, rows: list[dict[str, str]]) -> str:
    """The Markdown section of one part: its latest run, or under several kernel-dispatch
    settings the latest run of each (its setting in the machine line)."""
    groups = by_setting(rows)
    if len(groups) == 1 and not (rows[-1].get("setting") or ""):
        return _render_run(part, rows, f"## {part}", "")
    return "\n".join(_render_run(part, group, f"## {part}" if i == 0 else "",
                                 group[-1].get("setting") or "default")
                      for i, group in enumerate(groups))


def _render_run(part: str, rows: list[dict[str, str]], heading: str, setting: str) -> str:
    run_id, run, earlier = _latest_run(rows)
    first = run[0]
    lines = [heading, ""] if heading else []
    if setting:
        lines += [f"### {part} under dispatch setting: {setting}", ""]
    lines.append(f"- run `{run_id}` at {first.get('timestamp', '')}"
                 + (f" ({earlier} earlier run{'s' if earlier != 1 else ''} in the CSV, "
                    f"not shown)" if earlier else ""))
    lines.append(f"- machine: {first.get('host', '')}, {first.get('cpu_model', '')} "
                 f"({first.get('cpu_cores', '')} cores); Python {first.get('python_version', '')}, "
                 f"torch {first.get('torch_version', '')}"
                 + (f"; kernel dispatch: {setting}" if setting else ""))
    lines.append(f"- fugue-tui {first.get('fugue_tui_version', '')}, commit "
                 f"`{first.get('fugue_tui_commit', '') or 'unknown'}`")
    lines.append(f"- command: `{first.get('command', '')}`")
    lines.append(f"- raw rows: `bench/results/{part}.csv`")
    lines.append("")
    lines.append("| figure | variant | unit | n | median | IQR | min–max "
                 "| ratio to baseline (of medians) | per-repetition ratios: IQR | min–max "
                 "| target | verdict |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    table, notes = _table_rows(run)
    for cells in table:
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if notes:
        lines.append("")
        for figure, note in notes:
            lines.append(f"- **{figure}**: {note}")
    lines.append("")
    return "\n".join(lines)


HEADER = """# Benchmark results

Generated by `python -m bench.results` from the raw rows in `bench/results/*.csv`; do not
edit by hand (`python -m bench.results --check` fails when this file and the CSV files
disagree). How each part is measured: `bench/README.md`. Each section shows the latest run
of its part: medians over repetitions with their interquartile range (IQR) and min–max;
ratios = median of the variant ÷ median of the baseline, with the IQR and min–max of the
per-repetition ratios (variant ÷ baseline within one repetition). "not resolvable here":
the IQR of the per-repetition ratios straddles the target (or 1 when there is none), or,
without a target, is wider than the difference the ratio claims; met / not met also need
the ratio of medians on the same side as that IQR. A ratio target at parity (`>1`, `<1`:
the baseline ahead of the variant; peers: the peer's time ÷ ours) reads "met (ahead)",
"tied (per-repetition IQR includes 1)" or "not met (behind)". A part run under several
kernel-dispatch settings shows the latest run of each, its setting in the machine line.
"""


def render(results_dir: str | Path = RESULTS_DIR) -> str:
    """``RESULTS.md`` as text, from every ``*.csv`` under ``results_dir`` (parts sorted)."""
    sections = [HEADER]
    paths = sorted(Path(results_dir).glob("*.csv")) if Path(results_dir).is_dir() else []
    parts: dict[str, list[dict[str, str]]] = {}
    for path in paths:
        rows = read_rows(path)
        if rows:
            parts[rows[0].get("part") or path.stem] = rows
    if not parts:
        sections.append("No results yet.\n")
        return "\n".join(sections)
    summary = targets_summary(parts)
    if summary:
        sections.append(summary)
    sections += [render_part(part, rows) for part, rows in parts.items()]
    return "\n".join(sections)


def write(results_dir: str | Path = RESULTS_DIR, md_path: str | Path = RESULTS_MD) -> Path:
    text = render(results_dir)
    path = Path(md_path)
    path.write_text(text, encoding="utf-8")
    return path


def publish(part: str, rows: Sequence[Mapping[str, Any]],
            results_dir: str | Path | None = None) -> None:
    """What every part does last: append its rows, re-render RESULTS.md (beside a custom
    ``results_dir``, else the committed one) and print the part's table."""
    directory = results_dir or RESULTS_DIR
    path = append(part, rows, directory)
    md = write(directory, Path(directory).parent / "RESULTS.md" if results_dir else RESULTS_MD)
    print(f"appended {len(rows)} rows to {path}; rendered {md}")
    print(render_part(part, read_rows(path)))


def check(results_dir: str | Path = RESULTS_DIR, md_path: str | Path = RESULTS_MD) -> bool:
    """True when ``md_path`` is exactly what :func:`render` gives for ``results_dir``."""
    try:
        current = Path(md_path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return current == render(results_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.results",
                                     description="Render bench/RESULTS.md from bench/results/*.csv")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when RESULTS.md differs from what the CSV files give")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(RESULTS_MD), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        if check(args.results_dir, args.out):
            print(f"{args.out} is up to date")
            return 0
        print(f"{args.out} differs from what {args.results_dir}/*.csv gives: "
              f"run `python -m bench.results` to re-render it", file=sys.stderr)
        return 1
    print(f"wrote {write(args.results_dir, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
