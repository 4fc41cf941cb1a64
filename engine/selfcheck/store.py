"""The self-check's verdicts on disk: ``<runs_dir>/selfcheck.csv``, one row per run,
beside the profiles (``<runs_dir>/profiles.csv``, ``engine.profile.store``) and keyed by
the same machine identity (host, device, GPU name and UUID, torch, CUDA build).

A verdict describes one machine and software stack, as a profile does: it travels with
the runs folder, and :func:`latest` reads back only the rows of the identity asked for
(the last one wins). Written with the results' locked, atomic CSV append
(``engine.results.store.append_rows``); the whole JSON document is kept in ``document``.

Torch-free: the dashboard reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.profile.store import IDENTITY
from engine.runfolder import SELFCHECK_FILE
from engine.selfcheck.verdict import VERDICTS, key

#: name → meaning, in file order (append-only: a new column goes at the end).
COLUMNS: dict[str, str] = {
    "timestamp": "when the self-check ended, YYYYmmdd_HHMMSS (UTC)",
    "host": "identity: host name",
    "device": "identity: cpu or cuda",
    "gpu_name": "identity: NVML name of the device (empty on CPU)",
    "gpu_uuid": "identity: NVML UUID of the device (empty on CPU)",
    "torch": "identity: torch distribution version",
    "cuda": "identity: the CUDA version torch was built for (empty: a CPU build)",
    "bit_for_bit": "paths bit for bit",
    "within_bound": "paths within their documented bound (not bit for bit)",
    "outside_bound": "paths outside their bound: defects",
    "exit_status": "0 every path at or inside its bound, 1 otherwise",
    "elapsed_s": "wall time of the self-check, s",
    "cpu_model": "CPU model name",
    "isa": "the ISA ATen dispatched to (torch.backends.cpu.get_cpu_capability)",
    "dispatch": "kernel-dispatch variables set (MKL_CBWR, ATEN_CPU_CAPABILITY ...); empty: "
                "the default dispatch",
    "document": "the whole verdict, JSON (fugue-tui selfcheck --json without its schema keys)",
}


def selfcheck_path(runs_dir: str | os.PathLike[str]) -> Path:
    return Path(runs_dir) / SELFCHECK_FILE


def row(body: dict[str, Any], ident: dict[str, str], timestamp: str) -> dict[str, Any]:
    """The CSV row of a self-check's document ``body`` run on identity ``ident``
    (``engine.profile.store.identity``)."""
    facts = body.get("machine") or {}
    counted = body.get("counts") or {}
    return {"timestamp": timestamp, **{k: ident[k] for k in IDENTITY},
            **{key(v): counted.get(key(v), 0) for v in VERDICTS},
            "exit_status": body.get("exit_status"), "elapsed_s": body.get("elapsed_s"),
            "cpu_model": facts.get("cpu_model") or "", "isa": facts.get("isa") or "",
            "dispatch": facts.get("dispatch") or "",
            "document": json.dumps(body, sort_keys=True, separators=(",", ":"),
                                   allow_nan=False)}


def append(runs_dir: str | os.PathLike[str], body: dict[str, Any], ident: dict[str, str],
           timestamp: str) -> list[str]:
    """Append one verdict (locked, atomic). Returns the lines the user must be told (a
    repaired or upgraded file)."""
    from engine.results.store import append_rows

    return append_rows(selfcheck_path(runs_dir), [row(body, ident, timestamp)], list(COLUMNS))


@dataclass(frozen=True)
class Verdict:
    """One stored verdict: its row, with the counts parsed."""

    row: dict[str, str]

    @property
    def timestamp(self) -> str:
        return self.row.get("timestamp", "")

    @property
    def identity(self) -> dict[str, str]:
        return {k: self.row.get(k, "") for k in IDENTITY}

    def count(self, verdict: str) -> int | None:
        text = self.row.get(key(verdict), "")
        return int(text) if text.isdigit() else None

    @property
    def ok(self) -> bool:
        return self.row.get("exit_status") == "0"

    def document(self) -> dict[str, Any] | None:
        try:
            doc = json.loads(self.row.get("document") or "")
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None


def read(runs_dir: str | os.PathLike[str]) -> list[Verdict]:
    """Every stored verdict in file order ([] without the file)."""
    from engine.results.read import read_rows

    path = selfcheck_path(runs_dir)
    if not path.is_file():
        return []
    return [Verdict(r) for r in read_rows(path)]


def latest(runs_dir: str | os.PathLike[str], ident: dict[str, str],
           fields: tuple[str, ...] = IDENTITY) -> Verdict | None:
    """The last verdict of this machine: the latest row whose ``fields`` of the identity
    equal ``ident``'s (all of them by default; the dashboard asks for host, torch and
    CUDA build, any device), or None."""
    mine = [v for v in read(runs_dir) if all(v.identity[f] == ident.get(f, "") for f in fields)]
    return max(mine, key=lambda v: v.timestamp) if mine else None
