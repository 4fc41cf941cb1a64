"""Loading a saved model back (issue 50): ``engine.models.load(path)`` rebuilds the user's
own ``nn.Module`` through the model registry (built-ins and plugins: the same
:func:`engine.parts.models.build_model` a cell trains with), loads the weights a cell saved
(:mod:`engine.models.save`) and checks them against the digest in their JSON::

    from engine.models import load

    module, meta = load("runs/quick/cells/003-D_hpo-seq-p1-1a2b3c4d/attempt-1/models/D_hpo_t5.safetensors")
    module(x)                        # eval mode, on the CPU (device= to move it)

Imports torch (outside the runner's torch-free contract): the package exports ``load``
lazily (this module is not named ``load``: see :mod:`engine.models`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import ConfigError


class DigestMismatch(ConfigError):
    """The weights file does not hold the weights its JSON describes (a file changed or
    damaged after saving): raised naming the file and both digests."""


def model_files(path: str | Path) -> tuple[Path, Path]:
    """``(weights, json)`` of a saved model given either file, or the path without suffix.

    Raises:
        ConfigError: either file is missing (one line naming it).
    """
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".safetensors", ".json") else path
    weights, doc = stem.with_suffix(".safetensors"), stem.with_suffix(".json")
    for needed in (weights, doc):
        if not needed.is_file():
            raise ConfigError(f"{needed}: no such file (a saved model is a <job_id>.safetensors "
                              "beside its <job_id>.json, under <attempt>/models/)")
    return weights, doc


def read_meta(doc: Path) -> dict[str, Any]:
    """The JSON saved beside a model.

    Raises:
        ConfigError: unreadable, not a JSON object, or without ``model`` / ``dataset``.
    """
    try:
        meta = json.loads(doc.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{doc}: cannot read the model's JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{doc}: the model's JSON is not an object")
    for key in ("model", "dataset"):
        if not isinstance(meta.get(key), str):
            raise ConfigError(f"{doc}: the model's JSON has no {key!r}")
    return meta


def load(path: str | Path, device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """Rebuild a saved job's model with its trained weights: ``(module, meta)``.

    Args:
        path: the ``.safetensors`` file (or its ``.json``, or either without suffix).
        device: where the module goes (``cpu``, ``cuda:0``); its weights are read on the
            CPU and checked there.

    Returns:
        The user's own ``nn.Module`` (the class its registered builder returns, built with
        the saved ``model_kwargs`` for the dataset's input shape and outputs), in eval
        mode, and the model's JSON (job id, seed, executor, precision, metrics, digest).

    Raises:
        ConfigError: a missing or unreadable file, a model or dataset no registry knows
            (plugins are loaded first: ``FUGUE_PLUGINS``, entry points), or weights that
            do not fit the rebuilt module (one line naming the file).
        DigestMismatch: the weights' digest is not the one in the JSON.
    """
    import torch
    from safetensors.torch import load_file

    from engine.models.digest import weights_sha256
    from engine.parts.models import build_model
    from engine.plugins import load_plugins
    from engine.registry import DATASETS

    weights, doc = model_files(path)
    meta = read_meta(doc)
    load_plugins()
    where = str(doc)
    spec = DATASETS.get(meta["dataset"], where)
    try:
        state = load_file(str(weights), device="cpu")
    except Exception as exc:  # noqa: BLE001 - safetensors' own errors: one line
        raise ConfigError(f"{weights}: cannot read the weights: {exc}") from None
    digest = weights_sha256(state)
    if meta.get("weights_sha256") and digest != meta["weights_sha256"]:
        raise DigestMismatch(f"{weights}: the weights' digest {digest[:16]}… is not the "
                             f"{str(meta['weights_sha256'])[:16]}… its JSON records: the "
                             "file changed after it was saved")
    # the build draws initial values from torch's generator: the caller's stays as it was
    with torch.random.fork_rng(devices=[]):
        module = build_model(meta["model"], tuple(spec.in_shape), int(spec.n_outputs),
                             meta.get("model_kwargs") or {}, where=where)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        raise ConfigError(f"{weights}: the weights do not fit model {meta['model']!r}: "
                          f"{' '.join(line.strip() for line in first[:3])}") from None
    return module.to(device).eval(), meta


__all__ = ["DigestMismatch", "load", "model_files", "read_meta"]
