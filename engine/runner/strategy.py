"""Where a campaign's cells run and how many at once: one placement strategy per mode.
Torch-free.

* :class:`OneDevice` — the campaign's ``device`` (one GPU by NVML identity, or the CPU);
  cells run one after another.
* :class:`SeveralDevices` — ``devices`` (issue 27): one lane per device, each cell pinned
  to the device its unit was placed on (:mod:`engine.runner.placement`) with its share of
  the host's cores; the lanes run at once (:mod:`engine.runner.concurrent`).
* :class:`engine.runner.cluster.ClusterPlacement` — ``cluster`` (issue 28): one lane per
  cell the fitting nodes hold at once, each attempt placed by Ray through its agent.

The runner picks its campaign's (:func:`engine.runner.supervisor.placement_for`).

A strategy resolves its devices when the runner is made (refusing what cannot run before
anything is written), forms the machine identity of the cell keys and the cells, builds
each attempt's :class:`~engine.cell.protocol.CellRunSpec` (the arguments every mode shares
written once in :meth:`Placement.spec`, each mode adding its own), makes its attempts, and
runs the queue its way (:meth:`Placement.run_cells`). The runner keeps what is common:
planning, resume, the zygote, the control inbox, the run files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import Campaign
from engine.define.matrix import CellSpec, HostShare, build_cells
from engine.errors import ConfigError
from engine.measure.nvml import resolve_gpu, resolve_gpus
from engine.measure.provenance import (
    machine_identity,
    model_identity,
    nvml_devices,
    resolve_device,
)
from engine.plugins import plugin_versions
from engine.runfolder import AttemptFolder, RunFolder
from engine.runner.attempt import Attempt, Crew
from engine.runner.board import Board
from engine.runner.cellproc import cell_env
from engine.runner.commands import Commands
from engine.runner.concurrent import Lanes, run_lanes
from engine.runner.journal import Journal
from engine.runner.outcome import CellOutcome
from engine.runner.placement import Slot, place, split_cores


class Placement:
    """The common protocol of the three modes (see the module docstring), and what they
    share. After ``__init__``: ``device`` (what the campaign runs on: ``cpu``, ``cuda``,
    ``cuda:N``), ``gpu`` (the NVML identity of the device under test; None on the CPU or a
    cluster), ``machine`` (the machine part of the cell keys), ``cells``, ``slots`` (one
    :class:`Slot` per lane; empty with one device) and ``lane_of`` (cell key → slot index).
    """

    #: Whether cells may start from the runner's zygote (not where they start on nodes).
    zygote_allowed = True
    #: Times a cell runs again, outside the campaign's retries, after losing its node.
    max_node_losses = 0

    device: str
    gpu: dict[str, Any] | None
    machine: dict[str, Any]
    cells: list[CellSpec]

    def __init__(self, campaign: Campaign):
        self.campaign = campaign
        self.where = str(campaign.source) if campaign.source else "campaign"
        self.slots: list[Slot] = []
        self.lane_of: dict[str, int] = {}

    # -- where a cell runs --------------------------------------------------------------------
    def slot_of(self, cell: CellSpec) -> Slot | None:
        """The lane ``cell`` runs in (None: one device)."""
        return self.slots[self.lane_of[cell.key]] if self.slots else None

    def gpu_for(self, uuid: str | None) -> Mapping[str, Any] | None:
        """The device an attempt's spec names by ``gpu_uuid`` (the campaign's own by
        default): the ``gpu_name`` of the rows the runner writes for it."""
        for slot in self.slots:  # the device this attempt was pinned to
            if slot.uuid and slot.uuid == uuid:
                return slot.gpu
        return self.gpu

    def environment(self, scratch: Path, slot: Slot | None = None) -> dict[str, str]:
        """The environment of this campaign's cells, with the compile caches in
        ``scratch``: the device under test (``slot``'s in a multi-device campaign) the only
        one CUDA sees, the thread counts (a slot's share of the cores when pinned)."""
        gpu = slot.gpu if slot is not None else self.gpu
        device_env = ({"CUDA_VISIBLE_DEVICES": gpu["uuid"],
                       "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if gpu else {})
        threads = self.campaign.threads or (len(slot.cpus) if slot is not None and slot.cpus
                                            else 0)
        return cell_env(scratch, threads, device_env)

    # -- the spec -----------------------------------------------------------------------------
    def cell_spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder) -> CellRunSpec:
        """The spec attempt ``attempt`` of ``cell`` starts with (in ``folder``)."""
        raise NotImplementedError

    def spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder, *, device: str,
             threads: int, device_requested: str | None = None, gpu_uuid: str | None = None,
             placement: str | None = None, cpus: list[int] | None = None) -> CellRunSpec:
        """The spec with what every mode writes the same way, and the mode's own device,
        threads and placement."""
        campaign = self.campaign
        return CellRunSpec(
            campaign_id=campaign.name, campaign_hash=campaign.file_hash,
            runs_dir=str(Path(campaign.runs_dir).resolve()), events=str(folder.events),
            attempt=attempt, reason_file=str(folder.reason), seed=campaign.seed,
            passes=campaign.passes, device=device, device_requested=device_requested,
            gpu_uuid=gpu_uuid, monitor=campaign.monitor,
            monitor_interval_s=campaign.monitor_interval_s, threads=threads,
            cell=cell, plugin_versions=plugin_versions() or None,
            experiments_file_hash=campaign.experiments_file_hash or None,
            placement=placement, cpus=cpus)

    # -- attempts and lanes -------------------------------------------------------------------
    def new_attempt(self, cell: CellSpec, number: int, folder: AttemptFolder,
                    crew: Crew) -> Attempt:
        """Attempt ``number`` of ``cell``, with its spec and its lane's environment."""
        return Attempt(cell, number, folder, self.cell_spec(cell, number, folder), crew,
                       partial(self.environment, slot=self.slot_of(cell)))

    def run_cells(self, board: Board, commands: Commands,
                  run_cell: Callable[[CellSpec], CellOutcome],
                  warm_up: Callable[[], None]) -> None:
        """Run the cells queued on ``board`` (``run_cell``: all attempts of one cell, its
        outcome); ``warm_up`` once before the first cell starts (the zygote). One lane:
        one cell after another, the commands applied between them; several: at once.

        Raises:
            KeyboardInterrupt, Aborted, OutputError: as the runner's loop (the running
                cells stopped and recorded first).
        """
        if len(self.slots) > 1:
            if board.queue:
                warm_up()
            run_lanes(Lanes(self.slots, self.lane_of, board, commands, run_cell,
                            one_at_a_time=self.campaign.one_cell_per_host))
            return
        warm = True
        while board.queue:
            commands.between_cells()
            if not board.queue:
                break
            cell = board.queue.popleft()
            if warm:  # once, before the first cell is decided on
                warm = False
                warm_up()
            board.outcomes[cell.key] = run_cell(cell)

    # -- the run's bounds ---------------------------------------------------------------------
    def connect(self, run_dir: Path) -> None:
        """Before the campaign's first write: join what runs the cells (a cluster)."""

    def close(self) -> None:
        """After the campaign: leave it again."""

    def clean_predecessors(self, folder: RunFolder, journal: Journal) -> None:
        """Record what earlier runners of the campaign left running in this mode's own way
        (the runner cleans up local attempts itself)."""

    def devices(self) -> list[str]:
        """Each lane as the ``placement`` column names it (the ``campaign_started`` event's
        ``devices``); empty with one device."""
        return [s.describe(len(self.slots)) for s in self.slots]


class OneDevice(Placement):
    """The campaign's ``device``: the device under test by NVML identity, every cell pinned
    to it (``CUDA_VISIBLE_DEVICES=<uuid>``: ``cuda:0`` inside the cell), one at a time.
    ``device``: the ``cuda:N`` a one-element ``devices`` resolved to
    (:func:`one_device_index`), planned and keyed as that ``device`` written.

    Raises:
        ConfigError: a CUDA device where NVML finds none, a device NVML cannot resolve.
    """

    def __init__(self, campaign: Campaign, plugins: list[str], device: str | None = None):
        super().__init__(campaign)
        self.device = device or resolve_device(campaign.device)
        # the campaign file named (its key 'device', or --device over it), as 'devices' is
        said = (f"devices {list(campaign.devices)!r} (= {device})" if device
                else f"device '{campaign.device}'")
        where = f"{campaign.source}: {said}" if campaign.source else said
        if self.device.startswith("cuda") and not nvml_devices():
            raise ConfigError(f"{where}: no NVIDIA GPU is visible here "
                              "(NVML finds none); use device = \"cpu\" or \"auto\"")
        # The device under test by NVML identity: every cell sees exactly this device
        # (CUDA_VISIBLE_DEVICES=<uuid>), and its monitor opens the same one by UUID.
        try:
            self.gpu = resolve_gpu(self.device, os.environ)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        self.machine = {**machine_identity(self.device, self.gpu), "plugins": plugins}
        self.cells = build_cells(campaign, self.machine)

    def cell_spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder) -> CellRunSpec:
        """Pinned to the device under test by UUID (inside the cell it is ``cuda:0``).
        ``FUGUE_CELLS_ON_CPU=1`` trains on the CPU with the device still resolved, pinned
        and monitored, as in a multi-device campaign (:meth:`SeveralDevices.cell_spec`)."""
        gpu = self.gpu
        on_cpu = cells_on_cpu()
        # Inside the cell the device under test is the only visible one: cuda:0.
        return self.spec(cell, attempt, folder,
                         device="cpu" if on_cpu else "cuda:0" if gpu else self.device,
                         device_requested="cpu" if on_cpu else self.device,
                         gpu_uuid=gpu["uuid"] if gpu else None,
                         threads=self.campaign.threads or os.cpu_count() or 1)


def cells_on_cpu() -> bool:
    """The test hook ``FUGUE_CELLS_ON_CPU=1``: cells train on the CPU while the runner plans,
    pins and monitors their devices as usual (README, "Several devices at once"); read when
    each attempt's spec is made, whichever placement made it."""
    return os.environ.get("FUGUE_CELLS_ON_CPU") == "1"


def one_device_index(campaign: Campaign) -> str | None:
    """The ``cuda:N`` a one-element ``devices`` is (issue 46: one device, one key): the
    entry resolved through NVML (a ``GPU-``/``MIG-`` UUID or unique prefix; ``cuda:N`` was
    folded into ``device`` when the campaign was read), then the index N whose ``cuda:N``
    this process resolves to the same UUID (NVML's index N, or entry N of an outer
    ``CUDA_VISIBLE_DEVICES``). None: ``auto``, several devices, or a MIG slice that no
    ``cuda:N`` names (NVML's indices are whole cards: only an outer
    ``CUDA_VISIBLE_DEVICES`` listing the slice gives it one) — a multi-device campaign.

    Raises:
        ConfigError: the entry names no device here (or several), as for any ``devices``.
    """
    if len(campaign.devices) != 1 or campaign.devices[0] in ("auto", "cpu"):
        return None
    where = str(campaign.source) if campaign.source else "campaign"
    try:
        (found,) = resolve_gpus(campaign.devices, os.environ)
    except ValueError as exc:
        raise ConfigError(f"{where}: key 'devices': {exc}") from None
    index = 0
    while True:
        try:
            gpu = resolve_gpu(f"cuda:{index}", os.environ)
        except ValueError:  # past the last device this process sees
            return None
        if gpu is None:
            return None
        if gpu["uuid"] == found["uuid"]:
            return f"cuda:{index}"
        index += 1


class SeveralDevices(Placement):
    """``devices``: every device resolved now (a UUID that does not exist, two entries
    naming one device, devices of two GPU models: refused before anything is written), one
    :class:`Slot` per device with its share of the host's cores, the machine identity of
    the key by GPU *model* (host and model, never the UUID: a resume on other devices of
    the same model skips what already ran).

    Raises:
        ConfigError: the key ``devices`` names what cannot run together (one line).
    """

    def __init__(self, campaign: Campaign, plugins: list[str]):
        super().__init__(campaign)
        try:
            gpus = resolve_gpus(campaign.devices, os.environ)
        except ValueError as exc:
            raise ConfigError(f"{self.where}: key 'devices': {exc}") from None
        cores = split_cores(len(gpus))
        self.slots = [Slot(i, gpu, cores[i] if len(gpus) > 1 else ())
                      for i, gpu in enumerate(gpus)]
        self.device, self.gpu = "cuda", gpus[0]
        self.machine = {**model_identity(gpus[0]), "plugins": plugins}
        # max_parallel = "auto" budgets one cell's share of the host (its slot's cores; the
        # smallest share, so a cell's key never depends on which device it was placed on)
        pinned = {cpu for slot in self.slots for cpu in slot.cpus}
        share = HostShare(cores=max(1, len(pinned) // len(self.slots)) if pinned
                          else (os.cpu_count() or 1), devices=len(self.slots),
                          gpu_uuid=self.slots[0].uuid)
        self.cells = build_cells(campaign, self.machine, share)
        self.lane_of = place(self.cells, len(self.slots))

    def cell_spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder) -> CellRunSpec:
        """Pinned to its slot's device by UUID (inside the cell it is ``cuda:0``), its share
        of the host's cores, its placement named. ``FUGUE_CELLS_ON_CPU=1`` trains on the CPU
        while the runner plans, pins and monitors the devices as usual: a check of
        placement and pinning on a host whose GPUs must stay free (the rows' ``device``
        then says ``cpu``)."""
        slot = self.slots[self.lane_of[cell.key]]
        on_cpu = cells_on_cpu()
        return self.spec(
            cell, attempt, folder, device="cpu" if on_cpu else "cuda:0",
            device_requested="cpu" if on_cpu else str(slot.gpu.get("entry") or "cuda"),
            gpu_uuid=slot.uuid,
            threads=self.campaign.threads or len(slot.cpus) or os.cpu_count() or 1,
            placement=slot.describe(len(self.slots)), cpus=list(slot.cpus) or None)

