"""Where two executors' scheduler decisions first differ, per hpo cell (issue 46), for
``fugue-tui report`` (text and ``--json``). Torch-free.

Pairing follows time to best's baseline rule (:data:`engine.results.analysis.TTB_BASELINE_COLUMNS`):
each non-seq row with a ``decisions`` file (engine.results.decisions) is compared with the
seq file of the same provenance key (machine, gpu_name, torch_version, cuda_version;
``campaign_hash`` too with ``by_campaign``), experiment, workload, K, precision, compile
mode and scheduler, at the same pass — across campaigns when the time-to-best table pairs
them so, preferring seq of the row's own campaign, else the latest (``time_utc``). Each
side is its cell's latest attempt. The line names the first (trial, rung) decided
otherwise, or, with the same decisions, the first arrival position that differs, or "same
decisions in the same arrival order"; without a seq file to pair with, it says so (one
line, never silence). Asynchronous schedulers may differ under concurrency (the docs allow
it); this says where.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engine.results import decisions
from engine.results.analysis import (
    CELL_COLUMNS,
    TTB_BASELINE_COLUMNS,
    provenance_columns,
)
from engine.results.derived import BASELINE_EXECUTOR, FIFO


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


def _value(row: Mapping[str, Any], column: str) -> str:
    if column == "sched":  # as analysis derives it: an empty scheduler is fifo
        return _text(row.get("scheduler")) or FIFO
    return _text(row.get(column))


def _latest(rows: Iterable[Mapping[str, Any]], by_campaign: bool
            ) -> list[tuple[int, Mapping[str, Any]]]:
    """The rows naming a decisions file, one per run (campaign, cell, pass): its latest
    attempt, with its load position."""
    ident = (["campaign_id", *provenance_columns(by_campaign), "workload_key",
              *CELL_COLUMNS, "sched", "pass"])
    runs: dict[tuple[str, ...], tuple[int, Mapping[str, Any]]] = {}
    for at, row in enumerate(rows):
        if not _text(row.get("decisions")):
            continue
        key = tuple(_value(row, c) for c in ident)
        earlier = runs.get(key)
        if earlier is None or _number(row.get("attempt")) >= _number(earlier[1].get("attempt")):
            runs[key] = (at, row)
    return list(runs.values())


def compare(rows: Iterable[Mapping[str, Any]], runs_dir: str | Path,
            by_campaign: bool = False) -> list[dict[str, Any]]:
    """One entry per non-seq hpo run (campaign, cell, pass; its latest attempt) with a
    decisions file, paired with seq's as the module doc says (``by_campaign``: only seq of
    the same ``campaign_hash``): ``exp_id``, ``scheduler``, ``pass``, ``campaign_id`` (the
    run's), ``baseline_campaign_id`` (seq's; None without one), ``a`` (seq: ``executor``,
    ``decisions`` — the file relative to ``runs_dir``, None without one) and ``b`` (the
    run), ``difference`` (None: the same decisions in the same arrival order, or nothing
    to compare with; else kind, trial, rung, position and what each side had), ``error``
    (a file that could not be read: one line; then no difference) and ``text`` (one
    line). Ordered by experiment, scheduler, pass, executor, campaign. [] when only seq
    recorded decisions."""
    pair = [*provenance_columns(by_campaign), *TTB_BASELINE_COLUMNS, "pass"]
    seq: dict[tuple[str, ...], list[tuple[int, Mapping[str, Any]]]] = {}
    others = []
    for at, row in _latest(rows, by_campaign):
        if _text(row.get("executor")) == BASELINE_EXECUTOR:
            seq.setdefault(tuple(_value(row, c) for c in pair), []).append((at, row))
        else:
            others.append(row)
    out = []
    for row in others:
        campaign = _text(row.get("campaign_id"))
        candidates = seq.get(tuple(_value(row, c) for c in pair), [])
        # the run's own campaign first, else the latest seq run (ISO times sort as text)
        base = max(candidates, default=None, key=lambda c: (
            _text(c[1].get("campaign_id")) == campaign, _text(c[1].get("time_utc")), c[0]))
        exp_id, scheduler, pass_ = (_text(row.get(c)) for c in ("exp_id", "scheduler", "pass"))
        executor = _text(row.get("executor"))
        where = f"{exp_id} {scheduler} pass {pass_ or '—'}: {executor}"
        if base is None:
            entry = _unpaired(row, pass_, by_campaign)
            entry["text"] = f"{where}: {entry.pop('line')}"
        else:
            entry = _entry(runs_dir, base[1], row)
            seq_campaign = _text(base[1].get("campaign_id"))
            entry["baseline_campaign_id"] = seq_campaign or None
            other = "" if seq_campaign == campaign else f" of campaign {seq_campaign}"
            entry["text"] = f"{where} vs {BASELINE_EXECUTOR}{other}: {entry.pop('line')}"
        entry.update(campaign_id=campaign or None, exp_id=exp_id or None,
                     scheduler=scheduler or None,
                     **{"pass": int(pass_) if pass_.isdigit() else None})
        out.append(entry)
    out.sort(key=lambda e: (e["exp_id"] or "", e["scheduler"] or "", e["pass"] or 0,
                            e["b"]["executor"], e["campaign_id"] or ""))
    return out


def _unpaired(row: Mapping[str, Any], pass_: str, by_campaign: bool) -> dict[str, Any]:
    """The entry of a run without a seq file to pair with: says so, compares nothing."""
    b = {"executor": _text(row.get("executor")), "decisions": _text(row.get("decisions"))}
    same = ("campaign, " if by_campaign else "") + (
        "machine and stack, workload, K, precision, compile mode and scheduler")
    line = (f"no {BASELINE_EXECUTOR} decisions to compare with (none of the same {same} "
            f"at pass {pass_ or '—'}; time to best pairs cells the same way)")
    return {"a": {"executor": BASELINE_EXECUTOR, "decisions": None}, "b": b,
            "difference": None, "error": None, "baseline_campaign_id": None, "line": line}


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
            "concurrency): where each executor's first differ from seq's, paired as time to "
            "best pairs cells",
            *(f"  {e['text']}" for e in entries)]
