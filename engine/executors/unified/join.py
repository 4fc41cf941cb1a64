"""A stream's job joining a running bucket at a step boundary (issue 52; docs/measurement.md,
"Streams", unified_model).

A stream cell's arriving job is built as a bucket of its own first (its member: the job
seed before its build, its own batch order and dropout generator, exactly as under seq).
If a bucket of its structure (the bucket key, ``plan.bucket_key``) is running, the
newcomer is checked against it (:func:`check`) and, if the checks agree, moved into it
(:func:`join`) between two segments of the interleaved loop, that is between two global
steps. Two cases:

* the running bucket is a stack (``VectorRoute``): its survivors (active members) and the
  newcomer are re-stacked (``VectorRoute.join``: ``Stack.joined`` and a new stacked
  optimizer into which each survivor's optimizer state is copied), as the retire path
  re-stacks the survivors when members leave (finished members leave at the same time,
  under ``retire = "mask"`` too);
* the running bucket is a lone member on the eager route (a structure's first job): the
  member and the newcomer become a stack of two; the member's ``torch.optim`` state
  (momentum buffer; Adam's moments and step) is copied into the stacked optimizer
  (``optim.torch_member_state``), its module (which the eager route trained) and its
  dropout generator are stacked as they stand.

Either way every member's parameters, buffers, optimizer state, generator and batch
position are exact copies, so each member's next step is the one it would have taken
where it was: what it computes afterwards is its path's row of the parity contract
(``kernels = "exact"``: seq's bits by construction; ``batched``: within the bound).

The check is a bucket member's (``BucketBuild.check_members`` on the running bucket's first
active member and the newcomer: a layer without a vectorised form, the structure, and
unless ``verify = false`` the own-forward check and the one-step float64 probe, and the
shared-state watch). A refusal leaves the newcomer in its own bucket, trained eagerly,
with the verdict and its reason in the plan. Not joined (its own bucket, the reason in
the plan): a float16-AMP member (its GradScaler would need a stacked scaler that grows;
not built yet) and any member while the running bucket trains eagerly for another reason
than being alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from engine.executors.unified.bucket_build import Check
from engine.executors.unified.losses import loss_function
from engine.executors.unified.optim import torch_member_state
from engine.executors.unified.parity import before_probe
from engine.executors.unified.routes import EagerRoute, Member, VectorRoute
from engine.results.parity_contract import weakest

if TYPE_CHECKING:
    from engine.executors.unified.bucket import BucketRun


def check(bucket: BucketRun, m: Member) -> Check:
    """Whether member ``m`` (built, not yet trained) may join the running ``bucket`` now,
    as a member of a bucket is checked before training (see the module docstring)."""
    live = [x for x in bucket.members if x.active]
    route = bucket.route
    if route is None or not live:
        return Check(False, "refused", f"bucket {bucket.plan.index} has finished")
    if isinstance(route, EagerRoute) and (bucket.plan.check != "single" or len(live) != 1):
        return Check(False, "refused", f"bucket {bucket.plan.index} trains eagerly "
                                       f"({bucket.plan.reason or bucket.plan.check})")
    if m.precision.scaled or live[0].precision.scaled:
        return Check(False, "refused", "amp-fp16: a member with its own GradScaler does not "
                                       "join a running stack (not built yet)")
    ref = live[0]
    route.sync_member(ref.index)  # its module gets its current weights (the checks read them)
    return bucket.check_members([ref, m], bucket.task)


def join(bucket: BucketRun, m: Member, found: Check) -> int:
    """Move member ``m`` into the running ``bucket`` (``found``: what :func:`check` said,
    ok): at a step boundary, after the last segment's ``finish``. Returns the stack's size
    after the join."""
    bucket._account()  # the deferred losses of the old stack into loss_sums first
    plan = bucket.plan
    m.index = len(bucket.members)
    bucket.members.append(m)
    bucket.results.append(m.result)
    plan.jobs.append(m.job)
    bucket.active_mask.append(True)
    bucket.loss_sums = torch.cat([bucket.loss_sums, bucket.loss_sums.new_zeros(1)])
    route = bucket.route
    if isinstance(route, VectorRoute):
        bucket.hand_stack_to_main()
        keep = [k for k in route.slots
                if bucket.members[k].active or bucket.members[k].waiting]
        route.join(keep, m, lambda params: bucket.stacked_optimizer(
            [bucket.members[k] for k in (*keep, m.index)], params))
    else:
        route = _stack_the_lone_member(bucket, m, found)
    m.optimizer = None  # the stack trains it
    route.k_all = len(bucket.members)
    route.set_active(bucket.active_mask)
    bucket.stack = route.stack
    if bucket.exact_kernels:
        plan.exact_kernels_skipped = list(route.stack.vmapped_layers)
    first = bucket.members[route.slots[0]]
    value, _ = before_probe(
        route="vectorised", precision=first.precision.applied,
        exact_kernels=bucket.exact_kernels, skipped_layers=plan.exact_kernels_skipped,
        fused=bucket.fused, device_type=bucket.device.type,
        dropout=any(type(s) is torch.nn.Dropout for s in first.model.modules()),
        optimizer=first.job.optimizer)
    plan.parity_contract = weakest([plan.parity_contract, value])
    size = len(route.slots)
    bucket.restacks.append(size)
    plan.joins.append({"job": m.job.job_id, "stack": size, "check": found.check,
                       "probed": found.probed,
                       "verify_s": None if found.verify_s is None else round(found.verify_s, 4)})
    if bucket.settings.compile_mode != "off":
        bucket._needs_probe = True  # a new member count: compile and probe again
    bucket._start_epoch(m)
    return size


def _stack_the_lone_member(bucket: BucketRun, m: Member, found: Check) -> VectorRoute:
    """The eager bucket's one active member and ``m`` as a stack of two (module docstring)."""
    plan = bucket.plan
    [ref] = [x for x in bucket.members if x.active and x is not m]
    stack = bucket.new_stack([ref, m])
    optimizer = bucket.stacked_optimizer([ref, m], stack.params)
    steps = ref.epoch * ref.order.n_batches + ref.step
    optimizer.load_member(0, *torch_member_state(ref.optimizer, ref.model, steps))
    route = VectorRoute(stack, optimizer, loss_function(bucket.task, bucket.fused),
                        bucket.task, len(bucket.members), ref.precision)
    route.slots = [ref.index, m.index]
    route._slot_index = torch.tensor(route.slots, dtype=torch.long, device=stack.device)
    if ref.scores:  # its last epoch's training score so far
        route.scores = {key: torch.stack([value, torch.zeros_like(value)])
                        for key, value in ref.scores.items()}
    ref.optimizer = ref.forward = None
    ref.scores = {}
    bucket.route = route
    plan.route, plan.check, plan.reason = "vectorised", found.check, found.reason
    plan.dropout_masks = bucket._mask_source()
    return route


__all__ = ["check", "join"]
