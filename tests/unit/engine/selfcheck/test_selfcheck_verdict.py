"""The self-check's verdicts on synthetic differences (torch-free): bit for bit, within
bound, outside; a path by construction that differs at all is outside; a path that did
not run is outside; the exit status and counts follow; every checked path names a row of
the parity contract, with the contract's own "by construction" where it says so."""

from __future__ import annotations

import math

import pytest

from engine.executors.unified.contract import PATHS
from engine.selfcheck.cases import KERNELS, MODELS, OPTIMIZERS, Case, cases
from engine.selfcheck.verdict import (
    BIT_FOR_BIT,
    OUTSIDE,
    WITHIN,
    Comparison,
    PathResult,
    apply,
    counts,
    exit_status,
    judge,
    verdict_text,
)


def same(name="w"):
    return Comparison(name, 0.0, 1e-6, True)


def off(diff, bound=1e-6, name="w", relative=True):
    return Comparison(name, diff, bound, False, relative)


def test_identical_values_are_bit_for_bit_under_either_promise():
    for holds in ("construction", "bound"):
        assert judge(holds, [same("a"), same("b")]) == (BIT_FOR_BIT, None)


def test_a_bounded_path_is_within_when_every_value_is_and_names_its_worst():
    verdict, worst = judge("bound", [same(), off(2e-7, name="a"), off(9e-7, name="b"),
                                     off(1e-3, bound=1e-2, name="c")])
    assert verdict == WITHIN and worst.name == "b"  # 0.9 of its bound beats 0.1
    assert judge("bound", [off(1e-6)])[0] == WITHIN  # at the bound is inside


def test_one_value_above_its_bound_makes_the_path_outside():
    verdict, worst = judge("bound", [off(1e-7), off(1.1e-6, name="x"), same()])
    assert verdict == OUTSIDE and worst.name == "x"
    assert judge("bound", [off(math.inf)])[0] == OUTSIDE  # NaN / another shape


def test_by_construction_any_difference_is_a_defect_even_inside_a_bound():
    verdict, worst = judge("construction", [same(), off(1e-12, bound=1.0, name="tiny")])
    assert verdict == OUTSIDE and (worst.name, worst.bound) == ("tiny", 0.0)


def test_a_path_that_did_not_run_or_compared_nothing_is_outside():
    assert judge("bound", [same()], error="job m1 failed: boom")[0] == OUTSIDE
    assert judge("bound", [])[0] == OUTSIDE
    with pytest.raises(ValueError, match="holds"):
        judge("statistical", [same()])


def test_apply_fills_the_result_and_its_text():
    base = dict(name="p", model="mlp", optimizer="sgd", kernels="batched", precision="fp32",
                contract="c", holds="bound", bound_rule="r", steps=4, members=3)
    within = apply(PathResult(**base), [off(5e-7, name="m0 0.weight")])
    assert (within.verdict, within.worst, within.compared) == (WITHIN, "m0 0.weight", 1)
    assert within.text == "within bound (max |Δ| = 5e-07 relative, bound 1e-06)"
    failed = apply(PathResult(**base), [], error="the stack did not train")
    assert failed.text == "outside bound — a defect, please report it"
    assert failed.note == "the stack did not train"
    assert failed.to_dict()["text"] == failed.text and "extra" not in failed.to_dict()
    assert verdict_text(OUTSIDE, 2e-3, 1e-3, relative=False) == (
        "outside bound — a defect, please report it (max |Δ| = 0.002, bound 0.001)")
    assert verdict_text(BIT_FOR_BIT, None, None) == "bit for bit"


def test_exit_status_and_counts():
    assert exit_status([BIT_FOR_BIT, WITHIN]) == 0
    assert exit_status([BIT_FOR_BIT, OUTSIDE]) == 1
    assert exit_status([]) == 1  # nothing shown is no proof
    assert counts([BIT_FOR_BIT, WITHIN, WITHIN]) == {
        "bit_for_bit": 1, "within_bound": 2, "outside_bound": 0}
    with pytest.raises(ValueError, match="unknown"):
        counts(["fine"])


def test_the_matrix_covers_models_optimizers_kernels_and_the_cpu_precisions():
    got = cases("cpu", ("fp32", "amp-fp16", "amp-bf16", "bf16"))
    fp32 = {(c.model, c.optimizer, c.kernels) for c in got if c.precision == "fp32"}
    assert fp32 == {(m, o, k) for m in MODELS for o in OPTIMIZERS for k in KERNELS}
    halves = [c for c in got if c.precision != "fp32"]
    assert {c.precision for c in halves} == {"amp-fp16", "amp-bf16", "bf16"}
    assert all(c.steps == 1 and c.kernels == "batched" for c in halves)
    assert all(1 <= c.steps <= 5 for c in got)
    assert OPTIMIZERS["sgd-lrs"][2] != OPTIMIZERS["sgd"][2]  # a learning rate per member
    assert MODELS["mlp_bn"]["dropout"] > 0  # dropout live on the CPU (masks by construction)
    cuda = cases("cuda", ("fp32", "tf32"))
    assert all(c.model_kwargs.get("dropout", 0.0) == 0.0 for c in cuda)  # masks differ there
    assert {c.kernels for c in cuda if c.precision == "tf32"} == set(KERNELS)


def test_every_path_checks_a_contract_row_and_keeps_its_promise():
    rows = {p.name: p for p in PATHS}
    for case in cases("cuda", ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16")):
        assert case.contract in rows
        if case.kernels == "exact" and case.precision in ("fp32", "tf32"):
            assert case.holds == "construction"
        elif rows[case.contract].holds == "construction":
            assert case.holds == "construction", case.name
        else:
            assert case.holds == "bound", case.name
    assert Case("mlp", "adam", "batched", "fp32", 4).contract == "batched, Adam/AdamW"
    assert Case("simplecnn", "sgd", "batched", "fp32", 4).contract == "batched: convolutions"
    assert Case("mlp_bn", "sgd", "batched", "fp32", 4).contract == "batched: BatchNorm"
