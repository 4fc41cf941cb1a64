"""Saving one trained job's weights (issue 50): ``<attempt>/models/<job_id>.safetensors``
(an ordinary state_dict: the user's key names, no leading member index) beside
``<job_id>.json`` (what the model is and how it was trained, its digest and metrics).

The interface the executors call after the group window, one job at a time, in the
process that holds the weights (the cell, an mp worker, a Ray actor).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The values of the ``save_models`` key (campaign, experiment, ``run --save-models``).
SAVE_MODES = ("false", "true", "best")


def models_dir(attempt_dir: Path) -> Path:
    """The folder of an attempt's saved models."""
    return Path(attempt_dir) / "models"


def write_member(attempt_dir: Path, job_id: str, state: Mapping[str, Any],
                 meta: Mapping[str, Any]) -> int:
    """Write one job's ``state`` (name → tensor, any device) and its ``meta`` JSON.

    Returns the weights file's size in bytes. Both files are written to a temporary name
    and renamed, so a crash or a full disk never leaves a truncated model beside a JSON
    that describes it. Raises ``OSError`` (unwritable folder, disk full).
    """
    from safetensors.torch import save_file

    folder = models_dir(attempt_dir)
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"{job_id}.safetensors"
    tmp = weights.with_suffix(".safetensors.tmp")
    try:
        save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(tmp))
        os.replace(tmp, weights)
        doc = folder / f"{job_id}.json"
        tmp_doc = doc.with_suffix(".json.tmp")
        tmp_doc.write_text(json.dumps(dict(meta), indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp_doc, doc)
    finally:
        for leftover in (tmp, folder / f"{job_id}.json.tmp"):
            leftover.unlink(missing_ok=True)
    return weights.stat().st_size
