"""A campaign on a Ray cluster (issue 28): the head runner's side. Torch-free; the runner
imports this module only for a campaign with ``cluster`` (it is the one part of the runner
that is a Ray driver).

**Placement.** Each cell attempt is a :class:`engine.runner.agent.CellAgent` actor created
with the cell's resources: one GPU (``accelerator_type:<model>`` too with a ``gpu``
selector) or ``cpus_per_cell`` CPUs. Ray puts it on a node with room, so cells never
share a GPU or a CPU share, and the campaign runs as many cells at once as the fitting
nodes hold (its *lanes*: the runner's multi-device loop, :mod:`engine.runner.concurrent`,
with one lane per cell the cluster can hold; which node a cell got is recorded, never
decided ahead). Everything else is the one-host runner's: an attempt's spec, events, log
and rows land in the run folder as they would on one host (the agent sends them, this side
appends them through the same locked appends), the watchdog judges the cell by its
process-tree CPU on its node and its monitor's device samples, control and Ctrl-C stop it
through its agent.

**Keys.** The machine part of a cluster cell's key is the node's *class*: its host class
(CPU model and cores), GPU model and torch (:func:`machine_identity`), never a node's name.
Planning probes every node that fits a cell; nodes of more than one class are refused (a
speedup never divides times of two GPU models, or of two kinds of host), so ``--resume``
after a node change skips what already ran on an equivalent node.

**Faults.** A node lost mid-cell (its agent died with it) ends the attempt as killed with
that reason, and the cell runs again on another node that fits, without using a retry of
the campaign's budget (up to :data:`MAX_NODE_LOSSES` times per cell); a cell that no node
can hold any more fails at once with one line. A head runner that dies (even by SIGKILL)
takes its cells down: Ray ends the actors of a dead driver, and each cell dies with its
agent (parent-death signal; the agent's guard removes the rest). Its attempts keep their
``agent.json`` record in the run folder; the next runner (``--resume``) records them as
killed and runs their cells again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import Campaign
from engine.define.cluster import ClusterSettings
from engine.define.matrix import CellSpec, build_cells
from engine.errors import ConfigError
from engine.event_types import CellKilled, RunnerCleanup, RunnerKilled
from engine.events import EventWriter
from engine.processes import engine_env
from engine.runfolder import AttemptFolder, RunFolder
from engine.runner.agent import CellAgent, node_facts
from engine.runner.attempt import Attempt, Crew
from engine.runner.cluster_attempt import (
    FIT_CHECK_S,
    POLL_TIMEOUT_S,
    ClusterAttempt,
    NodeLost,
    RemoteCell,
    error_line,
)
from engine.runner.journal import Journal
from engine.runner.placement import Slot, place
from engine.runner.records import AGENT_RECORD, identity_key, read_record
from engine.runner.strategy import Placement

#: Times a cell is run again because its node was lost before the campaign's ``retries``
#: apply (a cell that keeps losing its node is likely what brings the nodes down).
MAX_NODE_LOSSES = 2
#: ``cluster = "local"``: the folder (in the run folder, one per runner pid) that holds the
#: local runtime's cleanup record and logs (engine.executors.ray.runtime): the runner's
#: guard, else the next runner, stops what of it survived the runner.
LOCAL_PREFIX = "cluster-local-"
#: What Ray publishes to the campaign's driver, in the run folder (ClusterHead, issue 49).
RAY_DRIVER_LOG = "ray-driver.log"


class ClusterHead:
    """The campaign's cluster: what a cell needs, the nodes that fit, their class."""

    def __init__(self, settings: ClusterSettings, campaign: Campaign):
        self.settings, self.campaign = settings, campaign
        self.where = str(campaign.source) if campaign.source else "campaign"
        self.on_cpu = campaign.device == "cpu"
        self.connected = False
        self._actor: Any = None
        #: ``cluster = "local"``: the runtime this runner started, and its folder.
        self.runtime: Any = None
        self.local_dir: Path | None = None
        #: Ray's own printer of what is published to the driver, while ours replaces it.
        self._printer: Any = None

    # -- what a cell needs ------------------------------------------------------------------
    def need(self) -> dict[str, float]:
        """The Ray resources one cell holds while it runs."""
        need: dict[str, float] = {}
        if self.settings.cpus_per_cell:
            need["CPU"] = float(self.settings.cpus_per_cell)
        if not self.on_cpu:
            need["GPU"] = 1.0
            if self.settings.gpu:
                need[f"accelerator_type:{self.settings.gpu}"] = 0.001
        return need

    def describe_need(self) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in self.need().items())

    def fits(self, resources: dict[str, float]) -> int:
        """How many cells a node with ``resources`` (totals) holds at once (0: none)."""
        counts = []
        for key, amount in self.need().items():
            have = float(resources.get(key, 0.0))
            if have < amount:
                return 0
            if not key.startswith("accelerator_type:"):  # a model marker (1 per node): not a count
                counts.append(int(have // amount))
        return min(counts) if counts else 1

    # -- connecting -------------------------------------------------------------------------
    def connect(self, run_dir: Path | None = None) -> None:
        """Join the cluster as a driver. ``local``: start a runtime on this host for the
        campaign, in ``run_dir`` (the project's private runtime, engine.executors.ray.runtime:
        tagged processes, a cleanup record the runner's guard runs if the runner dies),
        ended by :meth:`close`. Cells' code is found on each node through the engine's
        root (``code_search_path``; the local runtime's workers inherit ``PYTHONPATH``)."""
        if self.connected:
            return
        root = str(Path(engine_env()["PYTHONPATH"].split(os.pathsep)[0]))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # before ray.init: its listener prints from the moment it connects
        self._route_driver_messages(run_dir)
        try:
            if self.settings.local:
                from engine.executors.ray.runtime import start_runtime
                from engine.measure.provenance import nvml_devices

                if run_dir is None:
                    raise ValueError("a local cluster needs the campaign's run folder")
                os.environ["PYTHONPATH"] = engine_env()["PYTHONPATH"]  # its workers import cells
                # Ray's notices (e.g. that its token authentication is on) would be the front
                # ends' output; errors still show
                logging.getLogger("ray").setLevel(logging.ERROR)
                self.local_dir = Path(run_dir) / f"{LOCAL_PREFIX}{os.getpid()}"
                self.local_dir.mkdir(parents=True, exist_ok=True)
                self.runtime = start_runtime(attempt_dir=self.local_dir,
                                             num_cpus=float(os.cpu_count() or 1),
                                             num_gpus=float(len(nvml_devices())))
                self._record_local_processes()
            else:
                self._check_token()
                ray.init(address=self.settings.address, namespace=f"fugue-{self.campaign.name}",
                         log_to_driver=False, logging_level=logging.ERROR,
                         job_config=ray.job_config.JobConfig(code_search_path=[root]))
        except BaseException:
            self._restore_printer()
            raise
        self.connected = True

    def _check_token(self) -> None:
        """The user's token, in Ray's order (engine.executors.ray.auth), for the user's
        cluster: one line, before ``ray.init`` would retry for 20 s, when the cluster
        wants a token and none is found or refuses the one found.

        Raises:
            ConfigError: names the key, the address and ``ray get-auth-token``.
        """
        from engine.errors import FugueError
        from engine.executors.ray.auth import use_user_token

        try:
            refused = use_user_token(self.settings.address)
        except FugueError as exc:
            refused = str(exc).removeprefix("ray: ")
        if refused:
            raise ConfigError(f"{self.where}: key 'cluster': {refused}")

    def _route_driver_messages(self, run_dir: Path | None) -> None:
        """What Ray's processes publish to the drivers (a node's raylet that died: "Raylet
        is terminated ... Last 20 lines of the Raylet logs") goes to ``ray-driver.log`` in
        the run folder (while planning: nowhere), not to this runner's stdout, which is
        ``--batch``'s output: a lost node is the cell's killed/retried lines there. Ray
        prints them through one function of its driver (``print_to_stdstream``; with
        ``log_to_driver=False`` nothing else goes through it); a Ray without it is left as
        it is."""
        import ray._private.worker as ray_worker

        if not hasattr(ray_worker, "print_to_stdstream"):
            return
        path = Path(run_dir) / RAY_DRIVER_LOG if run_dir is not None else None

        def to_file(data: dict[str, Any], ignore_prefix: bool = False) -> None:
            if path is None:
                return
            with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as out:
                out.writelines(f"{line}\n" for line in data.get("lines") or [])

        self._printer = self._printer or ray_worker.print_to_stdstream
        ray_worker.print_to_stdstream = to_file

    def _record_local_processes(self) -> None:
        """Every process of the local runtime by pid and start time, while its raylet still
        names them (engine.runner.agent.stop_processes says why)."""
        import psutil

        from engine import cleanup
        from engine.executors.ray.runtime import find_ours

        if self.local_dir is None:
            raise ValueError("the local runtime has no folder")
        procs = []
        for proc in find_ours(self.runtime.temp_dir, self.runtime.tag):
            with contextlib.suppress(psutil.Error):
                procs.append((proc.pid, proc.create_time()))
        cleanup.record(self.local_dir, "processes", "engine.runner.agent:stop_processes",
                       processes=procs)

    def close(self) -> None:
        """Leave the cluster (``local``: stop its runtime and everything of it)."""
        if not self.connected:
            return
        self.connected = False
        try:
            if self.runtime is not None and self.local_dir is not None:
                from engine.executors.ray.runtime import shutdown

                shutdown(self.runtime, self.local_dir)
                from engine.cleanup import run_recorded

                run_recorded(self.local_dir)  # what outlived the shutdown: stopped, forgotten
                remove_local_folder(self.local_dir)  # each runner left one (issue 43)
                self.runtime = None
                return
            with contextlib.suppress(Exception):
                ray.shutdown()
        finally:
            self._restore_printer()  # after the shutdown: its listener has stopped

    def _restore_printer(self) -> None:
        if self._printer is not None:
            import ray._private.worker as ray_worker

            ray_worker.print_to_stdstream, self._printer = self._printer, None

    def nodes(self) -> list[dict[str, Any]]:
        """The alive nodes (Ray's records: ``NodeID``, ``NodeManagerHostname``, ``Resources``)."""
        return [n for n in ray.nodes() if n.get("Alive")]

    def fits_now(self) -> bool:
        """Whether an alive node could ever hold a cell (its total resources)."""
        return any(self.fits(n.get("Resources") or {}) for n in self.nodes())

    # -- planning ---------------------------------------------------------------------------
    def plan(self) -> tuple[dict[str, Any], int]:
        """The machine identity of the campaign's keys and its lanes (cells at once).

        Raises:
            ConfigError: no node has the ``gpu`` model; no node has a GPU (a GPU campaign);
                no node is big enough for one cell; the fitting nodes are of more than one
                class (one line each, naming the cluster and the key).
        """
        if self.settings.local:
            facts = node_facts()
            from engine.measure.provenance import nvml_devices

            gpus = nvml_devices()
            resources: dict[str, float] = {"CPU": float(os.cpu_count() or 1),
                                           "GPU": float(len(gpus))}
            for gpu in gpus:
                model = _model(str(gpu.get("name") or ""))
                resources[f"accelerator_type:{model}"] = 1.0
            nodes: list[dict[str, Any]] = [{"NodeID": "", "Resources": resources,
                                            "facts": facts}]
        else:
            self.connect()
            try:
                nodes = self.nodes()
                self._refuse_unfit(nodes)
                fitting = [n for n in nodes if self.fits(n.get("Resources") or {})]
                for node, facts in zip(fitting, self._probe(fitting), strict=True):
                    node["facts"] = facts
                nodes = fitting
            finally:
                self.close()
        self._refuse_unfit(nodes)
        fitting = [n for n in nodes if self.fits(n.get("Resources") or {})]
        classes: dict[str, dict[str, Any]] = {}
        for node in fitting:
            ident = self.machine_identity(node)
            classes.setdefault(identity_key(ident), ident)
        if len(classes) > 1:
            listed = "; ".join(f"{c['host']} {c['gpu_name']}".strip() for c in classes.values())
            raise ConfigError(f"{self.where}: key 'cluster': the nodes that fit a cell are of "
                              f"{len(classes)} classes ({listed}): times of different "
                              "classes are never compared, so one campaign runs on one "
                              "(select a GPU model with gpu = \"MODEL\", or run one "
                              "campaign per class)")
        lanes = sum(self.fits(n.get("Resources") or {}) for n in fitting)
        return next(iter(classes.values())), max(lanes, 1)

    def _refuse_unfit(self, nodes: list[dict[str, Any]]) -> None:
        address = self.settings.address
        if self.settings.gpu:
            key = f"accelerator_type:{self.settings.gpu}"
            if not any(key in (n.get("Resources") or {}) for n in nodes):
                models = sorted({k.split(":", 1)[1] for n in nodes
                                 for k in (n.get("Resources") or {})
                                 if k.startswith("accelerator_type:")})
                raise ConfigError(
                    f"{self.where}: key 'gpu': no node of cluster {address!r} has GPU model "
                    f"{self.settings.gpu!r} (Ray resource {key}); models there: "
                    f"{', '.join(models) if models else 'none'}")
        if not self.on_cpu and not any((n.get("Resources") or {}).get("GPU") for n in nodes):
            raise ConfigError(
                f"{self.where}: key 'cluster': no node of cluster {address!r} has a GPU "
                "(each cell of a GPU campaign holds one); for a CPU campaign set "
                "device = \"cpu\" and cpus_per_cell = N")
        if not any(self.fits(n.get("Resources") or {}) for n in nodes):
            biggest = max((n.get("Resources") or {}).get("CPU", 0) for n in nodes) if nodes else 0
            raise ConfigError(
                f"{self.where}: key 'cpus_per_cell': no node of cluster {address!r} can ever "
                f"hold a cell ({self.describe_need()}); the largest node has {biggest:g} CPUs")

    def _probe(self, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each node's own facts, from a zero-CPU task pinned to it."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        probe = ray.remote(num_cpus=0)(node_facts)
        refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote() for n in nodes]
        try:
            return ray.get(refs, timeout=120)
        except (RayError, GetTimeoutError) as exc:
            raise ConfigError(f"{self.where}: key 'cluster': a node of cluster "
                              f"{self.settings.address!r} did not answer the campaign's "
                              f"probe (is fugue-tui installed there?): {error_line(exc)}") from None

    def machine_identity(self, node: dict[str, Any]) -> dict[str, Any]:
        """The machine part of the keys of cells that run on ``node``: host class, GPU
        model and torch of the node (``cluster = "by-class"`` keeps these keys apart from
        any one-host campaign's); ``cpus_per_cell`` when a cell holds CPUs."""
        facts = node.get("facts") or {}
        gpu_name = ""
        if not self.on_cpu:
            names = sorted({g for g in facts.get("gpus") or [] if g})
            wanted = [g for g in names if not self.settings.gpu
                      or _model(g) == self.settings.gpu]
            types = sorted(k.split(":", 1)[1] for k in (node.get("Resources") or {})
                           if k.startswith("accelerator_type:"))
            gpu_name = (",".join(wanted) if wanted
                        else self.settings.gpu or ",".join(types))
        ident: dict[str, Any] = {"host": str(facts.get("host_class") or ""),
                 "device": "cpu" if self.on_cpu else "cuda", "gpu_uuid": "",
                 "gpu_name": gpu_name, "torch": str(facts.get("torch") or ""),
                 "cluster": "by-class"}
        if self.settings.cpus_per_cell:
            ident["cpus_per_cell"] = self.settings.cpus_per_cell
        return ident

    # -- agents -----------------------------------------------------------------------------
    def new_agent(self, runner_info: dict[str, Any]):
        """An agent actor holding one cell's resources, wherever Ray places it."""
        if self._actor is None:
            self._actor = ray.remote(CellAgent)
        need = self.need()
        return self._actor.options(
            num_cpus=need.get("CPU", 0.0), num_gpus=need.get("GPU", 0.0),
            resources={k: v for k, v in need.items() if k not in ("CPU", "GPU")} or None,
            max_restarts=0, max_concurrency=1).remote(runner_info)


class ClusterPlacement(Placement):
    """The placement strategy of a campaign with ``cluster`` (:mod:`engine.runner.strategy`):
    the nodes that fit a cell probed now (a ``gpu`` model no node has, a cell no node can
    hold, nodes of several classes: refused before anything is written), the key's machine
    part by node class, one lane per cell the fitting nodes hold at once, each attempt a
    :class:`ClusterAttempt` (its cell starts on its node: no zygote on the head).

    Raises:
        ConfigError: the cluster cannot run the campaign (one line, :meth:`ClusterHead.plan`).
    """

    zygote_allowed = False  # cells start on their nodes
    max_node_losses = MAX_NODE_LOSSES

    def __init__(self, campaign: Campaign, settings: ClusterSettings, plugins: list[str]):
        super().__init__(campaign)
        self.head = ClusterHead(settings, campaign)
        machine, lanes = self.head.plan()
        self.machine = {**machine, "plugins": plugins}
        self.device, self.gpu = ("cpu" if campaign.device == "cpu" else "cuda"), None
        self.cells = build_cells(campaign, self.machine)
        self.slots = [Slot(i, {}) for i in range(min(lanes, max(len(self.cells), 1)))]
        self.lane_of = place(self.cells, len(self.slots))

    def cell_spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder) -> CellRunSpec:
        """The spec on the head; the node's agent adds its node, GPU and threads."""
        campaign = self.campaign
        return self.spec(cell, attempt, folder,
                         device="cpu" if self.device == "cpu" else "cuda:0",
                         device_requested=campaign.device,
                         threads=campaign.threads or self.head.settings.cpus_per_cell or 1)

    def new_attempt(self, cell: CellSpec, number: int, folder: AttemptFolder,
                    crew: Crew) -> Attempt:
        return ClusterAttempt(cell, number, folder, self.cell_spec(cell, number, folder), crew,
                              partial(self.environment, slot=self.slot_of(cell)), self.head)

    def connect(self, run_dir: Path) -> None:
        self.head.connect(run_dir)

    def close(self) -> None:
        self.head.close()  # agents end with the driver; "local" stops here

    def clean_predecessors(self, folder: RunFolder, journal: Journal) -> None:
        orphaned_attempts(folder, journal)


def orphaned_attempts(folder: RunFolder, journal: Journal) -> None:
    """Attempts of an earlier runner of the campaign in ``folder`` that never ended (their
    ``agent.json`` is still there: that runner died while they ran): each recorded as
    killed, once, through ``journal``. Their cells went with their agents (the module
    docstring). Then what an earlier runner's ``local`` cluster left is stopped."""
    for attempt in folder.all_attempts():
        record_path = attempt.path / AGENT_RECORD
        try:
            record = read_record(record_path)
            spec = CellRunSpec.read(AttemptFolder(attempt.path).spec)
        except (OSError, ValueError, ConfigError):
            continue
        if record is None:
            continue
        reason = (f"runner pid {record.get('runner_pid')} ended while this attempt ran on "
                  f"node {record.get('node')}; its agent took the cell down (Ray ends the "
                  "actors of a runner that died, and the cell dies with its agent)")
        key = spec.cell.key
        EventWriter(spec.events, cell=key, attempt=spec.attempt).write(CellKilled(reason=reason))
        journal.ended(spec, RunnerKilled(cell=key, attempt=spec.attempt, reason=reason,
                                         predecessor=True))
        record_path.unlink(missing_ok=True)
    messages = clean_local_runtimes(folder.path)
    if messages:
        journal.emit(RunnerCleanup(messages=messages, predecessor=True))


def clean_local_runtimes(run_dir: Path) -> list[str]:
    """What earlier runners' ``local`` clusters left (their runner died before stopping
    them and no guard did it): each recorded runtime stopped; one line per thing done."""
    from engine.cleanup import run_recorded

    messages = []
    for folder in sorted(Path(run_dir).glob(f"{LOCAL_PREFIX}*")):
        if folder.name == f"{LOCAL_PREFIX}{os.getpid()}" or not folder.is_dir():
            continue
        if any((folder / "cleanup").glob("*.json")):
            messages += [f"{folder.name}: {m}" for m in run_recorded(folder)]
        if remove_local_folder(folder):
            messages.append(f"removed {folder.name} (an earlier runner's local cluster folder)")
    return messages


def remove_local_folder(folder: Path) -> bool:
    """Remove a ``local`` cluster's folder once nothing it records is left to stop (a
    record whose stop failed keeps it, for a later runner to try again); whether it went.
    Only the campaign's runner (it holds the campaign's lock) calls this, so the folder's
    runner is this one or a dead one."""
    if any((folder / "cleanup").glob("*.json")):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


def _model(name: str) -> str:
    """Ray's accelerator type for an NVML GPU name: ``NVIDIA L4`` → ``L4``,
    ``NVIDIA A100-SXM4-40GB`` → ``A100`` (the word Ray's ``accelerator_type`` uses)."""
    word = name.replace("NVIDIA", "").replace("Tesla", "").strip().split(" ")[0]
    return word.split("-")[0] or name


# What the head's side used to hold, at its old import path (engine.runner.cluster_attempt).
__all__ = ["AGENT_RECORD", "FIT_CHECK_S", "MAX_NODE_LOSSES", "POLL_TIMEOUT_S", "ClusterAttempt",
           "ClusterHead", "ClusterPlacement", "NodeLost", "RemoteCell", "clean_local_runtimes",
           "orphaned_attempts"]
