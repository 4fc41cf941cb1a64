"""Cell values and identifiers of result rows: how a value is written into a CSV cell (a
value that was not measured is an empty cell, never 0), group ids and row timestamps.

Torch-free.
"""

from __future__ import annotations

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


def check_timestamp(text: str) -> str:
    """Return ``text`` if it is a row timestamp (``YYYYmmdd_HHMMSS``); rows are compared with
    it as text (``--since``), so the format must be exact.

    Raises:
        ValueError: naming the expected form.
    """
    try:
        time.strptime(text, "%Y%m%d_%H%M%S")
    except ValueError:
        raise ValueError(f"{text!r} is not a time in the form YYYYmmdd_HHMMSS "
                         "(e.g. 20261130_140000)") from None
    return text


def timestamp_now() -> str:
    """Local time as ``YYYYmmdd_HHMMSS`` (the harness's ``timestamp`` column)."""
    return time.strftime("%Y%m%d_%H%M%S")


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
