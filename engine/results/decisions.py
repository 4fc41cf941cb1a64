"""A cell's early-stopping decisions, ``attempt-<n>/decisions.json`` (issue 46): what each
executor's scheduler decided at each rung, in the order the results arrived, so that two
executors' stops can be compared decision by decision. Torch-free.

**The file** (schema :data:`SCHEMA`, docs/results.md "decisions.json"), one JSON object::

    {"schema": 1, "executor": "seq", "scheduler": "asha", "metric": "val_loss",
     "mode": "min", "grace_period": 1, "reduction_factor": 2, "max_t": 4,
     "trials": ["D_hpo_j0", ...],                       # trial index -> job id
     "decisions": [{"arrival": 1, "trial": "D_hpo_j0", "index": 0, "rung": 1,
                    "value": 0.53, "decision": "continue"}, ...]}

``decisions`` lists one entry per result the scheduler judged, in arrival order:
``arrival`` its 1-based position among the judged results, ``rung`` the epoch it judged
(asha, hyperband: a rung of the trial's bracket; median: every epoch from grace_period on;
sha: each rung, where every trial waits), ``value`` the metric there (null: NaN or
missing), ``decision`` one of :data:`DECISIONS` (``continue``: asha/median let it go on;
``promote``: sha kept it at the rung; ``stop``: stopped there). A trial's last planned
epoch is no decision (it has finished). ``fifo`` decides nothing: no file.

The cell writes the file whole or not at all (a temporary file, then ``os.replace``) and
names it in the group row's ``decisions`` column, relative to the runs folder.
:func:`first_difference` says where two files first differ (``fugue-tui report``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: The file's name in the attempt folder.
FILE = "decisions.json"
#: Version of the file's layout; a reader refuses a later one.
SCHEMA = 1
#: What a decision can be (module docstring).
DECISIONS = ("continue", "promote", "stop")


@dataclass(frozen=True)
class Decision:
    """One judged result: its arrival position (1-based), the trial (job id and index),
    the rung (epoch), the metric value (None: NaN or missing) and the decision."""

    arrival: int
    trial: str
    index: int
    rung: int
    value: float | None
    decision: str


@dataclass
class DecisionLog:
    """The decisions of one cell as its scheduler makes them (``add`` in arrival order, or
    with the ``arrival`` a synchronous rung recorded when the result came)."""

    executor: str
    scheduler: str
    metric: str
    mode: str
    trials: list[str]
    grace_period: int | None = None
    reduction_factor: int | None = None
    max_t: int | None = None
    decisions: list[Decision] = field(default_factory=list)
    _arrived: int = 0

    def arrive(self) -> int:
        """The next arrival position (a result the scheduler judges)."""
        self._arrived += 1
        return self._arrived

    def add(self, index: int, rung: int, value: float | None, decision: str,
            arrival: int | None = None) -> Decision:
        """Record trial ``index``'s decision at ``rung`` (``arrival``: from :meth:`arrive`
        when the result came; default: now)."""
        if decision not in DECISIONS:
            raise ValueError(f"decision {decision!r}: expected one of {DECISIONS}")
        number = value if value is None else float(value)
        entry = Decision(arrival=self.arrive() if arrival is None else int(arrival),
                         trial=self.trials[index], index=int(index), rung=int(rung),
                         value=None if number is None or not math.isfinite(number) else number,
                         decision=decision)
        self.decisions.append(entry)
        return entry

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object, decisions in arrival order."""
        return {"schema": SCHEMA, "executor": self.executor, "scheduler": self.scheduler,
                "metric": self.metric, "mode": self.mode, "grace_period": self.grace_period,
                "reduction_factor": self.reduction_factor, "max_t": self.max_t,
                "trials": list(self.trials),
                "decisions": [asdict(d) for d in sorted(self.decisions,
                                                        key=lambda d: (d.arrival, d.index))]}

    def write(self, attempt_dir: str | Path | None) -> Path | None:
        """Write ``<attempt_dir>/decisions.json`` (whole or not at all); None: no attempt
        folder (an executor run outside a cell) or ``fifo`` (nothing decided)."""
        if attempt_dir is None or self.scheduler == "fifo":
            return None
        path = Path(attempt_dir) / FILE
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.to_dict(), indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        return path


