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


def has_models(runs_dir: str | Path, campaigns: Iterable[str], key: str) -> bool:
    """Whether a cell of key ``key`` kept a model in the run folder of one of
    ``campaigns`` (any attempt; any slug, so a cell reused from another campaign is found
    in that campaign's folder)."""
    return any(next(Path(runs_dir, c).glob(f"cells/*-{key[:8]}/attempt-*/models/*.json"), None)
               is not None for c in dict.fromkeys(campaigns) if c)


def _why_none(row: dict[str, str] | None) -> str:
    """Why a cell that asked for saved models has none, from its latest group row."""
    if row is None:
        return "it did not run"
    if row.get("status") != "ok":
        return f"its last attempt {row.get('status') or 'ended'}"
    status = row.get("save_status") or ""
    if status.startswith("failed"):
        return f"save {status}; its measured rows stand, --resume does not train it again"
    if not status:
        return "it ran without saving; --resume keeps its rows and does not train it again"
    return "its group had nothing to save"


def missing_models_note(cells: Iterable[Any], rows: Iterable[dict[str, str]],
                        runs_dir: str | Path, campaign_id: str) -> str | None:
    """The line a campaign's end prints when ``save_models`` asked for models that are
    not on disk: ``no saved models for 2 of the 3 cells that asked for them: D_ens seq pass
    1 (it ran without saving; ...); ...``; None when nothing was asked or every cell that
    asked has its models.

    ``cells``: the plan's cells (``label``, ``key``, ``save_models``); ``rows``: group
    rows (the latest of this campaign per cell key counts, else the latest of any campaign,
    which ``--reuse-from-any-campaign`` may have used); ``save_status`` is read when the
    rows have it.
    """
    asked = [c for c in cells if getattr(c, "save_models", "false") in ("true", "best")]
    if not asked:
        return None
    wanted = {c.key for c in asked}
    own: dict[str, dict[str, str]] = {}
    other: dict[str, dict[str, str]] = {}
    for row in rows:
        key = row.get("cell_key", "")
        if key in wanted:
            (own if row.get("campaign_id") == campaign_id else other)[key] = row
    missing = []
    for cell in asked:
        row = own.get(cell.key) or other.get(cell.key)
        source = row.get("campaign_id", "") if row else ""
        if not has_models(runs_dir, (campaign_id, source), cell.key):
            missing.append(f"{cell.label} ({_why_none(row)})")
    if not missing:
        return None
    return (f"no saved models for {len(missing)} of the {len(asked)} cell"
            f"{'s' if len(asked) != 1 else ''} that asked for them: " + "; ".join(missing))


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
           "has_models", "human_size", "missing_models_note", "saved_by_job", "scan"]
