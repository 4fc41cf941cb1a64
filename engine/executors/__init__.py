"""Executor registry: each concurrency strategy is declared once, by slug, with the flags
that the runner, the CSV and the figures ask about (instead of ``if executor == "ray"``).

Torch-free: the implementation class is named by ``target`` (``module:Class``) and imported
only inside the cell process.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from engine.registry import EXECUTORS


@dataclass(frozen=True)
class ExecutorSpec:
    """An executor's declaration.

    ``baseline``: the denominator of speedups (seq). ``supports_scheduler``: the matrix
    expands campaign schedulers for it (ray). ``concurrent``: jobs share the device at the
    same time, so per-job GPU energy/utilisation/VRAM cannot be separated (those job cells
    stay empty). ``options``: campaign keys under ``[options.<slug>]`` with their types
    (``fugue-tui run --option <slug>.<key>=<value>``); ``option_help``: one line per option,
    shown by ``fugue-tui run --help``.
    """

    name: str
    label: str
    color: str
    target: str
    baseline: bool = False
    supports_scheduler: bool = False
    concurrent: bool = False
    options: dict[str, tuple[type, ...]] = field(default_factory=dict)
    description: str = ""
    option_help: dict[str, str] = field(default_factory=dict)

    def load(self):
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)


def register_executor(spec: ExecutorSpec) -> ExecutorSpec:
    return EXECUTORS.add(spec)


register_executor(ExecutorSpec(
    name="seq", label="Sequential", color="#4C72B0", target="engine.executors.seq:SeqExecutor",
    baseline=True,
    description="one job after another in the cell's process: the denominator of speedups"))
