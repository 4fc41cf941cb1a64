"""Load the best trial of an hpo experiment that a campaign kept, and evaluate it.

A campaign run with ``save_models = "best"`` (or ``true``, or ``fugue-tui run
--save-models best``) writes each hpo group's best trial under its attempt folder
(README, "Keeping the trained models"). This script finds the best of them in a run folder
by the metric their JSON records, rebuilds it as the model's own ``nn.Module`` with
``engine.models.load`` (the digest is checked on the way) and evaluates it on the
dataset's test split (the whole dataset when it has none: then it has seen part of it)::

    fugue-tui run --exp D_hpo --save-models best
    python examples/load_best_trial.py runs/run-D_hpo-<digest> --exp D_hpo
"""

from __future__ import annotations

import argparse
import sys

import torch

from engine.models import load
from engine.models.listing import SavedModel, scan
from engine.parts.datasets import load_dataset


def best_trial(models: list[SavedModel], exp: str) -> SavedModel | None:
    """The saved job of experiment ``exp`` with the best recorded metric: the highest
    accuracy, else the lowest loss; None when none of its jobs was saved."""
    mine = [m for m in models if m.job_id.startswith(f"{exp}_") and m.metric is not None]
    accuracies = [m for m in mine if m.metric[0].endswith("acc")]
    if accuracies:
        return max(accuracies, key=lambda m: m.metric[1])
    return min(mine, key=lambda m: m.metric[1], default=None)


def evaluate(module: torch.nn.Module, dataset: str) -> str:
    """Accuracy (classification) or mean squared error on the test split, in words."""
    data = load_dataset(dataset)
    split = "test split" if data.has_test else "whole dataset (it has no test split)"
    x, y = (data.test_x, data.test_y) if data.has_test else (data.train_x, data.train_y)
    with torch.no_grad():
        out = module(x)
    if data.task == "classification":
        return f"accuracy {(out.argmax(1) == y).float().mean().item():.4f} on the {split}"
    return f"mse {torch.mean((out.reshape(-1) - y.reshape(-1)) ** 2).item():.4g} on the {split}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_folder", help="runs/<campaign>")
    parser.add_argument("--exp", default="D_hpo", help="the hpo experiment (default D_hpo)")
    args = parser.parse_args(argv)
    models = [m for cell in scan(args.run_folder) for m in cell.models]
    chosen = best_trial(models, args.exp)
    if chosen is None:
        print(f"no saved trial of {args.exp} in {args.run_folder} (run it with "
              "save_models = \"best\")", file=sys.stderr)
        return 1
    module, meta = load(chosen.weights)  # rebuilt through the model registry, digest checked
    print(f"{meta['job_id']} ({chosen.cell}): {type(module).__name__} {meta['model']} "
          f"{meta.get('model_kwargs') or {}}, {chosen.metric[0]} {chosen.metric[1]:.4f}, "
          f"digest {meta['weights_sha256'][:12]}")
    print(evaluate(module, meta["dataset"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
