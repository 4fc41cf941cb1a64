"""The bare stacked torch.func loop of ``bench.unified_scaling`` as of commit 9f31946
(2026-12-01), frozen: the reference ``unified_model``'s training loop is judged against.

Only two things come from the project: the model builder (the same architecture and
initial weights as the members being judged) and the split (the same training indices).
The loop itself uses nothing else from the engine: ``torch.func.stack_module_state``,
one ``functional_call`` under ``vmap(randomness="different")`` per step on (K, B) batches
gathered with each member's own per-epoch permutation, the summed per-member
cross-entropy, ``backward``, ``torch.optim.SGD`` over the stacked tensors (member 0's lr
and keywords). No validation, no events, no per-member dropout generators (vmap draws the
masks), full batches only.

Do not edit: ``tests/unit/test_bench_reference.py`` pins this file's SHA-256.
"""

from __future__ import annotations

import copy
import time
from typing import Any


def run(jobs, data, device) -> dict[str, Any]:
    """Train ``jobs`` (one bucket's ``JobSpec`` list: same model, batch size, epochs) on
    ``data`` (a ``DeviceData``) the bare way. Returns ``samples`` (trained), ``train_s``
    (wall time of the timed epoch loops, permutations drawn before the clock) and
    ``wall_s`` (the whole call, model builds included)."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, stack_module_state

    from engine.parts.models import build_model
    from engine.train.data import split_for

    t_group = time.perf_counter()
    members = []
    for job in jobs:
        torch.manual_seed(job.seed)
        members.append(build_model(job.model, data.in_shape, data.n_outputs,
                                   job.model_kwargs).to(device))
    params, buffers = stack_module_state(members)
    template = copy.deepcopy(members[0]).to("meta")
    template.train()
    job0 = jobs[0]
    opt = torch.optim.SGD(list(params.values()), lr=job0.lr, **job0.optimizer_kwargs)

    def fmodel(p, b, x):
        return functional_call(template, (p, b), (x,))

    forward = torch.vmap(fmodel, randomness="different")
    prepared = []
    for job in jobs:
        split = split_for(job.split, len(data.pool_y),
                          None if data.test_y is None else len(data.test_y))
        prepared.append((job, split.train_idx))
    gens = [torch.Generator().manual_seed(job.seed) for job in jobs]
    bs = job0.batch_size
    nb = min(len(idx) for _, idx in prepared) // bs
    k = len(jobs)
    x_all, y_all = data.pool_x, data.pool_y
    samples, train_s = 0, 0.0
    for _ in range(job0.epochs):
        seg = torch.stack([idx[torch.randperm(len(idx), generator=g)][: nb * bs].view(nb, bs)
                           for (_, idx), g in zip(prepared, gens, strict=True)],
                          dim=1)  # (nb, K, B)
        t0 = time.perf_counter()
        for step in range(nb):
            idx = seg[step]
            xb, yb = x_all[idx], y_all[idx]
            out = forward(params, buffers, xb)
            loss = F.cross_entropy(out.reshape(k * bs, -1), yb.reshape(k * bs),
                                   reduction="none").view(k, bs).mean(1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        train_s += time.perf_counter() - t0
        samples += nb * bs * k
    return {"samples": samples, "train_s": train_s, "wall_s": time.perf_counter() - t_group}
