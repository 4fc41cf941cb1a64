"""``fugue-tui report --advise`` for streams (issue 52 item 2): per stream, which strategy
gives the lowest p95 job completion time at the stream's arrival rate. Torch-free.

The rule
    The candidates are the report's stream cells (:func:`engine.results.stream_report.
    stream_cells`: one per ``stream_sha256``, configuration and provenance) of one stream
    and machine that recorded ``jct_p95_s``. The recommended one has the lowest mean
    ``jct_p95_s`` over its passes, shown with its 95 % percentile-bootstrap interval; the
    runner-up is the next lowest. Whether they are told apart is the batch advisor's rule
    and wording (:mod:`engine.results.advise`, "Distinguishable?";
    :func:`engine.results.advice_model.passes_to_separate`): overlapping intervals → "not
    distinguishable with N passes" and about how many more would separate them (half-widths
    shrinking as 1/√n); fewer than :data:`~engine.results.analysis.MIN_BOOT_N` passes a
    side → no interval, and how many more passes an interval needs; one strategy → nothing
    to compare. Where a row of the two compared cells was measured on a busy host
    (:mod:`engine.results.conditions`: load average above its cores + 0.5) the difference is
    never called resolved (``distinguishable`` None), whatever the intervals say. The
    offered load and the arrival rate are shown beside it: the answer holds for that load.
    ``offered_load`` is per strategy (arrival rate × mean service time as that strategy
    served the jobs, docs/measurement.md "Streams"): the one shown is seq's — the load
    against one server's capacity — where seq served the stream, else the recommended
    strategy's (``offered_load_of`` names it); each candidate carries its own.
"""

from __future__ import annotations

import math
from typing import Any

#: The figure ranked on (lower is better).
MEASURE = "jct_p95_s"


def _label(cell: dict[str, Any]) -> str:
    mode = cell.get("compile_mode")
    return cell["executor"] + (f" compile={mode}" if mode not in (None, "", "off") else "")


def _figure(cell: dict[str, Any], name: str = MEASURE) -> dict[str, Any]:
    return cell["figures"][name]


def _half(fig: dict[str, Any]) -> float:
    if fig["ci_low"] is None or fig["ci_high"] is None:
        return math.nan
    return (fig["ci_high"] - fig["ci_low"]) / 2


def _busy(groups: Any, cell: dict[str, Any], prov: list[str]) -> tuple[int, int, float, float]:
    """(busy rows, rows, highest load, cores) over ``cell``'s ok rows."""
    from engine.results.conditions import row_conditions

    sel = groups[(groups["status"] == "ok")
                 & (groups["stream_sha256"].astype(str) == cell["stream_sha256"])
                 & (groups["config_key"].astype(str) == cell["config_key"])]
    from engine.results.stream_report import _plain

    for column in prov:  # the cell's provenance is in stream_cells' plain form
        value = cell.get(column)
        sel = sel[[_plain(v) == value for v in sel[column]]]
    cond = row_conditions(sel)
    load = float(cond["load"].max()) if cond["load"].notna().any() else math.nan
    cores = float(cond["cores"].max()) if cond["cores"].notna().any() else math.nan
    return int(cond["busy"].sum()), len(sel), load, cores


def _compare(best: dict[str, Any], second: dict[str, Any] | None
             ) -> tuple[bool | None, str, int | None]:
    """The batch advisor's "Distinguishable?" words on ``jct_p95_s`` intervals."""
    from engine.results.advice_model import passes_to_separate
    from engine.results.analysis import MIN_BOOT_N

    if second is None:
        return None, "only one strategy served this stream: nothing to compare it with", None
    b, s = _figure(best), _figure(second)
    n = min(b["n"], s["n"])
    name = f"{_label(best)} vs {_label(second)}"
    w1, w2 = _half(b), _half(s)
    if not (math.isfinite(w1) and math.isfinite(w2)):
        short = max(0, MIN_BOOT_N - n)
        return None, (f"{name}: no interval with {_passes(n)} (intervals need >= {MIN_BOOT_N} "
                      f"passes a side): run {short} more to tell them apart"), short or None
    if b["ci_high"] < s["ci_low"] or s["ci_high"] < b["ci_low"]:
        return True, (f"{name}: distinguishable with {_passes(n)} (the 95% intervals do not "
                      f"overlap)"), None
    total = passes_to_separate(b["mean"], w1, s["mean"], w2, n)
    if total is None:
        return False, (f"{name}: not distinguishable with {_passes(n)}, and equal estimates: no "
                       f"number of passes would separate them"), None
    return False, (f"{name}: not distinguishable with {_passes(n)}; about {total - n} more "
                   f"({total} in all) would separate them if the estimates hold (interval "
                   f"half-width shrinking as 1/√n)"), total - n


