"""The self-check's torch side on a few paths (the whole matrix runs in
tests/unit/fugue_tui/commands/test_selfcheck_cli.py): exact kernels come out bit for bit,
the batched kernels at or within the contract's bound, and a stack whose trained values
are perturbed after training is caught as outside bound, with exit status 1, under exact
(by construction) and batched (a bound) kernels and under Adam's looser bound alike."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import engine.selfcheck.run as run_mod  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.parts import models as models_mod  # noqa: E402
from engine.selfcheck.verdict import BIT_FOR_BIT, OUTSIDE, WITHIN  # noqa: E402

PICKED = {"mlp · sgd · exact · fp32", "mlp · sgd-lrs · batched · fp32",
          "mlp_bn · adam · batched · fp32", "simplecnn · sgd · exact · fp32"}


def _only(case):
    return case.name in PICKED


def test_exact_is_bit_for_bit_and_batched_within_its_bound():
    body = run_mod.selfcheck("cpu", only=_only)
    paths = {p["name"]: p for p in body["paths"]}
    assert set(paths) == PICKED and body["exit_status"] == 0
    for name in ("mlp · sgd · exact · fp32", "simplecnn · sgd · exact · fp32"):
        assert paths[name]["verdict"] == BIT_FOR_BIT and paths[name]["holds"] == "construction"
    for name in ("mlp · sgd-lrs · batched · fp32", "mlp_bn · adam · batched · fp32"):
        # bit for bit is allowed where the BLAS happens to round alike (some hosts)
        assert paths[name]["verdict"] in (BIT_FOR_BIT, WITHIN), paths[name]["text"]
        assert paths[name]["compared"] > 3 * 4  # every parameter of every member
    assert paths["mlp_bn · adam · batched · fp32"]["note"]  # running stats left out: said
    m = body["machine"]
    assert m["torch_version"] == torch.__version__ and m["isa"] and m["threads"] >= 1


class _Perturbed(UnifiedExecutor):
    """unified_model with one member's first weight moved by 0.1 after training: more than
    any bound of the contract (Adam's, the loosest, is 0.025 here)."""

    def run(self, jobs, ctx):
        results = super().run(jobs, ctx)
        stacked = models_mod._WATCHERS[-1]  # the modules this run built (built_models)
        with torch.no_grad():
            next(stacked["m1"].parameters()).add_(0.1)
        return results


def test_a_perturbed_stack_is_outside_its_bound_and_fails_the_check(monkeypatch):
    monkeypatch.setattr(run_mod, "UnifiedExecutor", _Perturbed)
    body = run_mod.selfcheck("cpu", only=_only)
    assert body["exit_status"] == 1
    assert body["counts"] == {"bit_for_bit": 0, "within_bound": 0, "outside_bound": 4}
    for p in body["paths"]:
        assert p["verdict"] == OUTSIDE and p["worst"].startswith("m1 "), p
        assert p["text"].startswith("outside bound — a defect, please report it")


def test_a_stack_that_did_not_train_is_outside(monkeypatch):
    """A silent fallback to the eager route would compare seq with itself: a defect."""
    monkeypatch.setattr(run_mod, "_ctx", _forcing_eager(run_mod._ctx))
    body = run_mod.selfcheck("cpu", only=lambda c: c.name == "mlp · sgd · exact · fp32")
    (p,) = body["paths"]
    assert p["verdict"] == OUTSIDE and "route eager" in p["note"]


def _forcing_eager(make):
    def ctx(*args, **kwargs):
        c = make(*args, **kwargs)
        if c.options:  # unified_model's (it gets the kernels option)
            c.options["baseline"] = True
            c.features = "vf:0,s:0,fl:0"
        return c
    return ctx


def test_bad_devices_are_refused():
    for text in ("tpu", "cuda:x"):
        with pytest.raises(ValueError, match="--device"):
            run_mod.selfcheck(text)
