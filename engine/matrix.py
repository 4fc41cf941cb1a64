"""Campaign → ordered cells. Torch-free.

Order: passes outermost, then experiments (selection order), executors (campaign order),
compile modes. Passes outermost interleaves strategies in time, so slow drift of the
machine (thermals, background load) spreads over all of them instead of biasing one.
(Schedulers and sweep rungs join the product when the executors that declare them do.)

A cell's key is a hash of its resolved configuration (experiment definition, jobs,
executor and options, compile mode, seed, pass) plus the machine identity, so resume
matches exactly what was asked on this machine, never a look-alike string.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine.campaign import Campaign
from engine.workloads import expand


@dataclass(frozen=True)
class CellSpec:
    """One point of the matrix: one subprocess, one group row."""

    index: int
    exp_id: str
    executor: str
    compile_mode: str
    pass_index: int
    key: str
    experiment: dict[str, Any]
    jobs: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    scheduler: str | None = None
    rung: str | None = None

    @property
    def label(self) -> str:
        parts = [self.exp_id, self.executor]
        if self.compile_mode != "off":
            parts.append(f"compile={self.compile_mode}")
        return " ".join(parts) + f" pass {self.pass_index}"

    @property
    def slug(self) -> str:
        """A folder name: ``003-D_ens-seq-p1``."""
        comp = "" if self.compile_mode == "off" else f"-c{self.compile_mode}"
        return f"{self.index:03d}-{self.exp_id}-{self.executor}{comp}-p{self.pass_index}"


def cell_key(config: dict[str, Any], machine: dict[str, Any]) -> str:
    """16 hex digits of sha256 over canonical JSON of the configuration and machine."""
    blob = json.dumps({"config": config, "machine": machine}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_cells(campaign: Campaign, machine: dict[str, Any]) -> list[CellSpec]:
    """Expand ``campaign`` into its cells (see the module docstring for order and keys)."""
    assert campaign.catalogue is not None
    cells: list[CellSpec] = []
    for pass_index in range(1, campaign.passes + 1):
        for exp_id in campaign.experiments:
            exp = campaign.catalogue.get(exp_id)
            jobs = [job.to_dict() for job in expand(exp, campaign.seed)]
            for executor in campaign.executors:
                options = dict(campaign.options.get(executor, {}))
                for compile_mode in campaign.compile_modes():
                    config = {"experiment": exp.to_dict(), "jobs": jobs, "executor": executor,
                              "options": options, "compile_mode": compile_mode,
                              "seed": campaign.seed, "pass": pass_index,
                              "threads": campaign.threads}
                    cells.append(CellSpec(
                        index=len(cells) + 1, exp_id=exp_id, executor=executor,
                        compile_mode=compile_mode, pass_index=pass_index,
                        key=cell_key(config, machine), experiment=exp.to_dict(), jobs=jobs,
                        options=options))
    return cells
