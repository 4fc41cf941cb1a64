"""The effective features of the unified model, exhaustively: every requested signature ×
device × compile mode × compile probe result against the rule written out independently
here (docs/measurement.md, "unified_model"; docs/fugue-compat.md, ablation ladder)."""

from __future__ import annotations

import itertools

import pytest

from engine.define.axes import ABLATION_LADDER
from engine.executors.unified.features import (
    BASELINE_FEATURES,
    CUDA_GRAPH_MODES,
    DEFAULT_FEATURES,
    effective_features,
    features_string,
    requested_features,
)

SIGNATURES = [f"vf:{vf},s:{s},fl:{fl}" for vf, s, fl in itertools.product((0, 1), repeat=3)]
DEVICES = ("cpu", "cuda", "mps")
MODES = ("off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
PROBES = (None, True, False)


#: after training, (n eager, m buckets, first reason); None: not known yet
EAGER = (None, (0, 2, ""), (1, 2, "one member, nothing to stack"))


def expected(vf: int, s: int, fl: int, device: str, mode: str, ok: bool | None,
             eager=None):
    """The rule, restated: streams only on CUDA and never with captured CUDA graphs that
    actually run; vf only if no bucket trained eagerly (issue 45); a fused loss only over a
    stack, in every bucket."""
    graphs = mode in ("reduce-overhead", "max-autotune") and ok is True
    vf = int(bool(vf) and not (eager and eager[0]))
    return {"vf": vf, "s": int(bool(s) and device == "cuda" and not graphs),
            "fl": int(bool(fl) and bool(vf))}


@pytest.mark.parametrize("requested", SIGNATURES)
def test_every_combination_follows_the_rule(requested):
    want = requested_features(requested)
    for device, mode, ok, eager in itertools.product(DEVICES, MODES, PROBES, EAGER):
        if mode == "off" and ok is not None:
            continue  # no probe without compile
        have, reason = effective_features(requested, device, mode, ok, eager)
        assert have == expected(want["vf"], want["s"], want["fl"], device, mode, ok, eager), \
            (requested, device, mode, ok, eager)
        if want["vf"] and not have["vf"]:
            assert "vf: 1 of 2 buckets trained eagerly (one member, nothing to stack" in reason
        differs = have != want or (mode != "off" and ok is False)
        assert (reason is not None) == differs, (requested, device, mode, ok, reason)
        if want["s"] and not have["s"]:
            assert "s: " in reason
        if want["fl"] and not have["fl"]:
            assert "fl: " in reason
        if mode != "off" and ok is False:
            assert f"compile {mode}: the probe failed" in reason


def test_reasons_name_the_cause():
    assert effective_features("vf:1,s:1,fl:0", "cpu")[1] == "s: no CUDA streams on a cpu device"
    _, why = effective_features("vf:1,s:1,fl:0", "cuda", "reduce-overhead", True)
    assert "reduce-overhead captures CUDA graphs" in why
    # A failed probe trains eagerly: no graphs, so the streams stay.
    have, why = effective_features("vf:1,s:1,fl:0", "cuda", "reduce-overhead", False)
    assert have["s"] == 1 and "probe failed" in why
    assert effective_features("vf:1,s:1,fl:0", "cuda", "max-autotune-no-cudagraphs",
                              True) == ({"vf": 1, "s": 1, "fl": 0}, None)
    assert set(CUDA_GRAPH_MODES) == {"reduce-overhead", "max-autotune"}


def test_parse_defaults_and_errors():
    assert requested_features(None) == requested_features(DEFAULT_FEATURES) == \
        {"vf": 1, "s": 1, "fl": 0}
    assert requested_features("fl:1") == {"vf": 1, "s": 1, "fl": 1}
    assert features_string(requested_features(BASELINE_FEATURES)) == "vf:0,s:0,fl:0"
    with pytest.raises(ValueError, match="'x:1'"):
        requested_features("x:1")
    with pytest.raises(ValueError):
        requested_features("vf:2")


def test_ladder_on_cpu_and_on_cuda():
    """On CPU the six rungs collapse to three effective signatures (no streams); on CUDA
    with a compile mode that captures graphs (the harness's reduce-overhead) and probes
    that succeed they are six distinct ones only where the ladder asks for six."""
    cpu = {r.name: features_string(effective_features(
        r.features, "cpu", "reduce-overhead" if r.compile else "off",
        True if r.compile else None)[0]) for r in ABLATION_LADDER}
    assert cpu == {"A": "vf:0,s:0,fl:0", "B": "vf:1,s:0,fl:0", "C": "vf:1,s:0,fl:0",
                   "C+FL": "vf:1,s:0,fl:1", "D": "vf:1,s:0,fl:0", "D+FL": "vf:1,s:0,fl:1"}
    cuda = {r.name: features_string(effective_features(
        r.features, "cuda", "reduce-overhead" if r.compile else "off",
        True if r.compile else None)[0]) for r in ABLATION_LADDER}
    assert cuda == {r.name: r.features for r in ABLATION_LADDER}
