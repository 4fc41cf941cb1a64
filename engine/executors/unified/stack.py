"""K structurally identical members as one vectorised module.

``Stack(members, generators)`` stacks the members' parameters and buffers along a new
leading dimension K (:func:`stack_state`, ``torch.func.stack_module_state`` with a relaxed
class rule: ``same_class``) and calls one template module
through ``torch.func.functional_call`` under ``torch.vmap(..., randomness="different")``:
one Python call of the template per step, whatever K is.

Exactness rules (``docs/unified-model-pitfalls.md``):

* BatchNorm running statistics and ``num_batches_tracked`` are stacked buffers passed with
  ``in_dims=0``, so the in-place updates of ``F.batch_norm`` land in member k's slice
  exactly as in a solo run; ``write_back`` copies them to the member modules.
  ``momentum=None`` (cumulative average) needs ``float(num_batches_tracked)`` inside the
  vmapped call, which vmap cannot do: :func:`unsupported_reason` names it and the bucket
  trains eagerly.
* Dropout: every ``nn.Dropout`` of the template is replaced by :class:`MemberDropout`, which
  multiplies by noise drawn per member from that member's own generator, in the order the
  layers are called. On CPU that is bit for bit the mask ``F.dropout`` draws from the global
  generator in a solo run (``bernoulli_(1 - p)`` then ``div_(1 - p)``, ATen's
  ``_dropout_impl``), so stacked members see seq's masks; members with different seeds draw
  different masks. Random ops the stack does not know fall back to vmap's
  ``randomness="different"`` (different per member, not seq's).
* Train/eval mode reaches the template (``train``/``eval``): in eval, dropout is off and
  BatchNorm reads its running statistics without updating them.
* Members that are frozen keep their buffers: ``forward(..., active=mask)`` snapshots the
  frozen members' buffer slices and ``settle()`` (after backward) puts them back.

Shapes: inputs (K, B, *in_shape) (``shared_input=False``) or (B, *in_shape) (one batch for
every member); outputs (K, B, *out_shape).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from engine.executors.unified.contract import UNIT_ROUNDOFF, pass_bound


def unsupported_reason(module: nn.Module) -> str | None:
    """Why ``module`` cannot be trained stacked, or ``None``.

    Known refusals: BatchNorm with ``momentum=None`` (cumulative moving average: the
    factor ``1 / num_batches_tracked`` is read as a Python float inside the forward); a
    random layer other than ``nn.Dropout`` (``Dropout1d/2d/3d``, ``AlphaDropout``...): only
    ``nn.Dropout`` draws from the member's own generator in the stack, the others would
    draw through vmap's randomness, never seq's masks.
    """
    for name, sub in module.named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm) and sub.momentum is None \
                and sub.track_running_stats:
            return (f"BatchNorm '{name}' has momentum=None (cumulative moving average), "
                    "which has no vectorised form")
        if isinstance(sub, nn.modules.dropout._DropoutNd) and type(sub) is not nn.Dropout \
                and sub.p > 0:
            return (f"'{name}' ({type(sub).__name__}) would draw its masks through vmap's "
                    "randomness, not the member's own generator: they would not be seq's")
    return None


def stack_state(members: Sequence[nn.Module]) -> tuple[dict[str, torch.Tensor],
                                                        dict[str, torch.Tensor]]:
    """``torch.func.stack_module_state`` with the class rule of
    :func:`engine.executors.unified.same_class.class_difference` instead of torch's
    ``type(m) is type(members[0])``: members built from a class written inside the builder
    (a new class object per build, the same class statement) stack. Returns (params,
    buffers): name → (K, *shape) tensors, the parameters new leaves requiring grad, as
    torch's.

    Raises:
        RuntimeError: mixed train/eval modes, a member whose class is not member 0's
            structure (naming the difference), or a parameter that requires grad in some
            members only.
    """
    from engine.executors.unified.same_class import class_difference

    if len({m.training for m in members}) > 1:
        raise RuntimeError("stack: the members are not all in the same train/eval mode")
    for i, m in enumerate(members[1:], start=1):
        why = class_difference(type(members[0]), type(m))
        if why is not None:
            raise RuntimeError(f"stack: member {i}'s class is not member 0's: {why}")

    def leaf(name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        grads = {t.requires_grad for t in tensors}
        if len(grads) > 1:
            raise RuntimeError(f"stack: '{name}' requires grad in some members only")
        out = torch.stack(tensors)
        return out.detach().requires_grad_() if grads == {True} else out

    params = [dict(m.named_parameters()) for m in members]
    buffers = [dict(m.named_buffers()) for m in members]
    return ({k: leaf(k, [p[k] for p in params]) for k in params[0]},
            {k: leaf(k, [b[k] for b in buffers]) for k in buffers[0]})


class _NoiseQueue:
    """Dropout noise of one vectorised call, consumed in call order by MemberDropout."""

    def __init__(self) -> None:
        self.items: list[torch.Tensor] = []
        self.calls = 0

    def pop(self) -> torch.Tensor | None:
        if self.calls >= len(self.items):
            self.calls += 1
            return None
        item = self.items[self.calls]
        self.calls += 1
        return item


class MemberDropout(nn.Module):
    """``nn.Dropout`` for the vectorised template: ``x * noise`` with the noise its stack
    drew for each member (shape of one member's input), or ``F.dropout`` (vmap's
    per-member randomness) when the stack supplies none."""

    def __init__(self, p: float, inplace: bool, queue: _NoiseQueue):
        super().__init__()
        self.p = float(p)
        self.inplace = inplace
        self._queue = queue

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The same early exits as ATen's _dropout_impl: no noise drawn for p == 0.
        if not self.training or self.p == 0.0 or x.numel() == 0:
            return x
        if self.p == 1.0:
            return x * torch.zeros((), dtype=x.dtype, device=x.device)
        noise = self._queue.pop()
        if noise is None:
            return nn.functional.dropout(x, self.p, True)
        return x * noise


class Stack:
    """K members trained as one vectorised module.

    Args:
        members: K modules of identical structure (checked by ``engine.executors.unified.verify``),
            all on one device and dtype. They are not modified until :meth:`write_back`.
        generators: one generator per member for dropout noise (the state the global
            generator had after the member was built, see ``member_generator``), or
            ``None`` to use vmap's per-member randomness for dropout.
        sample_shape: one member's input sample shape, e.g. (1, 8, 8); with ``batch_size``
            used once to record the dropout layers' call order and input shapes.
        exact_kernels: run Linear, convolutions, BatchNorm, LayerNorm and GroupNorm per
            member with their native kernels (bit-identical to solo runs; other layers with
            parameters are listed in ``vmapped_layers``; ``engine.executors.unified.exact``)
            instead of vmap's batching rules (equal within float rounding, faster);
            ``exact_linear=False`` keeps vmap's Linear (a check with a tolerance).
        shared_input: how the training steps will call :meth:`forward` (one batch for every
            member, or one per member); when given, :meth:`adopt_gradient_layout` runs for
            that form. ``None``: parameters stay as ``stack_module_state`` made them.

    Attributes:
        params: name → (K, *shape) leaf tensors (requires_grad), the optimizer's tensors.
        buffers: name → (K, *shape) tensors (running statistics, num_batches_tracked).
        forward_calls: how many times the template was called (one per vectorised call).
        relaid: the parameters :meth:`adopt_gradient_layout` stored in their gradient's
            memory layout.
    """

    def __init__(self, members: Sequence[nn.Module],
                 generators: Sequence[torch.Generator] | None,
                 sample_shape: tuple[int, ...], batch_size: int, exact_kernels: bool = False,
                 shared_input: bool | None = None, exact_linear: bool = True):
        if len(members) < 1:
            raise ValueError("a stack needs at least one member")
        self.members = list(members)
        self.k = len(self.members)
        self._args = (tuple(sample_shape), batch_size, exact_kernels)
        self._exact_linear = exact_linear
        params, buffers = stack_state(self.members)
        self.params: dict[str, torch.Tensor] = params
        self.buffers: dict[str, torch.Tensor] = buffers
        ref = self.members[0]
        self.device = next(iter(params.values())).device if params else torch.device("cpu")
        self.dtype = next(iter(params.values())).dtype if params else torch.get_default_dtype()
        self._queue = _NoiseQueue()
        # The template holds no data ('meta'): the optimizer can only ever see the stacked
        # tensors, never the template's own parameters.
        self.template = copy.deepcopy(ref).to("meta")
        self._dropout_calls = self._record_dropout_calls(ref, sample_shape, batch_size)
        self._replace_dropouts(self.template)
        #: submodules running per-member native kernels (``engine.executors.unified.exact``)
        self.exact_layers: list[str] = []
        #: under exact kernels, the submodules with parameters left to vmap's rules (not bit
        #: for bit by construction; ``engine.executors.unified.exact.vmapped_layers``)
        self.vmapped_layers: list[str] = []
        if exact_kernels:
            from engine.executors.unified.exact import use_exact_kernels, vmapped_layers

            self.exact_layers = use_exact_kernels(self.template, linear=exact_linear)
            self.vmapped_layers = vmapped_layers(self.template)
        else:  # vmap's BatchNorm rule fails under autocast on CUDA (amp_norm's docstring)
            from engine.executors.unified.amp_norm import guard_batch_norms

            guard_batch_norms(self.template)
        self.generators = list(generators) if generators is not None else None
        self.training = True
        self.template.train()
        self.forward_calls = 0
        self._pending: tuple[list[bool], dict[str, torch.Tensor]] | None = None
        self._vmapped: dict[bool, Any] = {}
        #: ``compile(fn)`` wrapper applied to the vectorised call (``set_compiler``), or None.
        self.compiler: Any = None
        self._shared_input = shared_input
        self.relaid: list[str] = []
        if shared_input is not None:
            self.relaid = self.adopt_gradient_layout(shared_input)

    # -- construction ------------------------------------------------------------------
    def _record_dropout_calls(self, ref: nn.Module, sample_shape: tuple[int, ...],
                              batch_size: int) -> list[tuple[float, tuple[int, ...]]]:
        """(p, input shape of one member) of every nn.Dropout call of one forward, in call
        order. Run in eval mode and without grad: no RNG draw, no running-stat update."""
        calls: list[tuple[float, tuple[int, ...]]] = []
        hooks = []
        for sub in ref.modules():
            if type(sub) is nn.Dropout:
                hooks.append(sub.register_forward_pre_hook(
                    lambda mod, args: calls.append((float(mod.p), tuple(args[0].shape)))))
        if not hooks:
            return calls
        was_training = ref.training
        try:
            ref.eval()
            with torch.no_grad():
                ref(torch.zeros((batch_size, *sample_shape), dtype=self.dtype,
                                device=self.device))
        finally:
            ref.train(was_training)
            for h in hooks:
                h.remove()
        return calls

    def adopt_gradient_layout(self, shared_input: bool) -> list[str]:
        """Store each parameter in the memory layout its gradient arrives in; returns the
        names of the parameters re-laid.

        Why: under vmap, a Linear's weight gradient comes out of the batched matmul's
        backward transposed ((K, out, in) with strides (out·in, 1, out)). A gradient whose
        layout differs from its parameter's is copied by autograd's AccumulateGrad into a
        tensor of the parameter's layout, every step; stored in the gradient's layout, the
        parameter takes the gradient as it comes. On this CPU that copy was 10-20 % of a
        stacked MLP step at K = 64 (``bench.unified_scaling`` measures it; the tests count
        the copies).

        How: one forward and backward in eval mode (no dropout draw, no running-statistic
        update, the global RNG restored) on a fixed input of the training steps' form
        (``shared_input``) and :data:`PROBE_ROWS` samples per member (a gradient's layout
        follows from the backward's formula, not from the batch size; a full batch of a
        large model would cost a whole training step), gradients through
        ``torch.autograd.grad`` (nothing accumulated). A parameter moves only to a dense
        layout, and only if the probe's forward with the moved parameters agrees with the
        one before as :func:`layout_allowed` requires: a matmul library may round
        differently for another operand layout (MKL does on AMD EPYC hosts, not on Intel
        AVX-512 ones). Under batched kernels that is within the contract's one-pass bound
        (:func:`layout_within_bound`): the batched path promises seq's values within a
        rounding bound, not bits, so another GEMM order is no change of promise, and the
        gate still catches a layout that computes something else. Under exact kernels it
        is bit for bit (:func:`layout_keeps_values`; their per-member kernels hand the
        gradients back in the parameters' own layout, so nothing moves there anyway). When
        the gate says no, nothing moves. Values never change — a layout is not a value.
        Training with moved parameters is within the contract's rounding bound
        (engine.executors.unified.contract). Any failure of the probe (an input the model
        cannot take) leaves the parameters as they are: it is an optimisation.
        """
        names = [n for n, p in self.params.items() if p.requires_grad]
        if not names:
            return []
        sample_shape, batch_size, _ = self._args
        was_training = self.training
        devices = [self.device] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices):
                self.train(False)
                gen = torch.Generator(device=self.device).manual_seed(0)
                rows = min(batch_size, PROBE_ROWS)
                shape = ((rows, *sample_shape) if shared_input
                         else (self.k, rows, *sample_shape))
                x = torch.randn(shape, generator=gen, dtype=self.dtype, device=self.device)
                fn = self._fn(shared_input)
                out = fn(self.params, self.buffers, (), x)
                grads = torch.autograd.grad(out, [self.params[n] for n in names],
                                            grad_outputs=torch.ones_like(out),
                                            allow_unused=True)
                # Only the layouts are needed: the gradients go before any copy is made
                # (at hidden 4096, K = 32 they are 2 GiB).
                layouts = {name: tuple(grad.stride()) for name, grad in zip(names, grads, strict=False)
                           if grad is not None and grad.shape == self.params[name].shape
                           and _dense(grad)}
                del grads, out
                moved: dict[str, torch.Tensor] = {}
                for name, stride in layouts.items():
                    p = self.params[name]
                    if stride == tuple(p.stride()):
                        continue
                    q = torch.empty_strided(p.shape, stride, dtype=p.dtype, device=p.device)
                    with torch.no_grad():
                        q.copy_(p)
                    moved[name] = q.requires_grad_(True)
                if not moved:
                    return []
                with torch.no_grad():
                    same = layout_allowed(
                        fn({**self.params, **moved}, self.buffers, (), x),
                        fn(self.params, self.buffers, (), x), moved,
                        exact_kernels=self._args[2])
                if not same:
                    return []
        except Exception:  # noqa: BLE001 - an optimisation; the parameters stay as they are
            return []
        finally:
            self.train(was_training)
        self.params.update(moved)
        return sorted(moved)

    def _replace_dropouts(self, module: nn.Module) -> None:
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                setattr(module, name, MemberDropout(child.p, child.inplace, self._queue))
            else:
                self._replace_dropouts(child)

    # -- modes -------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Stack":
        """Set train/eval mode on the vectorised template (dropout, BatchNorm)."""
        self.training = mode
        self.template.train(mode)
        return self

    def eval(self) -> "Stack":
        return self.train(False)

    # -- forward -----------------------------------------------------------------------
    def _fn(self, shared_input: bool):
        key = (shared_input, self.compiler is not None)
        fn = self._vmapped.get(key)
        if fn is None:
            fn = torch.vmap(_template_call(self.template, self._queue),
                            in_dims=(0, 0, 0, None if shared_input else 0),
                            randomness="different")
            if self.compiler is not None:
                fn = self.compiler(fn)
            self._vmapped[key] = fn
        return fn

    def set_compiler(self, compiler: Any) -> None:
        """Compile the vectorised call with ``compiler(fn) -> fn`` (e.g. a
        ``torch.compile`` partial) from the next forward on; ``None`` goes back to eager."""
        self.compiler = compiler
        self._vmapped = {k: v for k, v in self._vmapped.items() if not k[1]}

    def draw_noise(self, active: Sequence[bool] | None = None) -> tuple[torch.Tensor, ...]:
        """Per-member dropout noise for one training call: one (K, *shape) tensor per
        dropout call, member k's slice drawn from ``generators[k]`` in call order (frozen
        members draw nothing and get ones)."""
        if not self.training or not self._dropout_calls or self.generators is None:
            return ()
        out = []
        noises = [torch.empty((self.k, *shape), dtype=self.dtype, device=self.device)
                  if 0.0 < p < 1.0 else None for p, shape in self._dropout_calls]
        # Member by member, then layer by layer: the order a solo run draws in.
        for k in range(self.k):
            live = active is None or active[k]
            for (p, _), noise in zip(self._dropout_calls, noises, strict=False):
                if noise is None:
                    continue
                if live:
                    noise[k].bernoulli_(1 - p, generator=self.generators[k])
                else:
                    noise[k].fill_(1.0)
        for (p, _), noise in zip(self._dropout_calls, noises, strict=False):
            if noise is not None:
                out.append(noise.div_(1 - p))
        return tuple(out)

    def forward(self, x: torch.Tensor, *, shared_input: bool = False,
                active: Sequence[bool] | None = None,
                noise: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        """Run every member on its input: (K, B, ...) → (K, B, ...).

        ``active`` (K booleans, optional): members whose buffers may change. The frozen
        members' buffer slices are snapshotted here and put back by :meth:`settle`, which
        the caller runs after ``backward`` (autograd may still read the buffers until
        then), so a frozen member's running statistics stop moving. ``noise``: from
        :meth:`draw_noise` (drawn here when omitted).
        """
        if noise is None:
            noise = self.draw_noise(active)
        self._pending = None
        if active is not None and self.training and self.buffers and not all(active):
            self._pending = (list(active), {n: b.clone() for n, b in self.buffers.items()})
        self.forward_calls += 1
        return self._fn(shared_input)(self.params, self.buffers, noise, x)

    @torch.no_grad()
    def settle(self) -> None:
        """Restore frozen members' buffers snapshotted by the last :meth:`forward`."""
        if getattr(self, "_pending", None) is None:
            return
        active, saved = self._pending
        self._pending = None
        mask = torch.tensor(active, dtype=torch.bool, device=self.device)
        for n, b in self.buffers.items():
            b.copy_(torch.where(mask.view(-1, *([1] * (b.dim() - 1))), b, saved[n]))

    __call__ = forward

    # -- members -----------------------------------------------------------------------
    @torch.no_grad()
    def write_back(self, index: int | None = None) -> None:
        """Copy the stacked parameters and buffers of member ``index`` (all when None)
        into the member module(s), so they can be evaluated or saved as ordinary modules."""
        indices = range(self.k) if index is None else [index]
        for k in indices:
            member = self.members[k]
            for name, p in member.named_parameters():
                p.copy_(self.params[name][k])
            for name, b in member.named_buffers():
                if name in self.buffers:
                    b.copy_(self.buffers[name][k])

    def subset(self, positions: Sequence[int]) -> "Stack":
        """A new stack of the members at ``positions`` (in that order), built from their
        current stacked parameters and buffers: the survivors of a stack whose other
        members finished. Exact (copies); the call counter and compiler carry over (a
        compiled call recompiles for the new member count)."""
        return self._rebuilt([self.members[p] for p in positions],
                             None if self.generators is None
                             else [self.generators[p] for p in positions])

    def joined(self, positions: Sequence[int], member: nn.Module,
               generator: torch.Generator | None) -> "Stack":
        """A new stack of the members at ``positions`` (in that order) and ``member`` last
        (issue 52: a stream's job joining a running stack at a step boundary), built as
        :meth:`subset` builds one: the members' current stacked parameters and buffers
        written back and stacked again (exact copies), ``member`` as it stands (its initial
        weights), its dropout ``generator`` beside the others'. The call counter and
        compiler carry over (a compiled call recompiles for the new member count).

        Raises:
            RuntimeError: ``member`` is not of the stack's structure (``stack_state``)."""
        return self._rebuilt([*(self.members[p] for p in positions), member],
                             None if self.generators is None or generator is None
                             else [*(self.generators[p] for p in positions), generator])

    def _rebuilt(self, members: list[nn.Module],
                 generators: list[torch.Generator] | None) -> "Stack":
        """The re-stack :meth:`subset` and :meth:`joined` share: this stack's weights
        written back into its members first (so the copies are current), then a new stack
        of ``members`` with this one's arguments, mode, call counter and compiler."""
        self.write_back()
        sample_shape, batch_size, exact = self._args
        new = Stack(members, generators, sample_shape, batch_size, exact_kernels=exact,
                    shared_input=self._shared_input, exact_linear=self._exact_linear)
        new.train(self.training)
        new.forward_calls = self.forward_calls
        new.compiler = self.compiler
        return new

    def member_state(self, index: int) -> dict[str, torch.Tensor]:
        """Member ``index``'s parameters and buffers as a name → tensor dict (views)."""
        state = {n: p[index] for n, p in self.params.items()}
        state.update({n: b[index] for n, b in self.buffers.items()})
        return state


