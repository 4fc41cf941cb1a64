"""Is stacking these members legal? Checked before a bucket commits to the vectorised path.

Same class and same parameter shapes is not enough: two instances can differ in a dropout
probability, an activation or a flag read from ``self``, and vmap would train every member
with member 0's logic, silently. Two checks, in order:

1. :func:`fingerprint`: every submodule's qualified name, type, non-tensor attributes
   (``p``, ``eps``, ``momentum``, flags, callables by qualified name with the values their
   closures and defaults capture), module hook counts, parameter and buffer names, shapes,
   dtypes, ``requires_grad`` and the parameters' own (tensor) hook counts. Any difference
   from member 0 refuses the stack, naming the submodule and attribute.
2. Per member, on the **real instances** (:func:`shared_state_mismatch`,
   :func:`own_forward_mismatch`): no two members share a parameter, buffer or submodule
   object (a stack would untie them); each member's forward equals the stack's template
   (one copy of member 0) run with that member's weights, outputs and updated buffers,
   and repeats itself from the same state. A member whose behaviour depends on state
   outside the module, found by its identity, would otherwise train with the template's
   behaviour and pass every check on copies. Two no-grad forwards of each real instance on
   the first :data:`OWN_ROWS` rows of its batch, against the template's side computed for
   all members in one vectorised call (per member only under autocast, half precision or
   CUDA dropout); inputs are cast to the members' dtype first (:func:`member_input`).
3. Per bucket, :func:`probe`: one training step on **copies** (float64, so rounding cannot
   hide or fake a difference), through both routes — the stack's vectorised step
   (``Stack`` forward in train mode, the bucket's stacked loss, ``backward`` of the summed
   losses, the stacked optimizer) and each member alone (its own module, the task
   criterion as ``engine.train.loop`` calls it, the torch optimizer from the registry).
   Outputs, gradients, updated parameters and every buffer (running statistics,
   ``num_batches_tracked``) must agree. Dropout is live: on CPU the solo route draws from
   the global generator set to the member's state, the stack from the member's generator,
   so the masks must match too. Members interchangeable by construction (same model and
   constructor arguments, same fingerprint, and by step 2 each computes what the template
   computes) are probed through their :func:`representatives` (member 0, the last, and one
   per hyperparameter that differs): the cost of the probe does not grow with K
   (:func:`verify_bucket`).

Around every forward of a real instance (step 2) and of each copy's solo step (step 3),
the module's Python state (its submodules' non-tensor attributes) is compared before and
after (:mod:`engine.executors.unified.python_state`): a forward that changes it (a step
counter) would run once per step on the template for all members, so it refuses the stack.

A disagreement or an exception is a verdict (``disagreed`` / ``raised``) with what
differed; the caller falls back to eager and records it.

What the checks cannot see (docs/unified-model-pitfalls.md, the addendum; docs/fidelity.md):
behaviour that one batch and one step do not exercise (a branch taken at epoch 3, on
another batch size, in eval mode only); a member's *backward* that differs from the
template's while its forward, fingerprint and tensor hooks agree (a custom autograd
function reading state outside the module) when that member is not a representative;
state outside the module that changes neither the forward's output nor its buffers on
this batch (for a member that is not a representative: on the first :data:`OWN_ROWS` rows
of its batch); and state outside the module that a forward changes, which the checks change
(twice; they cannot put it back).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from engine.errors import failure_line
from engine.executors.unified import python_state
from engine.parts import tasks as task_lib

#: nn.Module's own bookkeeping attributes: not part of a module's configuration.
_MODULE_INTERNALS = set(vars(nn.Module()).keys())
_HOOK_DICTS = {k for k in _MODULE_INTERNALS if "hook" in k}


def _describe_value(value: Any) -> Any:
    """A comparable stand-in for a non-tensor attribute value."""
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")  # NaN != NaN: two equal members would differ
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu()
        digest = (hash(data.numpy().tobytes()) if data.numel() <= 1_000_000
                  and data.dtype not in (torch.bfloat16,) else data.numel())
        return ("tensor", tuple(value.shape), str(value.dtype), digest)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_describe_value(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _describe_value(v)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in value)))
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    func = getattr(value, "func", None)  # functools.partial
    if func is not None and hasattr(value, "args"):
        return ("partial", _describe_value(func), _describe_value(value.args),
                _describe_value(getattr(value, "keywords", {})))
    if callable(value):
        # A lambda or nested function can carry its configuration in its closure or its
        # defaults (``self.act = lambda x: x * scale``): same qualified name, different
        # computation. Their values are part of the description (not bound methods: their
        # ``__self__`` is the module itself, described by its own attributes).
        inner = getattr(value, "__func__", None) is None and getattr(value, "__code__", None)
        captured: Any = None
        if inner:
            cells = getattr(value, "__closure__", None) or ()
            captured = (tuple(_describe_cell(c) for c in cells),
                        _describe_value(getattr(value, "__defaults__", None)))
        return ("callable", getattr(value, "__module__", None),
                getattr(value, "__qualname__", type(value).__qualname__), captured)
    text = repr(value)
    return (type(value).__qualname__, None if " at 0x" in text else text)


def _describe_cell(cell: Any) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell (a variable not bound yet)
        return "<empty>"
    if isinstance(value, nn.Module):  # described by its own fingerprint when a submodule
        return ("module", type(value).__qualname__)
    return _describe_value(value)


def fingerprint(module: nn.Module) -> list[tuple[str, str, tuple[Any, ...]]]:
    """The structure of ``module``: one entry per submodule (pre-order), ``(name, type,
    attributes)`` where attributes are ``(key, value)`` pairs of its configuration,
    parameter and buffer descriptions and hook counts."""
    out = []
    for name, sub in module.named_modules():
        attrs: list[tuple[str, Any]] = []
        for key, value in sorted(vars(sub).items()):
            if key in _HOOK_DICTS:
                attrs.append((f"hooks:{key}", len(value) if hasattr(value, "__len__") else value))
            elif key in _MODULE_INTERNALS:
                continue
            else:
                attrs.append((key, _describe_value(value)))
        for pname, p in sub.named_parameters(recurse=False):
            # Hooks on the tensor itself (``p.register_hook``: e.g. a gradient scaled for
            # one member) change its backward, which no forward shows.
            hooks = tuple(len(getattr(p, h, None) or ()) for h in
                          ("_backward_hooks", "_post_accumulate_grad_hooks"))
            attrs.append((f"param:{pname}", (tuple(p.shape), str(p.dtype), p.requires_grad,
                                             hooks)))
        for bname, b in sub.named_buffers(recurse=False):
            attrs.append((f"buffer:{bname}", None if b is None else (tuple(b.shape),
                                                                      str(b.dtype))))
        cls = type(sub)
        out.append((name, f"{cls.__module__}.{cls.__qualname__}", tuple(attrs)))
    return out


def fingerprint_mismatch(members: Sequence[nn.Module]) -> str | None:
    """``None`` when every member's :func:`fingerprint` equals member 0's, else the first
    difference, e.g. ``member 1 differs at '4' (Dropout): p = 0.5 vs 0.2``."""
    from engine.executors.unified.same_class import class_difference

    ref = fingerprint(members[0])
    ref_types = [type(sub) for sub in members[0].modules()]
    for i, member in enumerate(members[1:], start=1):
        other = fingerprint(member)
        if len(other) != len(ref):
            return f"member {i} has {len(other)} submodules, member 0 has {len(ref)}"
        # The type names alone agree for two different classes of one name; the class rule
        # (engine.executors.unified.same_class) admits only the same class statement.
        for (name, _, _), t0, t1 in zip(ref, ref_types, [type(s) for s in member.modules()],
                                        strict=True):
            why = class_difference(t0, t1)
            if why is not None:
                return f"member {i} differs at '{name or '(root)'}': {why}"
        for (n0, t0, a0), (n1, t1, a1) in zip(ref, other, strict=True):
            where = f"'{n0 or '(root)'}' ({t0.rsplit('.', 1)[-1]})"
            if n0 != n1 or t0 != t1:
                return f"member {i} differs at {where}: {n1!r} of type {t1}"
            if a0 != a1:
                d0, d1 = dict(a0), dict(a1)
                for key in sorted(set(d0) | set(d1)):
                    if d0.get(key, "<absent>") != d1.get(key, "<absent>"):
                        return (f"member {i} differs at {where}: {key} = "
                                f"{_short(d1.get(key, '<absent>'))} vs "
                                f"{_short(d0.get(key, '<absent>'))}")
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class Verdict:
    """Outcome of a check: ``verdict`` is ``verified``, ``disagreed`` or ``raised``."""

    verdict: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "verified"


class _GeneratorDropout(nn.Module):
    """Solo-route dropout drawing from an explicit generator (devices where F.dropout's
    own kernel cannot be reproduced by the stack's noise, e.g. CUDA's fused dropout)."""

    def __init__(self, p: float, generator: torch.Generator):
        super().__init__()
        self.p = p
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.numel() == 0:
            return x
        if self.p == 1.0:
            return x * torch.zeros((), dtype=x.dtype, device=x.device)
        noise = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)
        return x * noise.div_(1 - self.p)


def _swap_dropouts(module: nn.Module, generator: torch.Generator) -> None:
    for name, child in list(module.named_children()):
        if type(child) is nn.Dropout:
            setattr(module, name, _GeneratorDropout(child.p, generator))
        else:
            _swap_dropouts(child, generator)


def _clone_generator(gen: torch.Generator) -> torch.Generator:
    out = torch.Generator(device=gen.device)
    out.set_state(gen.get_state())
    return out


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> float | None:
    """None when close, else the largest absolute difference."""
    if a.shape != b.shape:
        return math.inf
    if not a.is_floating_point():
        return None if torch.equal(a, b) else float((a.double() - b.double()).abs().max())
    if torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        return None
    return float((a - b).abs().max())


#: Tolerance of a member's own forward against its copy's (same dtype, same kernels: equal
#: on CPU; on CUDA within a non-deterministic kernel's rounding).
OWN_RTOL, OWN_ATOL = 1e-5, 1e-6
#: Rows of each member's batch its real-instance check runs on (:func:`own_forward_mismatch`).
OWN_ROWS = 8


def _forward_from(module: nn.Module, x: torch.Tensor,
                  generator: torch.Generator | None,
                  state: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """``module(x)`` in train mode without autograd, its dropout drawing from a copy of
    ``generator``'s state (the global RNG forked around it: nothing outside changes);
    with ``state``, ``functional_call(module, state, x)`` (its parameters and buffers)."""
    from torch.func import functional_call

    device = x.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            torch.no_grad():
        if generator is not None:
            if device.type == "cuda":
                torch.cuda.set_rng_state(generator.get_state(), device)
            else:
                torch.set_rng_state(generator.get_state())
        return module(x) if state is None else functional_call(module, state, (x,))


def _template_forward(template: nn.Module, member: nn.Module, x: torch.Tensor,
                      generator: torch.Generator | None) -> tuple[torch.Tensor,
                                                               dict[str, torch.Tensor]]:
    """The template (one copy of member 0) run with ``member``'s parameters and fresh copies
    of its buffers, as the stack runs it: the output and the buffers after the call."""
    buffers = {n: b.clone() for n, b in member.named_buffers()}
    state = {**{n: p.detach() for n, p in member.named_parameters()}, **buffers}
    return _forward_from(template, x, generator, state), buffers


def member_input(members: Sequence[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """``x`` in the dtype of the members' floating parameters (a floating ``x`` only).

    Verification asks whether stacking is legal, not whether the data suit the model: a
    float64 batch for float32 members (a test harness's data; a cell's are float32) would
    otherwise fail every forward with a dtype error and send the bucket eager for a reason
    that has nothing to do with stacking. Members without floating parameters, or an
    integer ``x`` (token ids), are left as they are."""
    if not x.is_floating_point():
        return x
    dtype = next((p.dtype for p in members[0].parameters() if p.is_floating_point()), None)
    return x if dtype is None or dtype == x.dtype else x.to(dtype)


def _vectorised_twins(members: Sequence[nn.Module],
                      generators: Sequence[torch.Generator] | None,
                      x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
    """Every member's twin at once: the stack's template (one copy of member 0) run with
    each member's weights and copies of its buffers in **one** vectorised call (the
    ``Stack`` that trains, on cloned dropout generators), or ``None`` where that call is
    not the per-member template forward to within :data:`OWN_RTOL`: under autocast or in
    half precision (a batched matmul may round differently from the solo one by more than
    that), on CUDA with dropout (the stack's masks differ from a solo forward's there by
    design), without per-member generators when the model has dropout, or a model the
    stack refuses. Returns ((K, B, ...) outputs, name → (K, ...) buffers after the call)."""
    from engine.executors.unified.stack import Stack, unsupported_reason

    ref = members[0]
    dtypes = {p.dtype for p in ref.parameters()}
    has_dropout = any(type(m) is nn.Dropout for m in ref.modules())
    if (len(members) < 2 or not dtypes <= {torch.float32, torch.float64}
            or torch.is_autocast_enabled(x.device.type)
            or (has_dropout and (generators is None or x.device.type != "cpu"))
            or unsupported_reason(ref) is not None):
        return None
    gens = [_clone_generator(g) for g in generators] if generators else None
    # Per-member native kernels for BatchNorm and convolutions (``exact``): vmap's rules
    # for them round differently from a solo forward (a grouped convolution sums in
    # another order), which on a deep network could exceed the check's tolerance and
    # refuse a sound stack; vmap's Linear differs from the solo addmm by an ulp at most
    # (a blocked long contraction, a matrix-vector product): within the tolerance.
    stack = Stack(members, gens, tuple(x.shape[2:]), x.shape[1], exact_kernels=True,
                  exact_linear=False)
    stack.train()
    with torch.no_grad():
        out = stack(x)
    return out, stack.buffers


def own_forward_mismatch(members: Sequence[nn.Module],
                         generators: Sequence[torch.Generator] | None,
                         x: torch.Tensor) -> str | None:
    """``None`` when every member, run as the **real instance**, computes what the stack's
    template (one deep copy of member 0) computes with that member's weights; else which
    member differs, how and by how much.

    The stack trains through a copy of member 0 (its template) and :func:`probe` through
    copies, so neither sees state that a member keeps outside itself and finds by identity
    (a dict keyed by ``id(module)``, a weak reference, a registry of instances): a member
    whose behaviour depends on it would train with the template's behaviour, and the probe
    would agree. Per member, in train mode, under ``no_grad``, dropout drawn from the
    member's generator state (the global RNG forked), on its batch ``x[k]``:

    1. its own forward against the template's with its parameters and a copy of its
       buffers: outputs, and the buffers after the call (running statistics), must agree;
    2. its own forward again from the same state (buffers and attributes put back): it
       must repeat itself, else the forward changed state outside the module that decides
       what it computes (a call counter kept by identity), which a stack cannot carry.

    This is also what makes the members *interchangeable*: each one computes what the
    template computes with its weights, so a probe of the template through both routes
    (:func:`probe` on :func:`representatives`) speaks for all of them.

    Cost: the template's side is **one** vectorised call for all K members
    (:func:`_vectorised_twins`; per member only where that call cannot stand in for it),
    so what grows with K is two no-grad forwards of each real instance — the only way to
    see state found by an instance's identity is to call that instance. The real instance
    is left as found: its buffers and its submodules' non-tensor attributes are put back.
    State outside the module that its forward changes cannot be put back: the check
    changes it twice.
    """
    # A few rows carry what this check looks for (state found by an instance's identity
    # changes what the instance computes, not how many rows it computes it for); the
    # float64 probe of the representatives runs on the whole batch.
    x = member_input(members, x)[:, :OWN_ROWS]
    device = x.device
    cuda = device.type == "cuda"
    runs = []
    # One fork of the global RNG around every forward (restored at the end); each forward
    # starts from its member's generator state, or from the state found here.
    with torch.random.fork_rng(devices=[device] if cuda else []), torch.no_grad():
        found = torch.cuda.get_rng_state(device) if cuda else torch.get_rng_state()

        def forward(member: nn.Module, xk: torch.Tensor, gen) -> torch.Tensor:
            state = gen.get_state() if gen is not None else found
            if cuda:
                torch.cuda.set_rng_state(state, device)
            else:
                torch.set_rng_state(state)
            return member(xk)

        for k, member in enumerate(members):
            gen = generators[k] if generators else None
            was_training = member.training
            buffers = {n: b.clone() for n, b in member.named_buffers()}
            attrs = python_state.save(member)
            before = python_state.snapshot(member)

            def put_back(member=member, buffers=buffers, attrs=attrs) -> None:
                for n, b in member.named_buffers():
                    b.copy_(buffers[n])
                python_state.restore(attrs)

            try:
                member.train()
                own = forward(member, x[k], gen)
                changed = python_state.change(member, before)
                if changed is not None:  # put back by the finally below
                    return python_state.reason(changed, k)
                own_buffers = {n: b.clone() for n, b in member.named_buffers()}
                put_back()
                again = forward(member, x[k], gen)
            finally:
                put_back()
                member.train(was_training)
            runs.append((own, own_buffers, again))
    # The twins after every real forward: building the stack runs one (no-grad, eval)
    # forward of member 0 to record its dropout calls, which a forward keeping a counter
    # by identity would count; its Python state is put back, a change refused, as above.
    before = python_state.snapshot(members[0])
    saved = python_state.save(members[0])
    twins = _vectorised_twins(members, generators, x)
    changed = python_state.change(members[0], before)
    if changed is not None:
        python_state.restore(saved)
        return python_state.reason(changed, 0)
    template = None
    if twins is None:
        template = copy.deepcopy(members[0])
        template.train()
    elif _all_close(runs, twins):
        return None  # every member agrees on every count: nothing to name
    for k, (member, (own, own_buffers, again)) in enumerate(zip(members, runs, strict=True)):
        gen = generators[k] if generators else None
        if twins is not None:
            twin, twin_buffers = twins[0][k], {n: b[k] for n, b in twins[1].items()}
        else:
            twin, twin_buffers = _template_forward(template, member, x[k], gen)
        diff = _close(own, twin, OWN_RTOL, OWN_ATOL)
        if diff is not None:
            return (f"member {k}: its own forward differs from a copy's (max |Δ| {diff:.3g}): "
                    "it depends on state outside the module, which a stack (a copy of member "
                    "0) cannot carry")
        for n, b in own_buffers.items():
            diff = _close(b, twin_buffers[n], OWN_RTOL, OWN_ATOL) if n in twin_buffers \
                else math.inf
            if diff is not None:
                return (f"member {k}: its own forward updates buffer {n} unlike a copy's "
                        f"(max |Δ| {diff:.3g}): it depends on state outside the module")
        diff = _close(own, again, OWN_RTOL, OWN_ATOL)
        if diff is not None:
            return (f"member {k}: its own forward does not repeat itself from the same state "
                    f"(max |Δ| {diff:.3g}): it changes state outside the module that decides "
                    "what it computes, which a stack cannot carry")
    return None


def _all_close(runs: list[tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]],
               twins: tuple[torch.Tensor, dict[str, torch.Tensor]]) -> bool:
    """Whether every member's own forward, its buffers after it and its repeat are within
    :data:`OWN_RTOL`/:data:`OWN_ATOL` of the twins — for all K members in a few stacked
    comparisons instead of three per member. ``False`` also when the outputs cannot be
    stacked (shapes or dtypes differ, not floating): the member-by-member loop decides,
    and names the first member that differs."""
    outs = [own for own, _, _ in runs]
    first = outs[0]
    if not (isinstance(first, torch.Tensor) and first.is_floating_point()
            and all(isinstance(o, torch.Tensor) and o.shape == first.shape
                    and o.dtype == first.dtype for o in outs)
            and twins[0].shape == (len(outs), *first.shape)):
        return False

    def close(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and bool(torch.isclose(
            a, b, rtol=OWN_RTOL, atol=OWN_ATOL, equal_nan=True).all())

    if not close(torch.stack(outs), twins[0]):
        return False
    if not close(torch.stack(outs), torch.stack([again for _, _, again in runs])):
        return False
    for name, stacked in twins[1].items():
        if not stacked.is_floating_point():
            if not all(torch.equal(b[name], stacked[k]) for k, (_, b, _) in enumerate(runs)):
                return False
        elif not close(torch.stack([b[name] for _, b, _ in runs]), stacked):
            return False
    return all(set(b) <= set(twins[1]) for _, b, _ in runs)


def shared_state_mismatch(members: Sequence[nn.Module]) -> str | None:
    """``None`` when no two members share a parameter, a buffer or a submodule object; else
    the first one shared. Stacking copies every member's tensors into its own slice, so a
    tie between members (one embedding passed to every constructor, one submodule object
    reused) would be silently untied: each member would train its own copy."""
    seen_modules: dict[int, tuple[int, str]] = {}
    seen_tensors: dict[int, tuple[int, str]] = {}
    for k, member in enumerate(members):
        for name, sub in member.named_modules():
            other = seen_modules.get(id(sub))
            if other is not None and other[0] != k:
                return (f"member {k}'s submodule '{name or '(root)'}' is member {other[0]}'s "
                        f"'{other[1] or '(root)'}' (one object shared between members): a "
                        "stack would untie it")
            seen_modules.setdefault(id(sub), (k, name))
        for kind, named in (("parameter", member.named_parameters()),
                            ("buffer", member.named_buffers())):
            for name, t in named:
                if t is None or t.device.type == "meta" or t.numel() == 0:
                    continue
                ptr = t.untyped_storage().data_ptr()
                other = seen_tensors.get(ptr)
                if other is not None and other[0] != k:
                    return (f"member {k}'s {kind} {name} shares its storage with member "
                            f"{other[0]}'s {other[1]}: a stack would untie them")
                seen_tensors.setdefault(ptr, (k, f"{kind} {name}"))
    return None


def representatives(lrs: Sequence[float],
                    optimizer_kwargs: Sequence[dict[str, Any]]) -> list[int]:
    """The members a probe of an interchangeable bucket runs: member 0, the last member
    (another seed, another batch, so a batching rule that mixes members shows), and for
    every hyperparameter that is not the same for all members the first member whose value
    differs from member 0's, so the stacked optimizer takes the per-member branch exactly
    when the whole bucket does. At most 2 + the number of hyperparameters, whatever K is."""
    k = len(lrs)
    picks = {0, k - 1}
    columns: dict[str, list[Any]] = {"lr": [float(v) for v in lrs]}
    for key in sorted({key for kw in optimizer_kwargs for key in kw}):
        columns[key] = [repr(kw.get(key, "<default>")) for kw in optimizer_kwargs]
    for values in columns.values():
        first_other = next((i for i, v in enumerate(values) if v != values[0]), None)
        if first_other is not None:
            picks.add(first_other)
    return sorted(picks)


def probe(members: Sequence[nn.Module], generators: Sequence[torch.Generator] | None,
          x: torch.Tensor, y: torch.Tensor, *, task: Any, optimizer: str,
          lrs: Sequence[float], optimizer_kwargs: Sequence[dict[str, Any]],
          stacked_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
          sample_shape: tuple[int, ...], rtol: float = 1e-5, atol: float = 1e-7,
          exact_kernels: bool = False, members_checked: bool = False,
          names: Sequence[int] | None = None) -> Verdict:
    """One training step through both routes on float64 copies; compare everything.

    Args:
        members: the K member modules (not modified).
        generators: their dropout generators (cloned, not advanced), or None.
        x: (K, B, *sample_shape) one batch per member; y: (K, B[, ...]) targets.
        task: the ``TaskSpec``; optimizer: its registry name; lrs/optimizer_kwargs: per
            member; stacked_loss: the (K,) loss the bucket will train with.

    The default tolerances allow for rounding differences between vmap's batched kernels
    and the solo ones. ``members_checked``: the caller already ran
    :func:`own_forward_mismatch` on every member (``verify_bucket``), so it is not run
    again here on the members given (a bucket's representatives); ``names``: the bucket
    index of each member given, used in the verdict's detail.
    """
    from engine.executors.unified.losses import upcast_half
    from engine.executors.unified.optim import build_stacked
    from engine.executors.unified.stack import Stack
    from engine.parts.optimizers import build_optimizer

    label = list(names) if names is not None else list(range(len(members)))
    x = member_input(members, x)
    try:
        # The members themselves first: everything below runs on copies.
        outside = None if members_checked else own_forward_mismatch(members, generators, x)
        if outside is not None:
            return Verdict("disagreed", outside)
        dtype = torch.float64
        device = x.device
        xs = x.to(dtype) if x.is_floating_point() else x
        ys = y.to(dtype) if y.is_floating_point() else y
        a = [copy.deepcopy(m).to(dtype) for m in members]
        b = [copy.deepcopy(m).to(dtype) for m in members]
        gens_a = [_clone_generator(g) for g in generators] if generators else None
        gens_b = [_clone_generator(g) for g in generators] if generators else None
        for m in a + b:
            m.train()

        # Vectorised route: exactly the code that trains.
        stack = Stack(a, gens_a, sample_shape, x.shape[1], exact_kernels=exact_kernels)
        opt = build_stacked(optimizer, stack.params, lrs, optimizer_kwargs)
        out = stack(xs)
        losses = stacked_loss(out, ys)
        opt.zero_grad()
        losses.sum().backward()
        grads = {n: (p.grad.clone() if p.grad is not None else None)
                 for n, p in stack.params.items()}
        opt.step()

        # Solo route: each member as engine.train.loop trains it.
        criterion = task.criterion()
        for k, m in enumerate(b):
            if gens_b is not None and device.type != "cpu":
                _swap_dropouts(m, gens_b[k])
            solo_opt = build_optimizer(optimizer, m.parameters(), lrs[k], optimizer_kwargs[k])
            before = python_state.snapshot(m)
            with torch.random.fork_rng(devices=[]):
                if gens_b is not None and device.type == "cpu":
                    torch.set_rng_state(gens_b[k].get_state())
                o = m(xs[k])
                o2, t = task_lib.prepare(task, o, ys[k])
                loss = criterion(upcast_half(o2), t)
                solo_opt.zero_grad(set_to_none=True)
                loss.backward()
                solo_grads = {n: (p.grad.clone() if p.grad is not None else None)
                              for n, p in m.named_parameters()}
                solo_opt.step()
            # A forward with grad enabled may take a branch the no-grad own-forward
            # check did not: its Python state is compared here too, on the copy.
            changed = python_state.change(m, before)
            if changed is not None:
                return Verdict("disagreed", python_state.reason(changed, label[k]))
            diff = _close(out[k].detach(), o.detach(), rtol, atol)
            if diff is not None:
                return Verdict("disagreed",
                               f"member {label[k]}: outputs differ (max |Δ| {diff:.3g})")
            for n, g in solo_grads.items():
                sg = grads.get(n)
                if g is None and sg is None:
                    continue
                if g is None or sg is None:
                    return Verdict("disagreed", f"member {label[k]}: gradient of {n} present "
                                                "in one route only")
                diff = _close(sg[k], g, rtol, atol)
                if diff is not None:
                    return Verdict("disagreed", f"member {label[k]}: gradient of {n} differs "
                                                f"(max |Δ| {diff:.3g})")
            for n, p in m.named_parameters():
                diff = _close(stack.params[n][k].detach(), p.detach(), rtol, atol)
                if diff is not None:
                    return Verdict("disagreed", f"member {label[k]}: parameter {n} after the step "
                                                f"differs (max |Δ| {diff:.3g})")
            for n, buf in m.named_buffers():
                if n not in stack.buffers:
                    return Verdict("disagreed", f"member {label[k]}: buffer {n} is not stacked")
                diff = _close(stack.buffers[n][k], buf, rtol, atol)
                if diff is not None:
                    return Verdict("disagreed", f"member {label[k]}: buffer {n} differs after the "
                                                f"step (max |Δ| {diff:.3g})")
        what = (f"{len(members)} float64 copies" if names is None else
                f"float64 copies of members {', '.join(map(str, label))}")
        return Verdict("verified", f"one step on {what}: outputs, gradients, parameters and "
                                   "buffers agree")
    except Exception as exc:  # any failure of the vectorised route is a verdict, not a crash
        return Verdict("raised", failure_line(exc, 300))


def verify_bucket(members: Sequence[nn.Module], generators: Sequence[torch.Generator] | None,
                  x: torch.Tensor, y: torch.Tensor, *, constructed_alike: bool,
                  lrs: Sequence[float], optimizer_kwargs: Sequence[dict[str, Any]],
                  **probe_kwargs: Any) -> tuple[Verdict, list[int]]:
    """Verify one bucket before it vectorises; returns the verdict and the members whose
    float64 training step was probed. The caller has compared fingerprints
    (:func:`fingerprint_mismatch`).

    Per member (cheap, no-grad forwards, no copies): :func:`shared_state_mismatch` and
    :func:`own_forward_mismatch` (each real instance computes what the stack's template
    computes with its weights, and repeats itself). Per bucket: members that are
    interchangeable by construction (``constructed_alike``: same model and constructor
    arguments; with the same fingerprint and the per-member check, the template speaks for
    each of them) get one :func:`probe` on their :func:`representatives`, whatever K is;
    otherwise every member is probed.

    Args:
        x, y: (K, B, ...) one batch per member; ``probe_kwargs``: :func:`probe`'s
            keywords (task, optimizer, stacked_loss, sample_shape, exact_kernels).
    """
    x = member_input(members, x)
    try:
        shared = shared_state_mismatch(members)
        if shared is not None:
            return Verdict("disagreed", shared), []
        outside = own_forward_mismatch(members, generators, x)
        if outside is not None:
            return Verdict("disagreed", outside), []
    except Exception as exc:  # a member that cannot even run forward: a verdict
        return Verdict("raised", failure_line(exc, 300)), []
    picks = (representatives(lrs, optimizer_kwargs) if constructed_alike
             else list(range(len(members))))
    index = torch.tensor(picks, dtype=torch.long, device=x.device)
    verdict = probe([members[i] for i in picks],
                    [generators[i] for i in picks] if generators else None,
                    x.index_select(0, index), y.index_select(0, index),
                    lrs=[lrs[i] for i in picks],
                    optimizer_kwargs=[optimizer_kwargs[i] for i in picks],
                    members_checked=True, names=picks, **probe_kwargs)
    return verdict, picks