def _entry(cell: dict[str, Any] | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {"executor": cell["executor"], "label": _label(cell),
            "compile_mode": cell.get("compile_mode"), "config_key": cell["config_key"],
            "passes": cell["passes"], "max_parallel": cell.get("max_parallel"),
            MEASURE: dict(_figure(cell)), "offered_load": dict(_figure(cell, "offered_load"))}


def _passes(n: int) -> str:
    """``1 pass``, ``3 passes``."""
    return f"{n} pass" if n == 1 else f"{n} passes"


def _num(value: Any, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.3g}{unit}"


def _interval(fig: dict[str, Any]) -> str:
    if fig["ci_low"] is None or fig["ci_high"] is None:
        return f"{_num(fig['mean'], ' s')} (no interval, {_passes(fig['n'])})"
    return (f"{_num(fig['mean'], ' s')} [95% CI {fig['ci_low']:.3g}–{fig['ci_high']:.3g} s, "
            f"{_passes(fig['n'])}]")


def stream_advice(groups: Any, by_campaign: bool = False) -> list[dict[str, Any]]:
    """One JSON-able advice per stream and machine of ``groups`` (a ``Runs.groups`` frame;
    ``[]`` without stream rows), by the module doc's rule: provenance, ``stream_sha256``,
    ``arrival_rate_jps``, ``offered_load`` and ``offered_load_of`` (module doc), ``measure``,
    ``recommended`` / ``runner_up`` (None: none), ``distinguishable`` (None: cannot be
    said), ``more_passes``, ``host_busy``, ``verdict`` and ``text`` (the report's lines)."""
    from engine.results.analysis import provenance_columns
    from engine.results.conditions import BUSY_MARGIN
    from engine.results.stream_report import stream_cells

    cells = stream_cells(groups, by_campaign)
    if not cells:
        return []
    prov = [c for c in provenance_columns(by_campaign) if c in groups.columns]
    streams: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for cell in cells:
        key = (*(cell.get(c) for c in prov), cell["stream_sha256"])
        streams.setdefault(key, []).append(cell)
    out = []
    for key, mine in streams.items():
        ranked = sorted((c for c in mine if _figure(c)["mean"] is not None),
                        key=lambda c: _figure(c)["mean"])
        best = ranked[0] if ranked else None
        second = ranked[1] if len(ranked) > 1 else None
        rate = mine[0].get("arrival_rate_jps")
        # the load against seq's capacity (one server) where seq served the stream, else
        # as the recommended strategy served it (offered_load is per strategy)
        seq = next((c for c in mine if c["executor"] == "seq"), None)
        load_cell = seq if seq is not None else best
        load = _figure(load_cell, "offered_load")["mean"] if load_cell else None
        load_of = _label(load_cell) if load_cell else None
        busy = False
        if best is None:
            distinct, verdict, more = None, f"no strategy recorded {MEASURE}: nothing to rank", None
        else:
            distinct, verdict, more = _compare(best, second)
            figures = []
            for compared in [c for c in (best, second) if c is not None]:
                n_busy, n, hload, cores = _busy(groups, compared, prov)
                if n_busy:
                    figures.append(f"{_label(compared)}: {n_busy} of {n} rows, load up to "
                                   f"{hload:.2f} on {cores:g} cores")
            if figures:
                busy = True
                said = {True: "their 95% intervals do not overlap",
                        False: "their 95% intervals overlap",
                        None: "no intervals to compare"}[distinct]
                name = (f"{_label(best)} vs {_label(second)}" if second is not None
                        else _label(best))
                verdict = (f"{name}: not resolved: the host was busy while they were measured "
                           f"({'; '.join(figures)}; load average above the cores + "
                           f"{BUSY_MARGIN:g}); {said}, but timings taken while other work ran "
                           f"do not rank strategies: rerun on a quiet host")
                distinct, more = None, None
        head = (f"stream {key[-1][:12]} on {key[0]} at {_num(rate, ' jobs/s')} "
                f"(offered load {_num(load)}" + (f" as {load_of} served it" if load_of else "") + "):")
        lines = [head]
        if best is not None:
            lines.append(f"  lowest p95 job completion time: {_label(best)} "
                         f"{_interval(_figure(best))}")
        if second is not None:
            lines.append(f"  runner-up: {_label(second)} {_interval(_figure(second))}")
        lines.append(f"  {verdict}")
        out.append({**dict(zip(prov, key[:-1], strict=True)), "stream_sha256": key[-1],
                    "arrival_rate_jps": rate, "offered_load": load, "offered_load_of": load_of,
                    "measure": MEASURE,
                    "recommended": _entry(best), "runner_up": _entry(second),
                    "distinguishable": distinct, "more_passes": more, "host_busy": busy,
                    "verdict": verdict, "text": "\n".join(lines)})
    return out


__all__ = ["MEASURE", "stream_advice"]