def _template_call(template: nn.Module, queue: _NoiseQueue):
    """The function the stack vmaps: ``template`` called with one member's parameters,
    buffers and dropout noise. A closure over the template and the noise queue, not a
    bound method of the stack: the stack caches its vmapped functions, and a cached
    function holding the stack would make every stack a reference cycle — freed only when
    Python's cyclic collector happens to run, which allocations of a few huge tensors
    rarely trigger (verification's float64 copies of an mlp hidden 4096, 768 MiB, stayed
    resident through the whole training)."""

    def call(params, buffers, noises, x):
        queue.items = list(noises)
        queue.calls = 0
        try:
            return functional_call(template, (params, buffers), (x,))
        finally:
            queue.items = []

    return call


def layout_allowed(relaid: torch.Tensor, plain: torch.Tensor,
                   moved: dict[str, torch.Tensor], exact_kernels: bool) -> bool:
    """The gate of :meth:`Stack.adopt_gradient_layout`: whether the probe's forward with
    the parameters ``moved`` (``relaid``, (K, B, ...)) agrees enough with the one before
    (``plain``, same shape) for the stack to keep the moved layout.

    Under exact kernels, bit for bit (:func:`layout_keeps_values`): that path promises
    seq's bits by construction, so no layout may change a GEMM's rounding there. Under
    batched kernels, within :func:`probe_bound` (:func:`layout_within_bound`): that path
    promises seq's values within a rounding bound on every host, and whether another
    operand layout keeps a GEMM's bits is the BLAS's and the CPU's business (MKL keeps
    them on an Intel AVX-512 host and not on an AMD EPYC one), so demanding bits there
    only made the stack slower on some CPUs. A dtype without a unit roundoff in the
    contract (bfloat16, float16) keeps the bit-for-bit gate.
    """
    bound = None if exact_kernels else probe_bound(moved)
    if bound is None:
        return layout_keeps_values(relaid, plain)
    return layout_within_bound(relaid, plain, bound)


