"""``engine.models.load(path)`` (issue 50): a saved job rebuilt as the model's own
``nn.Module`` through the model registry (a plugin's too), its weights loaded bit for bit
and checked against the digest in its JSON (a changed file raises, naming it); and the
documented example (examples/load_best_trial.py) picks the best saved hpo trial of a run
folder and evaluates it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import engine.models
from engine.errors import ConfigError
from engine.models.digest import weights_sha256
from engine.models.loader import DigestMismatch
from engine.models.save import write_member
from engine.parts.models import build_model
from engine.plugins import load_plugins
from engine.registry import DATASETS

ROOT = Path(__file__).resolve().parents[4]
PLUGINS = ROOT / "tests" / "fixtures" / "plugins"


def _save(attempt: Path, job_id: str, model: str, kwargs: dict, seed: int,
          val_acc: float = 0.5) -> tuple[Path, dict]:
    """A trained-looking ``model`` for wine saved as job ``job_id``: its weights file and
    the state it holds."""
    load_plugins()
    spec = DATASETS.get("wine")
    torch.manual_seed(seed)
    module = build_model(model, tuple(spec.in_shape), spec.n_outputs, kwargs)
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    write_member(attempt, job_id, state, {
        "job_id": job_id, "model": model, "model_kwargs": kwargs, "dataset": "wine",
        "task": None, "seed": seed, "executor": "seq", "precision": "fp32",
        "weights_sha256": weights_sha256(state), "metrics": {"final_val_acc": val_acc}})
    return attempt / "models" / f"{job_id}.safetensors", state


def test_load_rebuilds_the_module_with_its_weights(tmp_path):
    path, state = _save(tmp_path, "D_ens_m0", "mlp_bn", {"hidden": 16}, seed=3)
    rng = torch.random.get_rng_state()
    module, meta = engine.models.load(path)
    assert torch.equal(torch.random.get_rng_state(), rng)  # the caller's generator untouched
    assert isinstance(module, torch.nn.Module) and not module.training
    back = module.state_dict()
    assert sorted(back) == sorted(state)  # the user's key names, buffers included
    assert all(torch.equal(back[k], state[k]) for k in state)
    assert meta["job_id"] == "D_ens_m0" and meta["weights_sha256"] == weights_sha256(back)
    same, _ = engine.models.load(path.with_suffix(".json"))  # either file names the model
    x = torch.randn(5, DATASETS.get("wine").in_shape[0])
    assert torch.equal(same(x), module(x))


def test_a_plugin_model_comes_back_as_its_own_class(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_test_plugin")
    path, state = _save(tmp_path, "P_m0", "explode_on_step", {}, seed=1)
    module, _ = engine.models.load(path)
    assert type(module).__name__ == "Explode"  # the class the plugin's builder defines
    assert torch.equal(module.state_dict()["fc.weight"], state["fc.weight"])


def test_a_changed_weights_file_raises_naming_it(tmp_path):
    path, _ = _save(tmp_path, "D_ens_m0", "mlp", {"hidden": 8}, seed=2)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01  # one bit of the last tensor's last byte
    path.write_bytes(bytes(raw))
    with pytest.raises(DigestMismatch, match=str(path)):
        engine.models.load(path)


def test_a_model_no_registry_knows_is_one_line_naming_the_json(tmp_path):
    path, _ = _save(tmp_path, "D_ens_m0", "mlp", {"hidden": 8}, seed=2)
    doc = path.with_suffix(".json")
    doc.write_text(json.dumps({**json.loads(doc.read_text()), "model": "mlpp"}))
    with pytest.raises(ConfigError, match=f"{doc}.*unknown model 'mlpp'"):
        engine.models.load(path)
    with pytest.raises(ConfigError, match="no such file"):
        engine.models.load(tmp_path / "models" / "nothing.safetensors")


def test_the_example_loads_the_best_trial_and_evaluates_it(tmp_path):
    run = tmp_path / "run"
    for i, acc in enumerate((0.61, 0.93, 0.72)):  # trial 1 is the best
        _save(run / "cells" / f"00{i + 1}-D_hpo-seq-p1-aaaa000{i}" / "attempt-1",
              f"D_hpo_t{i}", "mlp", {"hidden": 8}, seed=i, val_acc=acc)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "load_best_trial.py"),
                           str(run), "--exp", "D_hpo"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("D_hpo_t1 (002-D_hpo-seq-p1-aaaa0001): ") and "val_acc 0.9300" in first
    assert second.startswith("accuracy ") and "whole dataset" in second
