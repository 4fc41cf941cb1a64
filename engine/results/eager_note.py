"""The note a report prints when unified_model buckets trained eagerly (issue 45).

A bucket the checks sent eager (or a bucket of one member) trains without the vectorised
forward: the row's ``features`` then says ``vf:0`` and ``eager_buckets`` says how many of
the cell's buckets and why the first did. The speedup of such a cell is not the stacked
model's, so `report`, the `--batch` summary (which is the report) and the dashboard's
results header say it in one line instead of leaving it to the cell log.

Torch-free; reads rows as a pandas frame or as dicts (a CSV's text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def eager_count(value: Any) -> int:
    """n of an ``eager_buckets`` value ``"n/m: reason"`` (``"0/m"``); 0 for an empty,
    missing or unreadable one (missing is empty, never a count)."""
    if not isinstance(value, str) or "/" not in value:
        return 0
    head = value.split("/", 1)[0].strip()
    return int(head) if head.isdigit() else 0


def eager_notes(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line naming the rows (``exp_id executor pass``, the first three) whose
    ``eager_buckets`` count is above 0 while ``vf:1`` was asked for, with each one's value;
    [] when none (or the column is missing: older rows, other executors)."""
    # vf:0 asked for (rung A, baseline): every bucket eager as requested, nothing to say
    hit = [r for r in rows if eager_count(r.get("eager_buckets")) > 0
           and "vf:0" not in str(r.get("features_requested") or "")]
    if not hit:
        return []
    named = ", ".join(f"{r.get('exp_id')} {r.get('executor')} pass {_whole(r.get('pass'))} "
                      f"({r.get('eager_buckets')})" for r in hit[:3])
    more = f" and {len(hit) - 3} more" if len(hit) > 3 else ""
    return [f"{len(hit)} unified_model row(s) trained bucket(s) eagerly, not vectorised "
            f"(eager_buckets; features says vf:0): {named}{more}"]


def _whole(value: Any) -> Any:
    """A pass number as written (a frame reads it as a float: 1.0 → 1)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
