"""Cell values and identifiers of result rows: how a value is written into a CSV cell (a
value that was not measured is an empty cell, never 0), group ids and row timestamps.

Torch-free.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import time
import uuid
from typing import Any


def format_value(v: Any) -> str:
    """One cell as text.

    ``None`` → ``""`` (not measured: an empty cell, never 0); ``bool`` → ``True``/``False``;
    ``float`` → ``repr`` (full precision), NaN and ±inf → ``""``; ``dict``/``list``/``tuple``
    → compact JSON; everything else ``str()``.
    """
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return float.__repr__(v) if math.isfinite(v) else ""
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, separators=(",", ":"), default=str)
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        # numpy float32 and friends: not a float subclass, str() is their shortest form.
        try:
            finite = math.isfinite(v)
        except (TypeError, ValueError, OverflowError):
            finite = True
        return str(v) if finite else ""
    return str(v)


def new_group_id(executor: str) -> str:
    """``<executor>_<8 lowercase hex>``, as the harness names groups."""
    return f"{executor}_{uuid.uuid4().hex[:8]}"


#: The harness's ``timestamp`` form: the writing host's local time, no zone.
LOCAL_FORM = "%Y%m%d_%H%M%S"


def check_timestamp(text: str) -> str:
    """Return ``text`` if it is a time ``--since`` takes: ISO 8601 with an offset
    (``2026-11-30T14:00:00+09:00``, ``...Z``) or the rows' old form ``YYYYmmdd_HHMMSS``
    (read as the reading host's local time). Rows are compared with it as instants
    (:func:`since_instant`, :func:`row_instant`), never as text.

    Raises:
        ValueError: naming the accepted forms.
    """
    since_instant(text)
    return text


def since_instant(text: str) -> float:
    """``--since``'s value (:func:`check_timestamp`) as Unix seconds.

    Raises:
        ValueError: neither form, or ISO 8601 without an offset (which zone it meant is
            not known), naming the accepted forms.
    """
    forms = ("give ISO 8601 with an offset (e.g. 2026-11-30T14:00:00+00:00) or "
             "YYYYmmdd_HHMMSS, read as this host's local time (e.g. 20261130_140000)")
    try:
        return time.mktime(time.strptime(text, LOCAL_FORM))
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: {forms}") from None
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset: {forms}")
    return when.timestamp()


def row_instant(row: dict[str, Any]) -> float | None:
    """When a results row was written, as Unix seconds: its ``time_utc`` (ISO 8601 with
    ``+00:00``), else its ``timestamp`` read as the reading host's local time (rows written
    before ``time_utc`` existed, or by the harness); None when neither can be read."""
    text = row.get("time_utc") or ""
    if text:
        try:
            when = datetime.datetime.fromisoformat(str(text))
            if when.tzinfo is not None:
                return when.timestamp()
        except ValueError:
            pass
    try:
        return time.mktime(time.strptime(str(row.get("timestamp") or ""), LOCAL_FORM))
    except (ValueError, OverflowError):
        return None


def utc_text(seconds: float) -> str:
    """``seconds`` (Unix) as ISO 8601 UTC, whole seconds: ``2026-12-04T15:50:05+00:00``."""
    return datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc).isoformat()


def row_stamps(seconds: float | None = None) -> dict[str, str]:
    """A row's ``timestamp`` (local time, the harness's form) and ``time_utc`` for the same
    instant (now unless ``seconds``)."""
    now = time.time() if seconds is None else seconds
    return {"timestamp": time.strftime(LOCAL_FORM, time.localtime(now)),
            "time_utc": utc_text(now)}


def timestamp_now() -> str:
    """Local time as ``YYYYmmdd_HHMMSS`` (the harness's ``timestamp`` column)."""
    return time.strftime(LOCAL_FORM)


def cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """``0-3,6``: the cores as ranges (what the ``cpu_affinity`` column holds)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


#: Number columns whose documented meaning allows a negative value (docs/results.md): losses
#: (a plugin's loss may be negative), R² (accuracy columns hold R² for regression, which is
#: negative for a model worse than the mean), hpo's best metric (a loss or R²), seeds and
#: temperatures. Every other number column is a count, a duration, a size, an energy, a
#: rate or a share: negative is impossible there.
SIGNED_COLUMNS = frozenset({"final_train_loss", "final_val_loss", "best_val_metric",
                            "seed", "gpu_temp_max_c"})

#: Columns where NaN or ±inf is a measurement, not damage: a validation loss (or the metric
#: made of it) can diverge while the training loss, which ends a job when it does, stays
#: finite; text in them is still damage.
NON_FINITE_OK = frozenset({"final_train_loss", "final_val_loss", "best_val_metric"})

#: Columns with an upper bound: accuracy (or R², never above 1).
AT_MOST_ONE = frozenset({"final_train_acc", "final_val_acc"})


def value_range(column: str) -> tuple[float, float]:
    """The closed range a finite value of the number column ``column`` can take; a value
    outside it (or NaN, ±inf, text) is damage, an empty cell is "not measured"."""
    low = -math.inf if column in SIGNED_COLUMNS or column in AT_MOST_ONE else 0.0
    return low, (1.0 if column in AT_MOST_ONE else math.inf)
