"""Python state a vectorised forward cannot carry (``docs/fidelity.md``, "Verification per
bucket").

A stack calls its template (one copy of member 0) once per step for all K members, so a
forward that changes a plain Python attribute of its module (a step counter feeding a
schedule, a flag set on the first call, a list it appends to) runs that code once for the
whole bucket, on the template, instead of once per member on each member: the members
train with the template's state, and a bucket that passed every tensor check trains
differently from seq. Nothing about tensors shows it. So the checks that already run a
forward (the own-forward check on the real instances, the one-step probe on copies) take a
:func:`snapshot` of each module before it and ask :func:`change` after it; any change sends
the bucket eager, naming the attribute (``forward changes Python state: Net.steps (0 → 1)``).

What is compared: every submodule's instance ``__dict__`` (recursively, by
``named_modules``) minus ``nn.Module``'s own bookkeeping (``_parameters``, ``_buffers``,
``_modules``, the hook dicts, ``training`` and the rest of what ``nn.Module()`` itself
holds): parameters and buffers are the stack's business and compared as tensors by the
checks already.

The fingerprint is **shallow** on purpose, because it runs around every real forward of
the own-forward check (two per member, K members) and must cost next to nothing against
them:

* numbers, strings, bytes, bools and ``None`` by value (floats by ``float.hex``: a NaN
  equals itself); tuples of those element by element (up to :data:`MAX_TUPLE` elements,
  nested ones too: a tuple cannot change in place, so value is what matters);
* a mutable container (list, dict, set, deque, bytearray, ...) by identity and size:
  an append, a new key or a re-bound container shows, an element overwritten in place
  (``self.hist[0] = x``) does not (comparing contents would cost as much as the
  container holds, which a forward's cache may make large);
* a plain tensor attribute (not a buffer) by identity and version counter (torch bumps
  ``_version`` on every in-place operation), so ``self.t += 1`` and re-binding show;
* any other object by type and identity: re-binding shows, a change inside the object
  does not (its state is its own business: a ``torch.Generator`` advances with every
  dropout draw, which the dropout checks cover; reading arbitrary objects deeply could
  call user code or cost without bound).

An attribute added or removed by the forward is a change too. :func:`save` and
:func:`restore` put a real instance's Python state back after a check's forward (the
contents of its built-in containers too), so a bucket sent eager trains from the state
seq's job starts from. No user code runs while fingerprinting (no ``__eq__``,
``__len__`` or ``__repr__`` of arbitrary objects: only built-in containers are measured).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch
from torch import nn

#: nn.Module's own bookkeeping attributes (``_parameters``, ``_buffers``, ``_modules``, the
#: hook dicts, ``training``, ...): torch's slots, not the model's Python state.
TORCH_SLOTS = frozenset(vars(nn.Module()).keys())
#: Longest tuple compared element by element; a longer one counts by identity and length.
MAX_TUPLE = 32

_SCALARS = (type(None), bool, int, str, bytes)
#: Mutable containers compared by identity and size (their subclasses too: OrderedDict,
#: defaultdict, Counter).
_CONTAINERS = (list, dict, set, frozenset, bytearray, deque)
Snapshot = dict[str, Any]


def _describe(value: Any, depth: int = 0) -> Any:
    """The shallow stand-in of one attribute value (module docstring)."""
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, complex):
        return ("complex", value.real.hex(), value.imag.hex())
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, tuple):
        if len(value) <= MAX_TUPLE and depth < 3:
            return ("tuple", tuple(_describe(v, depth + 1) for v in value))
        return ("tuple", id(value), len(value))
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    if isinstance(value, _CONTAINERS):  # built-in __len__: no user code runs
        return (type(value).__qualname__, id(value), len(value))
    return (type(value).__qualname__, id(value))


def _root_name(module: nn.Module) -> str:
    # __name__, not __qualname__: a class written inside its builder is
    # "build.<locals>.Net", and "Net.steps" is what a user recognises.
    return type(module).__name__


def snapshot(module: nn.Module) -> Snapshot:
    """The Python state of ``module`` and every submodule: ``{"Net.body.steps": stand-in}``
    for each instance attribute outside :data:`TORCH_SLOTS` (the root named by its class,
    submodules by their path). Cost: one dict walk per submodule, no tensor data read."""
    root = _root_name(module)
    out: Snapshot = {}
    for path, sub in module.named_modules():
        prefix = f"{root}.{path}" if path else root
        for key, value in vars(sub).items():
            if key not in TORCH_SLOTS:
                out[f"{prefix}.{key}"] = _describe(value)
    return out


def change(module: nn.Module, before: Snapshot) -> str | None:
    """``None`` when ``module``'s :func:`snapshot` equals ``before``, else the first
    attribute that changed, e.g. ``"Net.steps (0 → 1)"``, ``"Net.cache (added)"``."""
    after = snapshot(module)
    if after == before:
        return None
    for name in sorted(set(before) | set(after)):
        if name not in after:
            return f"{name} (removed)"
        if name not in before:
            return f"{name} (added)"
        if before[name] != after[name]:
            return f"{name}{_transition(before[name], after[name])}"
    return None  # unreachable: the dicts differ in a key or a value


def _transition(old: Any, new: Any) -> str:
    """`` (0 → 1)`` for two scalars; ``""`` where the stand-ins say nothing readable."""
    def show(d: Any) -> str | None:
        if d[0] == "float":
            return repr(float.fromhex(d[1]))
        if d[0] in ("NoneType", "bool", "int", "str", "bytes"):
            text = repr(d[1])
            return text if len(text) <= 20 else None
        return None

    a, b = show(old), show(new)
    return f" ({a} → {b})" if a is not None and b is not None else ""


Saved = list[tuple[nn.Module, dict[str, Any], dict[str, Any]]]


def save(module: nn.Module) -> Saved:
    """What :func:`restore` needs to put ``module``'s Python state back after a check's
    forward: each submodule's attributes outside :data:`TORCH_SLOTS` and a shallow copy of
    the contents of every mutable built-in container among them (a forward that appends
    to ``self.history`` changes the list in place: re-binding the attribute alone would
    leave the real instance one entry ahead of seq's). Cost: one dict copy per submodule
    plus the containers' lengths."""
    out: Saved = []
    for sub in module.modules():
        attrs = {k: v for k, v in vars(sub).items() if k not in TORCH_SLOTS}
        contents = {k: (dict(v) if isinstance(v, dict) else list(v))
                    for k, v in attrs.items()
                    if isinstance(v, _CONTAINERS) and not isinstance(v, frozenset)}
        out.append((sub, attrs, contents))
    return out


def restore(saved: Saved) -> None:
    """Put back what :func:`save` found: attributes re-bound to the saved objects (added
    ones removed), containers' contents restored in place (the same objects: anything else
    holding them sees the state it had)."""
    for sub, attrs, contents in saved:
        for key in [k for k in vars(sub) if k not in TORCH_SLOTS and k not in attrs]:
            del sub.__dict__[key]
        sub.__dict__.update(attrs)
        for key, items in contents.items():
            box = attrs[key]
            if isinstance(box, (list, bytearray)):
                box[:] = items
            elif isinstance(box, deque):
                box.clear()
                box.extend(items)
            else:  # dict, set: emptied and refilled
                box.clear()
                box.update(items)


def reason(what: str, member: int | None = None) -> str:
    """The eager reason for a change ``what`` (``"Net.steps (0 → 1)"``) found in a
    forward of ``member`` (its index in the bucket; None: a copy's, in the probe)."""
    who = "" if member is None else f" (member {member})"
    return (f"forward changes Python state: {what}{who}; a vectorised forward runs it once "
            "for all members")
