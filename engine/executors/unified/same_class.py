"""When two class objects count as one structure for stacking (``docs/fidelity.md``,
"Verification per bucket").

``torch.func.stack_module_state`` demands ``type(m) is type(members[0])``. A model class
written inside its builder (``def build(...): class Net(nn.Module): ...``, the style of
many plugins and of the project's test plugin) is a new class object at every call, so K
builds of one model never stacked and the bucket trained eagerly. Two such classes are the
same class statement run twice: :func:`class_difference` treats them as one structure when

* they have the same module, qualified name and metaclass, and bases that are the same
  structure (recursively);
* every attribute of the class body agrees: each function (methods, static/class methods,
  property accessors) has the **same code object** (one class statement compiles once;
  re-running it makes new function objects over the same code), equal defaults and equal
  closure values (``in_shape``, ``n_outputs``, a kwarg the builder closed over; the
  ``__class__`` cell of ``super()`` refers to the class itself and is compared as such);
  other values are equal (numbers, strings, containers element by element, tensors by
  value), or the same object.

Anything else (another object captured, a different value) is a difference, named. It is
only the admission to the stack: the existing checks (fingerprint, each member's own
forward on its real instance, the one-step probe) still decide whether the bucket stacks.

Torch-free but for tensors, compared by value when a closure holds one.
"""

from __future__ import annotations

from typing import Any

_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)
#: per-class slots Python creates for every class object (they differ by construction)
_SKIP = {"__dict__", "__weakref__", "__module__", "__qualname__"}


def class_difference(a: type, b: type) -> str | None:
    """``None`` when ``a`` and ``b`` are the same class or the same structure (module
    docstring), else what differs, e.g. ``"Net.__init__ captures in_shape = (1, 8, 8) vs
    (1, 4, 4)"``."""
    return _Compare().classes(a, b)


class _Compare:
    def __init__(self) -> None:
        #: pairs assumed equal while being compared (a method's ``__class__`` cell refers
        #: back to its own class)
        self.assumed: set[tuple[int, int]] = set()

    def classes(self, a: type, b: type) -> str | None:
        if a is b or (id(a), id(b)) in self.assumed:
            return None
        name = getattr(a, "__qualname__", repr(a))
        if (a.__module__, a.__qualname__) != (b.__module__, b.__qualname__):
            return f"class {a.__module__}.{name} vs {b.__module__}.{b.__qualname__}"
        if type(a) is not type(b):
            return f"{name}: metaclass {type(a).__qualname__} vs {type(b).__qualname__}"
        self.assumed.add((id(a), id(b)))
        if len(a.__bases__) != len(b.__bases__):
            return f"{name}: bases differ"
        for x, y in zip(a.__bases__, b.__bases__, strict=True):
            why = self.classes(x, y)
            if why is not None:
                return f"{name}: base {why}"
        da, db = vars(a), vars(b)
        if set(da) - _SKIP != set(db) - _SKIP:
            return f"{name}: attributes {sorted(set(da) ^ set(db))} differ"
        for key in sorted(set(da) - _SKIP):
            why = self.values(da[key], db[key], f"{name}.{key}")
            if why is not None:
                return why
        return None

    def values(self, x: Any, y: Any, where: str) -> str | None:
        if x is y:
            return None
        if type(x) is not type(y):
            return f"{where}: {type(x).__qualname__} vs {type(y).__qualname__}"
        if isinstance(x, type):
            return self.classes(x, y)
        if isinstance(x, (staticmethod, classmethod)):
            return self.values(x.__func__, y.__func__, where)
        if isinstance(x, property):
            for part in ("fget", "fset", "fdel"):
                why = self.values(getattr(x, part), getattr(y, part), where)
                if why is not None:
                    return why
            return None
        code = getattr(x, "__code__", None)
        if code is not None and hasattr(x, "__closure__"):
            return self.functions(x, y, where)
        if isinstance(x, _PRIMITIVES):
            return None if x == y else f"{where} = {x!r} vs {y!r}"
        if isinstance(x, (tuple, list)):
            if len(x) != len(y):
                return f"{where}: length {len(x)} vs {len(y)}"
            for i, (u, v) in enumerate(zip(x, y, strict=True)):
                why = self.values(u, v, f"{where}[{i}]")
                if why is not None:
                    return why
            return None
        if isinstance(x, dict):
            if list(x) != list(y):
                return f"{where}: keys differ"
            for k in x:
                why = self.values(x[k], y[k], f"{where}[{k!r}]")
                if why is not None:
                    return why
            return None
        if isinstance(x, (set, frozenset)):
            return None if x == y else f"{where}: {x!r} vs {y!r}"
        if type(x).__module__.startswith("torch") and type(x).__name__ in ("Tensor", "Size",
                                                                            "dtype", "device"):
            return _tensor_difference(x, y, where)
        # another object (a module, a generator, a file...): only the same one is safe
        return f"{where}: two different {type(x).__qualname__} objects"

    def functions(self, f: Any, g: Any, where: str) -> str | None:
        if f.__code__ is not g.__code__:
            return f"{where}: different code (not the same class statement)"
        for attr in ("__defaults__", "__kwdefaults__"):
            why = self.values(getattr(f, attr), getattr(g, attr), f"{where} {attr}")
            if why is not None:
                return why
        names = f.__code__.co_freevars
        for name, c1, c2 in zip(names, f.__closure__ or (), g.__closure__ or (), strict=True):
            (b1, u), (b2, v) = _cell(c1), _cell(c2)
            if b1 != b2:
                return f"{where}: {name} bound on one side only"
            why = self.values(u, v, f"{where} captures {name}")
            if why is not None:
                return why
        return None


def _cell(cell: Any) -> tuple[bool, Any]:
    try:
        return True, cell.cell_contents
    except ValueError:  # a variable not bound yet
        return False, None


def _tensor_difference(x: Any, y: Any, where: str) -> str | None:
    import torch

    if isinstance(x, torch.Tensor):
        same = (x.shape == y.shape and x.dtype == y.dtype and x.device == y.device
                and bool(torch.equal(x, y)))
        return None if same else f"{where}: tensors differ"
    return None if x == y else f"{where} = {x!r} vs {y!r}"
