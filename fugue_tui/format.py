"""How every front end shows a value: missing values, numbers, durations and rates. Pure
functions, no Rich, no Textual.

A value that is missing is never shown as 0. Two marks, kept apart on purpose because the
dashboard's snapshots and the tests show both:

* :data:`MISSING` ("—", em dash): a value that was not measured or does not apply — the
  results tables (report, Results screen), the figures, the bench summaries;
* :data:`PENDING` ("–", en dash): a value a progress view does not know (yet) — the
  ``--batch`` live view, the run screen, the plan preview (an ETA before the first step,
  the elapsed time of a queued cell, a cell with no configuration).

Exports with their own convention pass their mark (LaTeX: ``--``).
"""

from __future__ import annotations

import math
from typing import Any

#: A value that was not measured or does not apply (results, report, figures).
MISSING = "—"
#: A value a progress view does not know (yet) (live view, run screen, plan preview).
PENDING = "–"


def finite(value: Any) -> float | None:
    """``value`` as a finite float; None when it is missing (None, NaN, inf, ``""``, text
    that is not a number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_text(value: Any) -> str:
    """A text cell: ``""`` for a missing value (None, NaN), else ``str(value)``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def fmt_number(value: Any, fmt: str, missing: str = MISSING) -> str:
    """``value`` in ``fmt`` (``".3f"``, ``",.0f"`` ...); ``missing`` when it is not a finite
    number."""
    number = finite(value)
    return missing if number is None else format(number, fmt)


def fmt_rate(value: Any, missing: str = MISSING) -> str:
    """A rate (samples/s) as a whole number with thousands separators: ``12,345``."""
    return fmt_number(value, ",.0f", missing)


def fmt_duration(seconds: float | None, missing: str = PENDING) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour); ``missing`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return missing
    total = int(max(0.0, seconds) + 0.5)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def fmt_seconds(value: float | None, missing: str = PENDING) -> str:
    """``12.34 s``; ``missing`` when unknown."""
    if value is None or not math.isfinite(value):
        return missing
    return f"{value:.2f} s"


def terminal_columns() -> int:
    """The width plain output is wrapped to: the terminal's, else ``COLUMNS``, else 80
    (what argparse's help uses too)."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def wrap_line(line: str, width: int | None = None, hang: int = 2) -> list[str]:
    """``line`` wrapped to ``width`` columns (default :func:`terminal_columns`), each
    continuation indented ``hang`` columns more than the line; words (paths, commands)
    are never split, so a word longer than the width stays whole on its own line."""
    import textwrap

    width = width or terminal_columns()
    if len(line) <= width:
        return [line]
    lead = line[:len(line) - len(line.lstrip())]
    return textwrap.wrap(line, width=width, subsequent_indent=lead + " " * hang,
                         break_long_words=False, break_on_hyphens=False) or [line]