def layout_keeps_values(relaid: torch.Tensor, plain: torch.Tensor) -> bool:
    """The exact kernels' gate: ``relaid`` equals ``plain`` bit for bit.

    Why a function of its own (and :func:`layout_within_bound`): the host's BLAS decides
    what each answers, so tests force each branch through them instead of depending on the
    host's answer.
    """
    return torch.equal(relaid, plain)


def layout_within_bound(relaid: torch.Tensor, plain: torch.Tensor, bound: float) -> bool:
    """The batched kernels' gate: ``max|relaid - plain| <= bound * max|plain|`` (the
    contract's normwise reading), every value finite; a non-finite value passes only
    bit for bit."""
    if not (bool(torch.isfinite(relaid).all()) and bool(torch.isfinite(plain).all())):
        return layout_keeps_values(relaid, plain)
    diff = float((relaid - plain).abs().max()) if plain.numel() else 0.0
    return diff <= bound * float(plain.abs().max() if plain.numel() else 0.0)


def probe_bound(moved: dict[str, torch.Tensor]) -> float | None:
    """The contract's one-pass bound for the probe's forward with ``moved`` parameters,
    each (K, *member shape): ``pass_bound(n, L)`` with ``n`` the longest fan-in (a member
    weight's elements per output: a Linear's in_features) and ``L`` one layer per moved
    parameter (each may run another GEMM); ``None`` for a dtype the contract has no unit
    roundoff for, or no moved parameter."""
    if not moved:
        return None
    dtypes = {str(p.dtype).removeprefix("torch.") for p in moved.values()}
    if len(dtypes) != 1 or not dtypes <= set(UNIT_ROUNDOFF):
        return None
    fan_in = max(math.prod(p.shape[2:]) if p.dim() > 2 else 1 for p in moved.values())
    try:
        return pass_bound(max(fan_in, 1), len(moved), dtypes.pop())
    except ValueError:  # a fan-in too long for the dtype: no bound, bits then
        return None


#: Samples per member of :meth:`Stack.adopt_gradient_layout`'s probe.
PROBE_ROWS = 8


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill its memory without gaps or overlaps in some order of
    its dimensions (a transpose of a contiguous tensor is; a broadcast or a slice is not)."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=False), key=lambda d: d[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def member_generator(device: torch.device) -> torch.Generator:
    """A generator holding the global generator's current state for ``device``: built right
    after a member's model, it continues exactly where a solo run's dropout draws would."""
    if device.type == "cpu":
        gen = torch.Generator()
        gen.set_state(torch.get_rng_state())
        return gen
    gen = torch.Generator(device=device)
    gen.set_state(torch.cuda.get_rng_state(device) if device.type == "cuda"
                  else torch.get_rng_state())
    return gen
