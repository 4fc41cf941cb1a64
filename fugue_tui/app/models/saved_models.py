"""Which trained models of a group row are on disk (issue 50, ``save_models``), in the
words the Results screen's row pane shows: ``2 on disk: runs/c/cells/…/attempt-1/models``,
``none on disk (save failed: …)``. Read from the row's run folder (the runs folder its
``source`` file lies in, ``<campaign>/cells/*-<key8>/attempt-<n>/models/``) through
:mod:`engine.models.listing`: a glob and the JSON of each model, no torch. Textual-free."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fugue_tui.format import fmt_text


def _attempt(value: Any) -> int | None:
    try:
        return int(float(fmt_text(value)))
    except ValueError:
        return None


def models_line(row: dict[str, Any]) -> str | None:
    """The pane's ``models`` line for group ``row`` (its ``source``, ``campaign_id``,
    ``cell_key``, ``attempt`` and, when the rows have it, ``save_status``); None when the
    row names no run folder or neither saved nor asked to save anything."""
    from engine.models.listing import attempt_models

    source, campaign = fmt_text(row.get("source")), fmt_text(row.get("campaign_id"))
    key, attempt = fmt_text(row.get("cell_key")), _attempt(row.get("attempt"))
    status = fmt_text(row.get("save_status"))
    if not (source and campaign and key and attempt):
        return None
    cells = Path(source).parent / campaign / "cells"
    folder = next(cells.glob(f"*-{key[:8]}/attempt-{attempt}"), None) if cells.is_dir() else None
    models = attempt_models(folder)[0] if folder is not None else []
    if models:
        said = f"{len(models)} on disk: {folder / 'models' if folder else ''}"
        return said + (f" (save {status})" if status and status != "ok" else "")
    return f"none on disk (save {status})" if status else None
