"""Where two executors' scheduler decisions first differ, per hpo cell (issue 46), for
``fugue-tui report`` (text and ``--json``). Torch-free.

Rows with a ``decisions`` file (engine.results.decisions) are paired by what makes them
the same hpo cell under different executors: campaign, experiment, scheduler and pass
(the latest attempt of each executor). Each executor is compared with the baseline
(``seq``; without a seq row, the first executor by name): the first (trial, rung) decided
otherwise, or, with the same decisions, the first arrival position that differs, or "same
decisions in the same order". Asynchronous schedulers may differ under concurrency (the
docs allow it); this says where.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engine.results import decisions
from engine.results.derived import BASELINE_EXECUTOR


def _text(value: Any) -> str:
    """A cell's text (a frame reads an empty cell as NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def compare(rows: Iterable[Mapping[str, Any]], runs_dir: str | Path) -> list[dict[str, Any]]:
    """One entry per hpo cell and non-baseline executor with a decisions file: ``exp_id``,
    ``scheduler``, ``pass``, ``campaign_id``, ``a`` and ``b`` (``executor``, ``decisions``:
    the file relative to ``runs_dir``), ``difference`` (None: the same decisions in the same
    arrival order; else kind, trial, rung, position and what each side had), ``error`` (a
    file that could not be read: one line; then no difference) and ``text`` (one line).
    [] when fewer than two executors of one cell recorded decisions."""
    cells: dict[tuple[str, ...], dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        if not _text(row.get("decisions")):
            continue
        key = tuple(_text(row.get(c)) for c in ("campaign_id", "exp_id", "scheduler", "pass"))
        by_executor = cells.setdefault(key, {})
        executor = _text(row.get("executor"))
        earlier = by_executor.get(executor)
        if earlier is None or _number(row.get("attempt")) >= _number(earlier.get("attempt")):
            by_executor[executor] = row
    out = []
    for (campaign, exp_id, scheduler, pass_), by_executor in cells.items():
        if len(by_executor) < 2:
            continue
        names = sorted(by_executor)
        base = BASELINE_EXECUTOR if BASELINE_EXECUTOR in by_executor else names[0]
        for other in (n for n in names if n != base):
            entry = _entry(runs_dir, by_executor[base], by_executor[other])
            entry.update(campaign_id=campaign, exp_id=exp_id, scheduler=scheduler,
                         **{"pass": int(pass_) if pass_.isdigit() else None})
            where = f"{exp_id} {scheduler} pass {pass_ or '—'}: {other} vs {base}"
            entry["text"] = f"{where}: {entry.pop('line')}"
            out.append(entry)
    return out


def _entry(runs_dir: str | Path, base: Mapping[str, Any],
           other: Mapping[str, Any]) -> dict[str, Any]:
    a = {"executor": _text(base.get("executor")), "decisions": _text(base.get("decisions"))}
    b = {"executor": _text(other.get("executor")), "decisions": _text(other.get("decisions"))}
    entry: dict[str, Any] = {"a": a, "b": b, "difference": None, "error": None}
    try:
        doc_a = decisions.read(Path(runs_dir) / a["decisions"])
        doc_b = decisions.read(Path(runs_dir) / b["decisions"])
    except decisions.DecisionsError as exc:
        entry["error"] = str(exc)
        entry["line"] = f"not compared: {exc}"
        return entry
    diff = decisions.first_difference(doc_a, doc_b)
    if diff is None:
        entry["line"] = (f"same decisions in the same arrival order "
                         f"({len(doc_a['decisions'])} decisions)")
        return entry
    entry["difference"] = {"kind": diff.kind, "trial": diff.trial, "rung": diff.rung,
                           "position": diff.position, "a": diff.a, "b": diff.b}
    entry["line"] = diff.text(a["executor"], b["executor"])
    return entry


def lines(entries: list[dict[str, Any]]) -> list[str]:
    """The report's text: a heading and one line per entry; [] without an entry."""
    if not entries:
        return []
    return ["scheduler decisions (decisions.json; asynchronous schedulers may differ under "
            "concurrency): where each executor's first differ from the baseline's",
            *(f"  {e['text']}" for e in entries)]
