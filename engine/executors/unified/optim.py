"""Stacked optimizers: SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW over
(K, ...) tensors, with a value per member for every hyperparameter that can differ.

Each member's update is the arithmetic of ``torch.optim``'s single-tensor implementation
(``torch/optim/sgd.py::_single_tensor_sgd``, ``torch/optim/adam.py::_single_tensor_adam``),
op for op with the same Python-float scalars: a hyperparameter every member shares goes
through torch's scalar kernels once for the whole stack, and per-member values once per run
of consecutive members that share one (a fused multiply-add with a scalar ``alpha`` rounds
once; a (K, 1, ...) tensor of values multiplied and added would round twice). So K stacked
steps equal K independent torch optimizers **bit for bit**, float32 included
(``tests/unit/engine/executors/unified/test_stacked_optim.py``); the cost of per-member values is one kernel call per
run (K at worst, for K different learning rates).

* Per member ((K,) float64 tensors): ``lr``, ``momentum``, ``dampening``, ``weight_decay``
  (SGD); ``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay`` (Adam, AdamW).
* Per bucket (they change the algorithm, so members that differ cannot share a stack: they
  are part of the bucket key, :data:`FLAG_KEYS`, and forwarded exactly): SGD ``nesterov``,
  ``maximize``; Adam/AdamW ``amsgrad``, ``maximize``.
* Freezing: ``step(active)`` leaves every inactive member exactly as it was — parameters,
  momentum buffers, Adam moments and step count (a masked-out member whose state kept
  moving would drift through momentum and decoupled decay).
* The optimizer owns only the stacked tensors it was given (never a template's parameters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: Optimizer keywords that cannot differ between members of one stack (the bucket key).
FLAG_KEYS: dict[str, tuple[str, ...]] = {
    "sgd": ("nesterov", "maximize"),
    "adam": ("amsgrad", "maximize"),
    "adamw": ("amsgrad", "maximize"),
}

_DEFAULTS: dict[str, dict[str, Any]] = {
    "sgd": {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
            "maximize": False},
    "adam": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False,
             "maximize": False},
    "adamw": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False,
              "maximize": False},
}


def _runs(values: Sequence[Any], live: Sequence[bool] | None) -> list[tuple[int, int, Any]]:
    """Maximal runs ``(start, stop, value)`` of consecutive live members sharing a value
    (inactive members belong to no run): the slices one scalar-kernel call updates."""
    runs: list[list[Any]] = []
    for i, v in enumerate(values):
        if live is not None and not live[i]:
            continue
        if runs and runs[-1][1] == i and runs[-1][2] == v:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1, v])
    return [(a, b, v) for a, b, v in runs]


class StackedOptimizer:
    """One optimizer over stacked parameters ``name → (K, *shape)``.

    Args:
        kind: ``"sgd"``, ``"adam"`` or ``"adamw"``.
        params: the stacked leaf tensors (``engine.executors.unified.stack.Stack.params``).
        lrs: K learning rates.
        kwargs: K keyword dicts (torch's names; ``betas`` a pair). Missing keys take
            torch's defaults (adamw: weight decay 0.01).

    Raises:
        ValueError: a value torch would refuse (negative lr, momentum, eps, weight decay,
            betas outside [0, 1), nesterov without momentum or with dampening), members
            that disagree on a flag of :data:`FLAG_KEYS`, or an unknown keyword.
    """

    def __init__(self, kind: str, params: Mapping[str, torch.Tensor], lrs: Sequence[float],
                 kwargs: Sequence[Mapping[str, Any]]):
        if kind not in _DEFAULTS:
            raise ValueError(f"no stacked form of optimizer '{kind}'")
        self.kind = kind
        self.params = dict(params)
        first = next(iter(self.params.values()))
        self.k = first.shape[0]
        self.device = first.device
        if len(lrs) != self.k or len(kwargs) != self.k:
            raise ValueError(f"{len(lrs)} lrs and {len(kwargs)} kwargs for {self.k} members")
        merged = []
        for kw in kwargs:
            unknown = set(kw) - set(_DEFAULTS[kind])
            if unknown:
                raise ValueError(f"optimizer '{kind}' has no keyword(s) {sorted(unknown)}")
            merged.append({**_DEFAULTS[kind], **kw})
        self.flags = {}
        for flag in FLAG_KEYS[kind]:
            values = {bool(m[flag]) for m in merged}
            if len(values) != 1:
                raise ValueError(f"members disagree on '{flag}' ({sorted(values)}): it cannot "
                                 "differ within one stack")
            self.flags[flag] = values.pop()
        f64 = dict(dtype=torch.float64, device=self.device)
        self.hyper: dict[str, torch.Tensor] = {"lr": torch.tensor([float(x) for x in lrs], **f64)}
        if kind == "sgd":
            for key in ("momentum", "dampening", "weight_decay"):
                self.hyper[key] = torch.tensor([float(m[key]) for m in merged], **f64)
        else:
            self.hyper["beta1"] = torch.tensor([float(m["betas"][0]) for m in merged], **f64)
            self.hyper["beta2"] = torch.tensor([float(m["betas"][1]) for m in merged], **f64)
            for key in ("eps", "weight_decay"):
                self.hyper[key] = torch.tensor([float(m[key]) for m in merged], **f64)
        self._check(merged)
        # Host copies decide which branches exist at all (torch skips weight decay == 0 and
        # keeps no momentum buffer for momentum == 0).
        self._host = {key: value.tolist() for key, value in self.hyper.items()}
        #: steps taken by each member (Adam's bias correction; SGD's first-step buffer).
        self.steps = torch.zeros(self.k, **f64)
        self._steps_host = [0] * self.k
        self.state: dict[str, dict[str, torch.Tensor]] = {n: {} for n in self.params}
        self._views: dict[tuple[str, torch.dtype, int], torch.Tensor] = {}

    def _check(self, merged: list[dict[str, Any]]) -> None:
        for i, m in enumerate(merged):
            lr = float(self.hyper["lr"][i])
            if lr < 0:
                raise ValueError(f"member {i}: invalid learning rate: {lr}")
            if m["weight_decay"] < 0:
                raise ValueError(f"member {i}: invalid weight_decay value: {m['weight_decay']}")
            if self.kind == "sgd":
                if m["momentum"] < 0:
                    raise ValueError(f"member {i}: invalid momentum value: {m['momentum']}")
                if m["nesterov"] and (m["momentum"] <= 0 or m["dampening"] != 0):
                    raise ValueError(f"member {i}: nesterov momentum requires a momentum and "
                                     "zero dampening")
            else:
                b1, b2 = m["betas"]
                if not 0.0 <= b1 < 1.0 or not 0.0 <= b2 < 1.0:
                    raise ValueError(f"member {i}: invalid beta parameters: {m['betas']}")
                if m["eps"] < 0:
                    raise ValueError(f"member {i}: invalid epsilon value: {m['eps']}")

    # -- helpers -----------------------------------------------------------------------
    def _view(self, vec: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """(K,) float64 → (K, 1, ..., 1) in ``like``'s dtype (torch casts its Python-float
        hyperparameters to the tensor's dtype in the kernels; this does the same)."""
        return vec.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))

    def _static(self, key: str, like: torch.Tensor) -> torch.Tensor:
        cache_key = (key, like.dtype, like.dim())
        view = self._views.get(cache_key)
        if view is None:
            view = self._view(self.hyper[key], like)
            self._views[cache_key] = view
        return view

    @staticmethod
    def _commit(dst: torch.Tensor, new: torch.Tensor, mask: torch.Tensor | None) -> None:
        if mask is None:
            dst.copy_(new)
        else:
            dst.copy_(torch.where(mask.view(-1, *([1] * (dst.dim() - 1))), new, dst))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params.values():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    # -- the step ----------------------------------------------------------------------
    @torch.no_grad()
    def step(self, active: Sequence[bool] | None = None) -> None:
        """One optimizer step for the ``active`` members (all when ``None``); inactive
        members' parameters and state do not change at all."""
        live = [True] * self.k if active is None else [bool(a) for a in active]
        if not any(live):
            return
        mask = None if all(live) else torch.tensor(live, dtype=torch.bool, device=self.device)
        self._live = live
        first = [live[i] and self._steps_host[i] == 0 for i in range(self.k)]
        for i in range(self.k):
            if live[i]:
                self._steps_host[i] += 1
        self.steps.copy_(torch.tensor(self._steps_host, dtype=torch.float64))
        if self.kind == "sgd":
            self._sgd(mask, first)
        else:
            self._adam(mask)

    def _uniform(self, key: str) -> float | None:
        """The common value of hyperparameter ``key`` when every member has the same one."""
        values = self._host[key]
        return values[0] if all(v == values[0] for v in values) else None

    def _runs(self, key: str, live: Sequence[bool] | None) -> list[tuple[int, int, Any]]:
        """:func:`_runs` of hyperparameter ``key``'s per-member values."""
        return _runs(self._host[key], live)

    def _add_scaled_(self, out: torch.Tensor, other: torch.Tensor, key: str, sign: float,
                     live: Sequence[bool] | None, offset: float = 0.0,
                     skip_zero: bool = False) -> torch.Tensor:
        """``out[k] += (offset + sign * value_k) * other[k]`` in place for the live members,
        with torch's scalar-``alpha`` kernel on each run of equal values: the one rounding of
        the fused multiply-add ``torch.optim`` applies with its Python-float hyperparameters
        (a (K, 1, ...) tensor of values would multiply and add in two). One call per run:
        K calls at worst (every member its own value), one when all share it.
        ``skip_zero``: runs whose value is 0 are left alone (torch skips weight decay 0)."""
        for a, b, v in self._runs(key, live):
            if not (skip_zero and v == 0):
                out[a:b].add_(other[a:b], alpha=offset + sign * v)
        return out

    def _sgd(self, mask: torch.Tensor | None, first: list[bool]) -> None:
        host = self._host
        live = None if mask is None else self._live
        any_wd = any(v != 0 for v in host["weight_decay"])
        any_momentum = any(v != 0 for v in host["momentum"])
        all_momentum = all(v != 0 for v in host["momentum"])
        any_first, all_first = any(first), all(first)
        first_mask = None
        if any_first and not all_first:
            first_mask = torch.tensor(first, dtype=torch.bool, device=self.device)
        # Every hyperparameter goes through torch's own scalar-``alpha`` kernels (a fused
        # multiply-add on vectorised CPUs), once for all members when they share the value,
        # else once per run of members that do (``_add_scaled_``): the arithmetic is
        # torch.optim's bit for bit, per-member values included.
        lr_u, wd_u, m_u, damp_u = (self._uniform(k) for k in
                                   ("lr", "weight_decay", "momentum", "dampening"))
        for name, p in self.params.items():
            grad = p.grad
            if grad is None:
                continue
            g = -grad if self.flags["maximize"] else grad
            if any_wd:  # torch: grad.add(param, alpha=weight_decay), skipped for 0
                g = (g.add(p, alpha=wd_u) if wd_u is not None else
                     self._add_scaled_(g.clone(), p, "weight_decay", 1.0, None, skip_zero=True))
            if any_momentum:
                state = self.state[name]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = torch.zeros_like(p)
                    state["momentum_buffer"] = buf
                if all_first:
                    new_buf = g.clone()
                elif (mask is None and first_mask is None and m_u is not None
                      and damp_u is not None):
                    # Every member steps with the same momentum: torch's own in-place
                    # update (``buf.mul_(m).add_(g, alpha=1 - d)``, _single_tensor_sgd),
                    # without two (K, ...) temporaries and the copy back.
                    new_buf = buf.mul_(m_u).add_(g, alpha=1 - damp_u)
                else:
                    scaled = buf * (m_u if m_u is not None else self._static("momentum", p))
                    new_buf = (scaled.add_(g, alpha=1 - damp_u) if damp_u is not None else
                               self._add_scaled_(scaled, g, "dampening", -1.0, None, 1.0))
                    if first_mask is not None:  # a member's first step: buf = grad
                        new_buf = torch.where(first_mask.view(-1, *([1] * (p.dim() - 1))),
                                              g, new_buf)
                if self.flags["nesterov"]:  # torch: grad.add(buf, alpha=momentum)
                    d = (g.add(new_buf, alpha=m_u) if m_u is not None else
                         self._add_scaled_(g.clone(), new_buf, "momentum", 1.0, None))
                else:
                    d = new_buf
                if not all_momentum:  # torch keeps no buffer for momentum == 0
                    d = torch.where(self._static("momentum", p) != 0, d, g)
                if new_buf is not buf:
                    self._commit(buf, new_buf, mask)
            else:
                d = g
            if lr_u is not None and mask is None:
                p.add_(d, alpha=-lr_u)
            else:  # per run of live members; a frozen member's slice is never written
                self._add_scaled_(p, d, "lr", -1.0, live)

    def _adam(self, mask: torch.Tensor | None) -> None:
        """Adam/AdamW as ``torch/optim/adam.py::_single_tensor_adam``, op for op, on each run
        of consecutive live members sharing lr, betas, eps, weight decay and step count (one
        run for an ensemble; frozen members belong to none and do not change): the same
        kernels with the same Python-float scalars, so bit for bit torch's numbers. (The
        earlier form — (K, 1, ...) tensors of per-member values — multiplied where torch's
        ``addcmul_`` fuses, and took its bias corrections from a float64 tensor ``pow``.)"""
        host = self._host
        decoupled = self.kind == "adamw"
        amsgrad = self.flags["amsgrad"]
        live = None if mask is None else self._live
        runs = _runs(list(zip(host["lr"], host["beta1"], host["beta2"], host["eps"],
                              host["weight_decay"], self._steps_host, strict=True)), live)
        for name, p in self.params.items():
            grad = p.grad
            if grad is None:
                continue
            state = self.state[name]
            if not state:
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = torch.zeros_like(p)
            for a, b, (lr, beta1, beta2, eps, wd, step) in runs:
                param = p[a:b]
                g = -grad[a:b] if self.flags["maximize"] else grad[a:b]
                exp_avg, exp_avg_sq = state["exp_avg"][a:b], state["exp_avg_sq"][a:b]
                if wd != 0:
                    if decoupled:
                        param.mul_(1 - lr * wd)
                    else:
                        g = g.add(param, alpha=wd)
                exp_avg.lerp_(g, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                if amsgrad:
                    max_sq = state["max_exp_avg_sq"][a:b]
                    max_sq.copy_(torch.maximum(max_sq, exp_avg_sq))
                    denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                else:
                    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                param.addcdiv_(exp_avg, denom, value=-step_size)

    # -- members -----------------------------------------------------------------------
    def subset(self, positions: Sequence[int],
               params: Mapping[str, torch.Tensor]) -> "StackedOptimizer":
        """This optimizer restricted to the members at ``positions``, over ``params`` (the
        survivors' new stacked tensors, same names, in ``positions`` order): per-member
        hyperparameters, step counts and state are sliced exactly, so every survivor's
        next step is the one it would have taken in the full stack."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.params = dict(params)
        new.k = len(positions)
        idx = torch.tensor(list(positions), dtype=torch.long, device=self.device)
        new.hyper = {k: v.index_select(0, idx) for k, v in self.hyper.items()}
        new._host = {k: [v[p] for p in positions] for k, v in self._host.items()}
        new._steps_host = [self._steps_host[p] for p in positions]
        new.steps = self.steps.index_select(0, idx)
        new.state = {n: {k: v.index_select(0, idx.to(v.device)) for k, v in st.items()}
                     for n, st in self.state.items()}
        new._views = {}
        return new

    def member_state(self, position: int) -> tuple[dict[str, dict[str, torch.Tensor]], int]:
        """Stack position ``position``'s optimizer state (parameter name → {key: its slice,
        a view}) and the steps it took: what :meth:`load_member` of another stacked
        optimizer takes (a member moving into a new stack)."""
        return ({n: {k: v[position] for k, v in st.items()} for n, st in self.state.items()},
                self._steps_host[position])

    @torch.no_grad()
    def load_member(self, position: int, state: Mapping[str, Mapping[str, Any]],
                    steps: int) -> None:
        """Give stack position ``position`` a member's optimizer state as it stands: what a
        member brings into a new stack (issue 52: a stream's member joining a running
        stack, or a lone member re-stacked with the one that joined it). ``state``:
        parameter name → {key: the member's own tensor (its shape), or None}, in this
        optimizer's keys (``momentum_buffer``; ``exp_avg``, ``exp_avg_sq``,
        ``max_exp_avg_sq``: torch's and this class's names agree); ``steps``: the steps the
        member has taken (Adam's bias corrections, SGD's first-step buffer).

        Exact copies; a key the member does not have stays zero for it, which is the
        state torch starts every key of this optimizer from (Adam's moments, amsgrad's
        maximum; SGD's buffer, which a first step overwrites with the gradient). So the
        member's next step is the one it would have taken where it came from.
        """
        for name, entries in state.items():
            p = self.params[name]
            slot = self.state[name]
            if self.kind != "sgd" and not slot:  # Adam keeps all its keys or none
                slot["exp_avg"] = torch.zeros_like(p)
                slot["exp_avg_sq"] = torch.zeros_like(p)
                if self.flags["amsgrad"]:
                    slot["max_exp_avg_sq"] = torch.zeros_like(p)
            for key, value in entries.items():
                if value is None or key == "step":
                    continue
                if key not in slot:
                    if self.kind != "sgd":
                        raise ValueError(f"optimizer state key {key!r} is not {self.kind}'s")
                    slot[key] = torch.zeros_like(p)
                slot[key][position].copy_(value)
        self._steps_host[position] = int(steps)
        self.steps[position] = float(steps)

    # -- persistence -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: kind, flags, per-member hyperparameters, per-member
        step counts and the per-parameter state (tensors cloned)."""
        return {"kind": self.kind, "flags": dict(self.flags),
                "hyper": {k: v.clone() for k, v in self.hyper.items()},
                "steps": list(self._steps_host),
                "state": {n: {k: v.clone() for k, v in s.items()} for n, s in self.state.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output of an optimizer over the same stack.

        Raises:
            ValueError: another kind, flags, member count or parameter names.
        """
        if state["kind"] != self.kind or dict(state["flags"]) != self.flags:
            raise ValueError(f"state of a {state['kind']} {state['flags']} optimizer cannot "
                             f"load into {self.kind} {self.flags}")
        if len(state["steps"]) != self.k or set(state["state"]) != set(self.state):
            raise ValueError("optimizer state is for another stack (members or parameters "
                             "differ)")
        self.hyper = {k: v.clone().to(self.device) for k, v in state["hyper"].items()}
        self._host = {k: v.tolist() for k, v in self.hyper.items()}
        self._views.clear()
        self._steps_host = [int(s) for s in state["steps"]]
        self.steps = torch.tensor(self._steps_host, dtype=torch.float64, device=self.device)
        self.state = {n: {k: v.clone().to(self.params[n].device) for k, v in s.items()}
                      for n, s in state["state"].items()}


def torch_member_state(optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                       steps: int) -> tuple[dict[str, dict[str, Any]], int]:
    """A solo member's ``torch.optim`` state in :meth:`StackedOptimizer.load_member`'s form:
    parameter name (the module's) → {key: tensor or None}, and its step count (Adam's own
    ``step``; ``steps``, the steps the member took, for SGD, which keeps none)."""
    names = {id(p): n for n, p in model.named_parameters()}
    out: dict[str, dict[str, Any]] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            entries = dict(optimizer.state.get(p) or {})
            if "step" in entries:
                steps = int(entries.pop("step"))
            out[names[id(p)]] = entries
    return out, steps


def _factory(kind: str):
    def build(params: Mapping[str, torch.Tensor], lrs: Sequence[float],
              kwargs: Sequence[Mapping[str, Any]]) -> StackedOptimizer:
        return StackedOptimizer(kind, params, lrs, kwargs)

    build.__name__ = f"stacked_{kind}"
    build.__doc__ = (f"Stacked {kind} over ``params`` (name → (K, ...)) with K learning rates "
                     f"and K keyword dicts: see :class:`StackedOptimizer`.")
    return build


#: The optimizer registry's ``stacked_target`` functions (``engine.parts.optimizers``).
stacked_sgd = _factory("sgd")
stacked_adam = _factory("adam")
stacked_adamw = _factory("adamw")


def build_stacked(name: str, params: Mapping[str, torch.Tensor], lrs: Sequence[float],
                  kwargs: Sequence[Mapping[str, Any]]) -> Any:
    """The stacked form of registered optimizer ``name`` (its ``stacked_target``, so a
    plugin's optimizer can bring its own), over ``params`` with per-member ``lrs``/``kwargs``.

    Raises:
        ConfigError: unknown optimizer, or one without a stacked form (named).
        ValueError: as :class:`StackedOptimizer`.
    """
    import importlib

    from engine.errors import ConfigError
    from engine.registry import OPTIMIZERS

    spec = OPTIMIZERS.get(name)
    if not spec.stacked_target:
        raise ConfigError(f"optimizer '{name}' has no stacked form")
    module, _, func = spec.stacked_target.partition(":")
    return getattr(importlib.import_module(module), func)(params, lrs, kwargs)