class DecisionsError(ValueError):
    """An unreadable decisions file: one line naming it and what is wrong."""


def read(path: str | Path) -> dict[str, Any]:
    """The file's JSON object, checked (schema, keys, decisions).

    Raises:
        DecisionsError: missing, torn, a later schema or a malformed entry, naming the file.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DecisionsError(f"{path}: unreadable decisions file "
                             f"({exc.__class__.__name__}: {exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("decisions"), list):
        raise DecisionsError(f"{path}: not a decisions file (no 'decisions' list)")
    if doc.get("schema") != SCHEMA:
        raise DecisionsError(f"{path}: decisions schema {doc.get('schema')!r}, this version "
                             f"reads {SCHEMA}")
    for n, entry in enumerate(doc["decisions"], 1):
        if (not isinstance(entry, dict) or entry.get("decision") not in DECISIONS
                or not isinstance(entry.get("rung"), int)
                or not isinstance(entry.get("trial"), str)):
            raise DecisionsError(f"{path}: decision {n} malformed: {entry!r}")
    return doc


@dataclass(frozen=True)
class Difference:
    """Where two decision files first differ. ``kind``: ``trials`` (not the same trials),
    ``decision`` (the first (trial, rung) — by rung, then trial index — decided otherwise
    or decided by one only), ``arrival`` (same decisions, the first arrival position whose
    (trial, rung) differs). ``a`` and ``b``: what each side had there."""

    kind: str
    trial: str | None
    rung: int | None
    position: int | None
    a: str
    b: str

    def text(self, name_a: str, name_b: str) -> str:
        """One line: ``first differ at trial T rung 2: seq stop (val_loss 0.41, arrival 5),
        ray continue (val_loss 0.41, arrival 1)``."""
        if self.kind == "trials":
            return f"not the same trials: {name_a} {self.a}; {name_b} {self.b}"
        if self.kind == "decision":
            return (f"first differ at trial {self.trial} rung {self.rung}: {name_a} {self.a}, "
                    f"{name_b} {self.b}")
        return (f"same decisions, arrival order first differs at decision {self.position}: "
                f"{name_a} {self.a}, {name_b} {self.b}")


def _said(entry: dict[str, Any] | None, metric: str) -> str:
    if entry is None:
        return "no decision"
    value = entry.get("value")
    shown = "NaN" if value is None else f"{float(value):.4g}"
    return f"{entry['decision']} ({metric} {shown}, arrival {entry.get('arrival')})"


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> Difference | None:
    """Where decision files ``a`` and ``b`` (:func:`read`) first differ, or None (the same
    decisions in the same arrival order). Values are not compared: executors whose
    arithmetic differs within the parity contract still make the same decisions."""
    if list(a.get("trials") or []) != list(b.get("trials") or []):
        return Difference("trials", None, None, None, _trials_text(a), _trials_text(b))
    metric = a.get("metric") or b.get("metric") or "value"
    by_a = {(d["rung"], d["index"]): d for d in a["decisions"]}
    by_b = {(d["rung"], d["index"]): d for d in b["decisions"]}
    for key in sorted(set(by_a) | set(by_b)):
        da, db = by_a.get(key), by_b.get(key)
        if da is None or db is None or da["decision"] != db["decision"]:
            trial = (da or db or {}).get("trial")
            return Difference("decision", trial, key[0], None, _said(da, metric),
                              _said(db, metric))
    order_a = _arrivals(a["decisions"])
    order_b = _arrivals(b["decisions"])
    for n, (x, y) in enumerate(zip(order_a, order_b, strict=False), 1):
        if x != y:
            return Difference("arrival", None, None, n, f"trial {x[0]} rung {x[1]}",
                              f"trial {y[0]} rung {y[1]}")
    return None


def _arrivals(decisions: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    ordered = sorted(decisions, key=lambda d: (d.get("arrival", 0), d.get("index", 0)))
    return [(d["trial"], d["rung"]) for d in ordered]


def _trials_text(doc: dict[str, Any]) -> str:
    trials = list(doc.get("trials") or [])
    return f"{len(trials)} trial(s) " + ", ".join(trials[:4]) + (" …" if len(trials) > 4 else "")
