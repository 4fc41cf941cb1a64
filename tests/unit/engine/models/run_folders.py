"""A run folder with saved models, made here for tests of what reads them
(``fugue-tui models``, the closing note, the Results screen): ``cells/<cell>/attempt-<n>/``
with a ``spec.json`` that says what the cell asked (``cell.save_models``) and, per saved
job, the files :func:`engine.models.save.write_member` writes (real, tiny weights)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.models.digest import weights_sha256
from engine.models.save import write_member


def tiny_state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"net.0.weight": torch.randn(3, 4, generator=g), "net.0.bias": torch.zeros(3)}


def make_run(root: Path, cells: list[tuple[str, str, list[str]]], attempt: int = 1,
             executor: str = "seq") -> Path:
    """``root`` as a run folder: each ``(cell folder, save_models asked, saved job ids)``;
    returns ``root``. Job i's val accuracy is 0.5 + i / 10."""
    for cell, asked, jobs in cells:
        folder = root / "cells" / cell / f"attempt-{attempt}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.json").write_text(json.dumps({"cell": {"save_models": asked}}))
        for i, job in enumerate(jobs):
            state = tiny_state(i)
            write_member(folder, job, state, {
                "job_id": job, "model": "mlp", "model_kwargs": {"hidden": 8},
                "dataset": "wine", "task": None, "seed": 42 + i, "executor": executor,
                "precision": "fp32", "weights_sha256": weights_sha256(state),
                "metrics": {"final_val_acc": 0.5 + i / 10, "final_val_loss": 1.0}})
    return root
