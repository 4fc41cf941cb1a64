"""Parity probes: what the parity-sensitive tests compare, recorded for the kernel-dispatch
matrix (``scripts/parity-matrix``).

A test takes the ``parity`` fixture (tests/conftest.py; it marks the test ``parity``) and
compares through it:

* :meth:`Parity.same` — bit for bit, for a path that is so *by construction*
  (engine.executors.unified.contract);
* :meth:`Parity.within` — ``max|got - want| <= bound * max|want|``, for a path that agrees
  only where the BLAS picks matching kernels;
* :meth:`Parity.record` — a value the test computed, recorded without a comparison.

Each call records a digest of the values compared and, for ``within``, the relative
difference seen and its bound. With ``FUGUE_PARITY_RECORD=<file>`` set, the session writes
every record to that JSON file; the matrix runs the marked tests under several
kernel-dispatch settings and compares the digests with the default run's: a setting that
changes no digest tests nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import torch

# One definition of "the difference" for the parity tests and ``fugue-tui selfcheck``.
from engine.selfcheck.run import relative_diff  # noqa: F401 - re-exported for the tests


def digest(*values: Any) -> str:
    """sha256 (16 hex digits) of the values' bits: tensors by their bytes (dtype and shape
    included), numbers by ``repr``, sequences and dicts element by element."""
    h = hashlib.sha256()

    def feed(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(v, dict):
            for k in sorted(v):
                h.update(repr(k).encode())
                feed(v[k])
        elif isinstance(v, (list, tuple)):
            h.update(b"[")
            for x in v:
                feed(x)
            h.update(b"]")
        else:
            h.update(repr(v).encode())

    for v in values:
        feed(v)
    return h.hexdigest()[:16]


class Parity:
    """The probes of one test (``nodeid``), appended to the session's ``records``."""

    def __init__(self, nodeid: str, records: list[dict[str, Any]]):
        self.nodeid = nodeid
        self.records = records
        self._seen: dict[str, int] = {}

    def _key(self, name: str) -> str:
        n = self._seen.get(name, 0)
        self._seen[name] = n + 1
        return f"{self.nodeid}::{name}" + (f"#{n}" if n else "")

    def record(self, name: str, *values: Any) -> None:
        """Record values computed on a parity path, compared by nothing here."""
        self.records.append({"key": self._key(name), "digest": digest(*values)})

    def same(self, name: str, got: Any, want: Any) -> None:
        """Assert bit for bit (tensors by ``torch.equal``, anything else by ``==``)."""
        if isinstance(got, torch.Tensor):
            ok = isinstance(want, torch.Tensor) and torch.equal(got, want)
            diff = 0.0 if ok else (relative_diff(got, want) if isinstance(want, torch.Tensor)
                                   else math.inf)
        else:
            ok = got == want
            diff = 0.0 if ok else math.inf
        self.records.append({"key": self._key(name), "digest": digest(got),
                             "diff": diff, "bound": 0.0})
        assert ok, f"{name}: not bit for bit (relative difference {diff:.3g})"

    def within(self, name: str, got: torch.Tensor, want: torch.Tensor, bound: float,
               absolute: bool = False, scale: float | None = None,
               kind: str = "rounding") -> float:
        """Assert ``max|got - want| <= bound * scale`` (``absolute``: ``<= bound``);
        returns the difference seen (relative, or absolute).

        ``scale`` defaults to ``max|want|``. Give the model-wide magnitude (:func:`scale_of`)
        for gradients and optimizer state: a gradient that is zero in exact arithmetic (a
        bias before BatchNorm) is rounding noise, and against its own magnitude any two
        summation orders differ by ~100 %.

        ``kind``: where the bound comes from — ``"rounding"``, ``"pass"`` or ``"adam"``
        (the contract's ``rounding_bound`` / ``pass_bound`` / ``adam_bound``, which must
        keep 10x headroom over what any matrix setting shows), ``"half"`` (a half precision's table bound) or ``"tolerance"`` (a test's
        own tolerance, e.g. the float64 training-logic checks)."""
        if absolute:
            d = float((got.detach().double() - want.detach().double()).abs().max())
            d = math.inf if math.isnan(d) else d
        else:
            d = relative_diff(got, want, scale)
        self.records.append({"key": self._key(name), "digest": digest(got),
                             "diff": d, "bound": bound, "kind": kind})
        assert d <= bound, f"{name}: difference {d:.3g} above its bound {bound:.3g}"
        return d


def scale_of(tensors: Any) -> float:
    """The largest magnitude over several tensors (a model's gradients, its optimizer
    state): the scale of a normwise comparison over the whole vector."""
    values = tensors.values() if isinstance(tensors, dict) else tensors
    return max((float(t.detach().double().abs().max()) for t in values if t.numel()),
               default=0.0)


def write(records: list[dict[str, Any]], path: str | Path) -> None:
    """Write the session's records as ``{key: record}`` JSON (atomically: a temporary
    file then a rename)."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps({r["key"]: r for r in records}, indent=1, sort_keys=True))
    tmp.replace(target)
