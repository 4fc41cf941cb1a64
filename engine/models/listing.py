"""Which trained models a run folder holds (issue 50), read from the JSON written beside
each one (:mod:`engine.models.save`) and the attempts' ``spec.json`` — never importing
torch, so ``fugue-tui models``, the batch's closing note and the dashboard can ask.

A *folder* is a run folder (``<runs_dir>/<campaign>/``, with ``cells/``), one cell's
folder (``cells/<slug>-<key8>/``), one attempt (``attempt-<n>/``) or its ``models/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.models.save import models_dir

#: The metric a listing shows for a model, the first of these its JSON holds.
METRICS = ("final_val_acc", "final_val_loss", "final_train_acc", "final_train_loss")


@dataclass(frozen=True)
class SavedModel:
    """One saved job: its JSON's fields and its weights file (``size`` None: the JSON is
    there but the weights are not)."""

    cell: str
    attempt: int
    job_id: str
    weights: Path
    meta: dict[str, Any]
    size: int | None

    @property
    def executor(self) -> str | None:
        return self.meta.get("executor")

    @property
    def digest(self) -> str | None:
        return self.meta.get("weights_sha256")

    @property
    def metric(self) -> tuple[str, float] | None:
        """``("val_acc", 0.91)``: the first of :data:`METRICS` the JSON holds, or None."""
        metrics = self.meta.get("metrics") or {}
        for name in METRICS:
            value = metrics.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return name.removeprefix("final_"), float(value)
        return None


@dataclass
class CellModels:
    """One cell's saved models (every attempt's), what its last attempt asked
    (``save_models``: ``false``, ``true``, ``best``; None: its spec is unreadable) and the
    JSON files that could not be read (one line each)."""

    cell: str
    asked: str | None = None
    models: list[SavedModel] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _attempt_number(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return 0


def _asked(attempt: Path) -> str | None:
    """``save_models`` of the attempt's spec (``false`` for a spec older than the key)."""
    try:
        doc = json.loads((attempt / "spec.json").read_text())
        return str(doc["cell"].get("save_models", "false"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def attempt_models(attempt: Path, cell: str | None = None) -> tuple[list[SavedModel], list[str]]:
    """The saved models of one attempt folder, by job id, and a line for each JSON that
    could not be read."""
    cell = cell or attempt.parent.name
    found, problems = [], []
    folder = models_dir(attempt)
    for doc in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            meta = json.loads(doc.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            problems.append(f"{doc}: cannot read: {exc}")
            continue
        weights = doc.with_suffix(".safetensors")
        try:
            size: int | None = weights.stat().st_size
        except OSError:
            size = None
        found.append(SavedModel(cell, _attempt_number(attempt), str(meta.get("job_id", doc.stem)),
                                weights, meta, size))
    return found, problems


def _cell(cell_dir: Path, attempts: Iterable[Path]) -> CellModels:
    out = CellModels(cell_dir.name)
    ordered = sorted(attempts, key=_attempt_number)
    for attempt in ordered:
        models, problems = attempt_models(attempt, cell_dir.name)
        out.models += models
        out.problems += problems
    if ordered:
        out.asked = _asked(ordered[-1])
    return out


def scan(folder: str | Path) -> list[CellModels]:
    """Every cell of ``folder`` (a run folder, a cell folder, an attempt or its
    ``models/``) with its saved models, cells in folder order.

    Raises:
        ConfigError: ``folder`` is none of these (one line naming it).
    """
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError(f"{path}: no such folder (give a run folder, runs/<campaign>, or "
                          "one of its attempt folders)")
    if path.name == "models" and path.parent.name.startswith("attempt-"):
        path = path.parent
    if path.name.startswith("attempt-"):
        return [_cell(path.parent, [path])]
    if (path / "cells").is_dir():
        return [_cell(c, c.glob("attempt-*")) for c in sorted((path / "cells").iterdir())
                if c.is_dir()]
    attempts = list(path.glob("attempt-*"))
    if attempts:
        return [_cell(path, attempts)]
    raise ConfigError(f"{path}: not a run folder (no cells/), a cell folder or an attempt "
                      "folder: give runs/<campaign> or one of its cells/<cell>/attempt-<n>")


def saved_by_job(folder: str | Path) -> dict[str, SavedModel]:
    """The saved models of ``folder`` by job id, the latest attempt's when several are
    saved (what the Results screen and the exports look up)."""
    out: dict[str, SavedModel] = {}
    for cell in scan(folder):
        for model in sorted(cell.models, key=lambda m: m.attempt):
            out[model.job_id] = model
    return out


def cells_without_models(cells: Iterable[CellModels], asked_only: bool = False) -> list[str]:
    """The cells that hold no saved model (``asked_only``: only those whose last attempt
    asked for some: a failed save, or a cell that ran before saving was asked)."""
    return [c.cell for c in cells if not c.models
            and (not asked_only or c.asked in ("true", "best"))]


def human_size(size: int | None) -> str:
    """``1.2 MiB``; ``—`` for a missing file."""
    if size is None:
        return "—"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - the loop returns


__all__ = ["METRICS", "CellModels", "SavedModel", "attempt_models", "cells_without_models",
           "human_size", "saved_by_job", "scan"]
