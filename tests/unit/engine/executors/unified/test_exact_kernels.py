"""``kernels = "exact"``: every layer whose batching rule a BLAS or vmap may round
differently runs per member with its native kernel, so a stacked step is each solo step bit
for bit — Linear layers included, where vmap's batched matmul plus bias add differs from the
solo ``addmm`` for long contractions (the BLAS adds the bias before later blocks) and for
matrix-vector products (batch size 1; one output feature, a regression head)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified.stack import Stack  # noqa: E402

K = 3


def _mlp(seed: int, n_in: int, n_out: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, 512), nn.ReLU(), nn.Linear(512, 64), nn.ReLU(),
                         nn.Linear(64, n_out))


@pytest.mark.parametrize("batch,n_in,n_out", [(64, 1024, 10), (1, 13, 3), (32, 10, 1)])
def test_exact_linear_is_each_solo_step_bit_for_bit(batch, n_in, n_out, parity):
    members = [_mlp(k, n_in, n_out) for k in range(K)]
    solo = [copy.deepcopy(m) for m in members]
    stack = Stack(members, None, (n_in,), batch, exact_kernels=True)
    assert stack.exact_layers == ["0", "2", "4"]
    _assert_each_solo(stack, solo, batch, (n_in,), parity)


def _assert_each_solo(stack, solo, batch, shape, parity):
    """One stacked forward and backward against each solo module's, bit for bit: outputs
    and every parameter's gradient."""
    g = torch.Generator().manual_seed(batch)
    x = torch.randn(K, batch, *shape, generator=g)
    out = stack(x)
    grad_out = torch.randn(out.shape, generator=g)
    out.backward(grad_out)
    for k, m in enumerate(solo):
        o = m(x[k])
        parity.same(f"output {k}", out[k], o)
        o.backward(grad_out[k])
        for name, p in m.named_parameters():
            parity.same(f"grad {k} {name}", stack.params[name].grad[k], p.grad)


def test_the_verification_twins_keep_vmaps_linear():
    """Verification's vectorised twins compare within a tolerance: they keep vmap's Linear
    (one batched call) and swap only BatchNorm and convolutions."""
    members = [nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 3))
               for _ in range(K)]
    stack = Stack(members, None, (1, 4, 4), 2, exact_kernels=True, exact_linear=False)
    assert stack.exact_layers == ["0"]
    assert Stack(members, None, (1, 4, 4), 2, exact_kernels=True).exact_layers == ["0", "2"]


def _norms(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, 32), nn.LayerNorm(32), nn.ReLU(),
                         nn.LayerNorm(32, elementwise_affine=False), nn.Linear(32, 5))


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_exact_layer_and_group_norm_are_each_solo_step_bit_for_bit(batch, parity):
    """LayerNorm and GroupNorm run per member too: vmap's rules reduce their affine
    gradients (LayerNorm) or regroup the channels (GroupNorm) over all K members, ~1e-7
    relative off the solo run. Without an affine part a LayerNorm has nothing to swap."""
    members = [_norms(k) for k in range(K)]
    solo = [copy.deepcopy(m) for m in members]
    stack = Stack(members, None, (1, 6, 6), batch, exact_kernels=True)
    assert stack.exact_layers == ["0", "1", "4", "5", "7", "8"]
    assert stack.vmapped_layers == []
    _assert_each_solo(stack, solo, batch, (1, 6, 6), parity)


def test_layers_left_to_vmap_are_named_and_recorded_in_the_plan():
    """A layer with parameters that has no per-member kernel (PReLU here) keeps vmap's
    rule: exact is then not bit for bit by construction for it, and the stack and the
    bucket's plan say which layers (the parity contract's row for exact names only the
    swapped families)."""
    from types import SimpleNamespace

    from engine.define.workloads import JobSpec, SplitSpec
    from engine.executors.unified.executor import UnifiedExecutor
    from engine.train.data import DeviceData
    from engine.train.loop import TrainSettings

    members = [nn.Sequential(nn.Linear(4, 6), nn.PReLU(), nn.Linear(6, 2)) for _ in range(K)]
    stack = Stack(members, None, (4,), 5, exact_kernels=True)
    assert stack.exact_layers == ["0", "2"] and stack.vmapped_layers == ["1 (PReLU)"]
    assert Stack(members, None, (4,), 5).vmapped_layers == []  # batched: nothing claimed

    g = torch.Generator().manual_seed(0)
    data = DeviceData("syn", "classification", (1, 8, 8), 3,
                      torch.randn(60, 1, 8, 8, generator=g),
                      torch.randint(0, 3, (60,), generator=g), None, None)
    jobs = [JobSpec(job_id=f"j{i}", exp_id="X", index=i, seed=i, model="mlp",
                    dataset="digits", task="classification", batch_size=16, epochs=1,
                    lr=0.05, optimizer="sgd", optimizer_kwargs={},
                    model_kwargs={"hidden": 8}, split=SplitSpec("holdout", 0))
            for i in range(2)]
    for kernels, want in (("exact", []), ("batched", None)):
        ctx = SimpleNamespace(arrivals=None, settings=TrainSettings(torch.device("cpu")),
                              datasets=lambda name: data, threads=1, seed=0,
                              emit=lambda *a, **f: None, options={"kernels": kernels},
                              features=None, max_parallel=None, group={})
        UnifiedExecutor().run(jobs, ctx)
        plan = ctx.group["executor_info"]["plan"][0]
        assert plan["route"] == "vectorised" and plan["exact_kernels_skipped"] == want
