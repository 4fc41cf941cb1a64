"""The self-check itself: each path of :mod:`engine.selfcheck.cases` trained by ``seq``
(the engine's training loop, ``engine.executors.seq``) and by ``unified_model`` (the
executor: its plan, verification, ``Stack`` and stacked optimizer), on the same synthetic
data, then every parameter, buffer and the training loss compared against the contract's
bound for that path (``engine.executors.unified.contract``).

One process, torch imported once; both sides at one torch thread (the contract's
bit-for-bit paths hold at equal thread counts). Torch at module level: imported by the
self-check's process (``python -m engine.selfcheck``) only.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import torch

from engine.define.workloads import JobSpec, SplitSpec
from engine.executors.seq import SeqExecutor
from engine.executors.unified.contract import (
    HALF_PRECISION_BOUNDS,
    adam_bound,
    layer_reduction,
    rounding_bound,
)
from engine.executors.unified.executor import UnifiedExecutor
from engine.parts.models import built_models
from engine.plugins import load_builtins
from engine.precision import MIN_CC
from engine.selfcheck import machine
from engine.selfcheck.cases import BATCH, MEMBERS, OPTIMIZERS, Case, cases
from engine.selfcheck.verdict import Comparison, PathResult, apply, counts, exit_status
from engine.train.backend import apply_backend_flags
from engine.train.data import DeviceData
from engine.train.loop import TrainSettings

SEED = 42
#: The holdout split validates a fifth of the pool: a pool of ``steps * BATCH / 0.8``
#: samples trains exactly ``steps`` full batches.
VAL_FRACTION = 0.2


def supported_precisions(device: torch.device) -> tuple[str, ...]:
    """The precisions ``device`` runs: on a CPU fp32 and the half precisions (tf32 is fp32
    there); on CUDA tf32 and the bfloat16 ones from compute capability 8.0."""
    if device.type != "cuda":
        return ("fp32", "amp-fp16", "amp-bf16", "bf16")
    ampere = torch.cuda.get_device_capability(device) >= MIN_CC
    return ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16") if ampere else ("fp32", "amp-fp16")


def data(steps: int, device: torch.device, seed: int = 0) -> DeviceData:
    """A learnable 4-class task on 1x8x8 inputs (labels from a fixed linear map), sized to
    train ``steps`` full batches."""
    n = round(steps * BATCH / (1 - VAL_FRACTION))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 8, 8, generator=g)
    y = (x.flatten(1) @ torch.randn(64, 4, generator=g)).argmax(1)
    return DeviceData("selfcheck", "classification", (1, 8, 8), 4, x.to(device), y.to(device),
                      None, None)


def jobs(case: Case) -> list[JobSpec]:
    optimizer, kwargs, lrs = OPTIMIZERS[case.optimizer]
    return [JobSpec(job_id=f"m{i}", exp_id="selfcheck", index=i, seed=SEED + i,
                    model=case.model, dataset="digits", task="classification",
                    batch_size=BATCH, epochs=1, lr=lrs[i], optimizer=optimizer,
                    optimizer_kwargs=dict(kwargs), model_kwargs=dict(case.model_kwargs),
                    split=SplitSpec("holdout", 0)) for i in range(MEMBERS)]


def _ctx(dataset: DeviceData, device: torch.device, precision: str,
         options: dict[str, Any] | None = None) -> SimpleNamespace:
    """What an executor gets from its cell (``engine.executors.base.CellContext``)."""
    return SimpleNamespace(settings=TrainSettings(device, precision=precision),
                           datasets=lambda name: dataset, threads=1, seed=SEED,
                           emit=lambda type_, **fields: None, options=dict(options or {}),
                           features=None, max_parallel=None, group={},
                           arrivals=None)  # a batch cell: no stream (issue 51)


def reduction(model: torch.nn.Module, sample: torch.Tensor) -> int:
    """The contract's ``reduction`` of ``model`` under the batched kernels: the sum over
    its Linear, convolution and BatchNorm layers of their longest reduction
    (:func:`~engine.executors.unified.contract.layer_reduction`), at ``sample``'s batch size
    (a convolution's weight gradient reduces over the batch and every output position)."""
    total = 0

    def hook(module: torch.nn.Module, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        nonlocal total
        x = inputs[0]
        if isinstance(module, torch.nn.Linear):
            total += layer_reduction(module.in_features, module.out_features,
                                     x.numel() // module.in_features)
        elif isinstance(module, torch.nn.modules.conv._ConvNd):
            window = math.prod(module.kernel_size)
            total += layer_reduction(module.in_channels // module.groups * window,
                                     module.out_channels * window,
                                     output.numel() // module.out_channels)
        elif isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            total += x.numel() // module.num_features

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    was_training = model.training
    try:
        model.eval()  # the running statistics stay as trained
        with torch.no_grad():
            model(sample.to(next(model.parameters()).dtype))
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return total


def relative_diff(got: torch.Tensor, want: torch.Tensor, scale: float | None = None) -> float:
    """``max|got - want| / scale`` in float64, ``scale`` defaulting to ``max|want|`` (0 when
    both are all zeros; inf when only the scale is, or for NaN). The parity tests compare
    through it too (tests/parity.py).

    Raises:
        AssertionError: the shapes differ.
    """
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    if g.shape != w.shape:
        raise AssertionError(f"shapes differ: {tuple(g.shape)} vs {tuple(w.shape)}")
    num = float((g - w).abs().max()) if g.numel() else 0.0
    den = scale if scale is not None else (float(w.abs().max()) if w.numel() else 0.0)
    if math.isnan(num):
        return math.inf
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def compare(name: str, got: torch.Tensor, want: torch.Tensor, bound: float,
            relative: bool) -> Comparison:
    """One value against seq's: its difference (relative to ``max|want|``, or absolute)."""
    if got.shape != want.shape:
        return Comparison(name, math.inf, bound, False, relative)
    identical = got.dtype == want.dtype and torch.equal(got, want)
    diff = relative_diff(got, want, None if relative else 1.0)
    return Comparison(name, diff, bound, identical, relative)


def rule(case: Case, red: int) -> tuple[float, bool, str]:
    """The bound of ``case``'s values: (bound, relative, how it was derived)."""
    if case.holds == "construction":
        return 0.0, True, "bit for bit (by construction)"
    if case.precision in HALF_PRECISION_BOUNDS:
        one, epoch = HALF_PRECISION_BOUNDS[case.precision]
        return ((one, False, f"{one:.3g} absolute (one step)") if case.steps == 1
                else (epoch, False, f"{epoch:.3g} absolute (one epoch)"))
    if OPTIMIZERS[case.optimizer][0] == "adam":
        lr = max(OPTIMIZERS[case.optimizer][2])
        return (adam_bound(case.steps, lr), False,
                f"adam_bound({case.steps}, {lr:g}) absolute per element")
    return (rounding_bound(case.steps, red), True,
            f"rounding_bound({case.steps}, {red}) relative")


def check(case: Case, device: torch.device) -> PathResult:
    """Train ``case`` under both executors and judge it."""
    t0 = time.perf_counter()
    result = PathResult(case.name, case.model, case.optimizer, case.kernels, case.precision,
                        case.contract, case.holds, "", case.steps, MEMBERS)
    dataset, specs = data(case.steps, device), jobs(case)
    with contextlib.redirect_stdout(io.StringIO()):  # the executors' plan lines
        with built_models() as solo:
            seq = SeqExecutor().run(specs, _ctx(dataset, device, case.precision))
        ctx = _ctx(dataset, device, case.precision, {"kernels": case.kernels})
        with built_models() as stacked:
            uni = UnifiedExecutor().run(specs, ctx)
    error = _route_error(seq, uni, ctx)
    comparisons: list[Comparison] = []
    if not error:
        red = reduction(solo[specs[0].job_id], dataset.pool_x[:BATCH])
        bound, relative, result.bound_rule = rule(case, red)
        comparisons = _comparisons(case, specs, solo, stacked, seq, uni, bound, relative)
        if case.holds == "bound" and OPTIMIZERS[case.optimizer][0] == "adam" \
                and case.model == "mlp_bn":
            result.note = ("BatchNorm running statistics not compared: they integrate "
                           "Adam's rounding noise (statistical)")
    result.seconds = time.perf_counter() - t0
    return apply(result, comparisons, error)


def _route_error(seq: list[Any], uni: list[Any], ctx: SimpleNamespace) -> str:
    for r in (*seq, *uni):
        if r.status != "ok":
            return f"job {r.job.job_id} failed: {r.error}"
    plan = ctx.group["executor_info"]["plan"][0]
    if (plan["route"], plan["check"]) != ("vectorised", "verified"):
        return (f"the stack did not train: route {plan['route']}, check {plan['check']}"
                f" ({plan.get('reason') or 'no reason given'})")
    return ""


def _comparisons(case: Case, specs: list[JobSpec], solo: dict[str, Any],
                 stacked: dict[str, Any], seq: list[Any], uni: list[Any], bound: float,
                 relative: bool) -> list[Comparison]:
    adam = case.holds == "bound" and OPTIMIZERS[case.optimizer][0] == "adam"
    out = []
    for job in specs:
        want, got = solo[job.job_id].state_dict(), stacked[job.job_id].state_dict()
        for name, value in want.items():
            where = f"{job.job_id} {name}"
            if not value.is_floating_point():  # num_batches_tracked: counted alike
                out.append(compare(where, got[name], value, 0.0, False))
            elif adam and name.endswith(("running_mean", "running_var")):
                continue
            else:
                out.append(compare(where, got[name], value, bound, relative))
    if case.precision in ("fp32", "tf32") and not adam:  # the reported training loss
        for s, u in zip(seq, uni, strict=True):
            out.append(compare(f"{s.job.job_id} train loss",
                               torch.tensor(u.final_train_loss, dtype=torch.float64),
                               torch.tensor(s.final_train_loss, dtype=torch.float64),
                               bound, True))
    return out


def selfcheck(device_text: str = "cpu", say: Callable[[str], None] | None = None,
              only: Callable[[Case], bool] | None = None) -> dict[str, Any]:
    """Run every path on ``device_text`` (``cpu``, ``cuda`` or ``cuda:N``); returns the
    self-check's document body (the JSON schema ``fugue-tui/selfcheck``: ``paths``,
    ``counts``, ``machine``, ``exit_status`` ...). ``say`` gets one line per path as it
    ends; ``only`` keeps a subset of the paths (tests).

    Raises:
        ValueError: a device that is not cpu / cuda / cuda:N, or CUDA without a GPU.
    """
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    device = _device(device_text)
    load_builtins()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    paths: list[PathResult] = []
    try:
        for case in cases(device.type, supported_precisions(device)):
            if only is not None and not only(case):
                continue
            paths.append(check(case, device))
            if say is not None:
                say(f"{paths[-1].name}: {paths[-1].text}")
        facts = machine.facts(device)
    finally:
        torch.set_num_threads(threads)
        apply_backend_flags()
    verdicts = [p.verdict for p in paths]
    return {"device": str(device), "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "elapsed_s": round(time.perf_counter() - t0, 3), "machine": facts,
            "members": MEMBERS, "paths": [p.to_dict() for p in paths],
            "counts": counts(verdicts), "exit_status": exit_status(verdicts)}


def _device(text: str) -> torch.device:
    if text != "cpu" and text != "cuda" and not text.startswith("cuda:"):
        raise ValueError(f"--device: cpu, cuda or cuda:N, got {text!r}")
    try:
        device = torch.device(text)
    except RuntimeError as exc:
        raise ValueError(f"--device: {text!r}: {exc}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {text}: torch sees no CUDA device here")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {text}: only {torch.cuda.device_count()} CUDA "
                             "device(s) here")
    return device
