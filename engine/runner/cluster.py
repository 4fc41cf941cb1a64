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
import csv
import io
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from engine.errors import ConfigError
from engine.events import EventTail, EventWriter
from engine.processes import engine_env
from engine.results.columns import header
from engine.results.store import append_rows
from engine.runfolder import AttemptFolder
from engine.runner.agent import CellAgent, node_facts
from engine.runner.attempt import INTERRUPTED_BY, POLL_S, Aborted, Attempt
from engine.runner.cellproc import write_whole
from engine.runner.watchdog import Watchdog

if TYPE_CHECKING:
    from engine.define.campaign import Campaign
    from engine.define.cluster import ClusterSettings
    from engine.runner.supervisor import Runner

#: Times a cell is run again because its node was lost before the campaign's ``retries``
#: apply (a cell that keeps losing its node is likely what brings the nodes down).
MAX_NODE_LOSSES = 2
#: The record an attempt of a cluster cell keeps in its attempt folder while it runs.
AGENT_RECORD = "agent.json"
#: Seconds one poll of an agent may take before its node counts as unresponsive.
POLL_TIMEOUT_S = 60.0
#: Seconds between two looks, while a cell waits for room, at whether any node still fits.
FIT_CHECK_S = 2.0
#: ``cluster = "local"``: the folder (in the run folder, one per runner pid) that holds the
#: local runtime's cleanup record and logs (engine.executors.ray.runtime): the runner's
#: guard, else the next runner, stops what of it survived the runner.
LOCAL_PREFIX = "cluster-local-"


class NodeLost(Exception):
    """The agent of a running attempt died with (or lost) its node."""


class ClusterHead:
    """The campaign's cluster: what a cell needs, the nodes that fit, their class."""

    def __init__(self, settings: ClusterSettings, campaign: Campaign):
        self.settings, self.campaign = settings, campaign
        self.where = str(campaign.source) if campaign.source else "campaign"
        self.on_cpu = campaign.device == "cpu"
        self.connected = False
        self._actor = None
        #: ``cluster = "local"``: the runtime this runner started, and its folder.
        self.runtime = None
        self.local_dir: Path | None = None

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
            ray.init(address=self.settings.address, namespace=f"fugue-{self.campaign.name}",
                     log_to_driver=False, logging_level=logging.ERROR,
                     job_config=ray.job_config.JobConfig(code_search_path=[root]))
        self.connected = True

    def _record_local_processes(self) -> None:
        """Every process of the local runtime by pid and start time, while its raylet still
        names them (engine.runner.agent.stop_processes says why)."""
        import psutil

        from engine import cleanup
        from engine.executors.ray.runtime import find_ours

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
        if self.runtime is not None and self.local_dir is not None:
            from engine.executors.ray.runtime import shutdown

            shutdown(self.runtime, self.local_dir)
            from engine.cleanup import run_recorded

            run_recorded(self.local_dir)  # what outlived the shutdown: stopped and forgotten
            self.runtime = None
            return
        with contextlib.suppress(Exception):
            ray.shutdown()

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
            nodes = [{"NodeID": "", "Resources": resources, "facts": facts}]
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
        classes = {}
        for node in fitting:
            ident = self.machine_identity(node)
            classes.setdefault(json.dumps(ident, sort_keys=True), ident)
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
                              f"probe (is fugue-tui installed there?): {_line(exc)}") from None

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
        ident = {"host": str(facts.get("host_class") or ""),
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


class RemoteCell:
    """A cell running on a node, seen from the head like a local cell process (what
    :meth:`Attempt._supervise` polls): :meth:`poll` fetches what the agent collected,
    writes it into the run folder, and returns the exit code once the cell ended."""

    def __init__(self, attempt: ClusterAttempt, agent, pid: int, node: str):
        self.attempt, self.agent, self.pid, self.node = attempt, agent, pid, node
        self.returncode: int | None = None
        self.cpu_s = 0.0
        self._headers: dict[str, list[str]] = {}

    def _call(self, method: str, *args):
        try:
            return ray.get(getattr(self.agent, method).remote(*args), timeout=POLL_TIMEOUT_S)
        except RayActorError as exc:
            raise NodeLost(_line(exc)) from None
        except GetTimeoutError:
            raise NodeLost(f"its agent did not answer for {POLL_TIMEOUT_S:g} s") from None

    def poll(self) -> int | None:
        data = self._call("poll")
        self.apply(data)
        if data["cpu_s"] is not None:
            self.cpu_s = float(data["cpu_s"])
        if data["exit"] is not None:
            self.returncode = int(data["exit"])
        return self.returncode

    def apply(self, data: dict[str, Any]) -> None:
        """Rows first (the cell's ``group_written`` event may be in the same batch), then
        events and log, then (at the end) the files the cell wrote whole."""
        attempt = self.attempt
        runner = attempt.runner
        for name, text in (data.get("rows") or {}).items():
            rows = self._rows(name, text)
            if rows:
                with runner._lock:
                    repaired = append_rows(runner.runs_dir / name, rows, header(name))
                for line in repaired:
                    runner._emit("warning", message=line, cell=attempt.cell.key,
                                 attempt=attempt.number)
        if data.get("events"):
            with open(attempt.spec["events"], "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in data["events"]))
        if data.get("log"):
            with open(attempt.log_path, "a", encoding="utf-8") as fh:
                fh.write(data["log"])
        _write_under(runner.runs_dir, data.get("files") or {})
        _write_under(attempt.dir, data.get("attempt_files") or {})

    def fetch_attempt_files(self) -> None:
        """The attempt folder's files from the node now (before a killed cell's row is
        written: its monitor's device facts)."""
        _write_under(self.attempt.dir, self._call("attempt_files"))

    def _rows(self, name: str, text: str) -> list[dict[str, str]]:
        """Complete CSV lines of results file ``name`` as rows (the first batch of a file
        starts with its header: the cell created the file on the node)."""
        reader = csv.reader(io.StringIO(text))
        lines = list(reader)
        if name not in self._headers and lines:
            self._headers[name] = lines.pop(0)
        cols = self._headers.get(name) or []
        known = set(header(name))
        return [{k: v for k, v in zip(cols, line, strict=False) if k in known}
                for line in lines if line]

    def stop(self, dump: bool) -> dict[str, Any]:
        return self._call("stop", dump)

    def finish(self) -> dict[str, Any]:
        data = self._call("finish")
        self.apply(data)
        return data

    def dispose(self) -> None:
        """Nothing of the attempt stays on its node; the actor (and its resources) go."""
        with contextlib.suppress(Exception):
            ray.get(self.agent.dispose.remote(), timeout=10)
        with contextlib.suppress(Exception):
            ray.kill(self.agent)


class ClusterAttempt(Attempt):
    """One attempt of a cell on a cluster node: :class:`Attempt`'s lifecycle, with the cell
    started and stopped by its agent (see the module docstring)."""

    def run(self) -> tuple[str, str, Path, str]:
        runner, cell, number = self.runner, self.cell, self.number
        self._prepare_head()
        placed = self._place()
        if isinstance(placed, tuple):  # never started: failed (no node) or stopped
            self._forget()
            return placed
        proc = placed
        tail = EventTail(self.spec["events"])
        runner.attempt_started(self)
        watchdog = self._watchdog(proc)
        try:
            runner._emit("cell_started", cell=cell.key, index=cell.index, label=cell.label,
                         attempt=number, events=self.spec["events"],
                         log_path=str(self.log_path), pid=proc.pid, start="spawn",
                         start_s=round(time.perf_counter() - self.decided, 4), node=proc.node)
            written, verdict, after = self._supervise(proc, tail, watchdog)
        except NodeLost as lost:
            return self._lost(proc, tail, str(lost))
        except KeyboardInterrupt:
            with contextlib.suppress(NodeLost):
                self.stop(proc, f"interrupted ({INTERRUPTED_BY[0]})", dump=False)
                proc.finish()
            self.forward(tail, None)
            proc.dispose()
            self._forget()
            raise
        except BaseException:
            proc.dispose()
            self._forget()
            raise
        try:
            final = proc.finish()
        except NodeLost as lost:
            if verdict is None:
                return self._lost(proc, tail, str(lost))
            final = {}
        written |= self.forward(tail, None)
        proc.dispose()
        self._forget()
        if final.get("cleanup"):
            runner._emit("cleanup", cell=cell.key, attempt=number, messages=final["cleanup"])
        if after == "abort":
            raise Aborted()
        if verdict is not None:
            return "killed", verdict, self.log_path, after
        return self._exited(proc.returncode or 0, written, final.get("reason") or "",
                            final.get("leftovers") or [])

    # -- steps ------------------------------------------------------------------------------
    def _prepare_head(self) -> None:
        """The attempt's folder on the head with its spec (what ``--resume`` and the rows the
        head writes read) and an empty log and events file the agent's batches extend."""
        self.dir.mkdir(parents=True)
        write_whole(self.folder.spec, json.dumps(self.spec, indent=1))
        self.log_path.touch()
        Path(self.spec["events"]).touch()

    def _place(self) -> RemoteCell | tuple[str, str, Path, str]:
        """Create the agent, wait until Ray placed it (commands for the waiting cell apply;
        a cell that no alive node can hold any more fails at once), start the cell."""
        runner, head = self.runner, self.runner.cluster
        agent = head.new_agent({"pid": os.getpid(), "host": socket.gethostname(),
                                "campaign": runner.campaign_id})
        hello = agent.hello.remote()
        next_fit = time.monotonic() + FIT_CHECK_S
        while True:
            ready, _ = ray.wait([hello], timeout=POLL_S * 2)
            if ready:
                break
            command = runner._handle_commands(running=self.cell)
            if command:
                ray.kill(agent)
                if command[0] == "abort":
                    raise Aborted()
                runner._record(self.spec, "killed", command[1])
                runner._emit("killed", cell=self.cell.key, attempt=self.number,
                             reason=command[1], exit_code=None)
                return "killed", command[1], self.log_path, command[0]
            if time.monotonic() >= next_fit:
                next_fit = time.monotonic() + FIT_CHECK_S
                if not head.fits_now():
                    ray.kill(agent)
                    error = (f"no node of cluster {head.settings.address!r} can hold this cell "
                             f"any more ({head.describe_need()}): the nodes that could are gone")
                    runner._record(self.spec, "failed", error)
                    runner._emit("failed", cell=self.cell.key, attempt=self.number,
                                 exit_code=None, error=error)
                    return "failed", error, self.log_path, "stop"
        try:
            facts = {}
            facts = ray.get(hello)
            threads = (runner.campaign.threads or head.settings.cpus_per_cell
                       or max(1, int(facts.get("cores") or 1)))
            self.spec["threads"] = threads
            rel = str(self.dir.relative_to(runner.runs_dir))
            started = ray.get(agent.start.remote(self.spec, threads, rel),
                              timeout=POLL_TIMEOUT_S)
        except (RayActorError, GetTimeoutError) as exc:
            with contextlib.suppress(Exception):
                ray.kill(agent)
            reason = f"node lost before the cell started: {_line(exc)}"
            runner._record(self.spec, "killed", reason)
            runner._emit("killed", cell=self.cell.key, attempt=self.number, reason=reason,
                         exit_code=None)
            return "killed", reason, self.log_path, "node"
        except RayError as exc:  # the agent could not start the cell there (its error)
            with contextlib.suppress(Exception):
                ray.kill(agent)
            error = f"the agent on node {facts.get('node')} could not start the cell: {_line(exc)}"
            runner._record(self.spec, "failed", error)
            runner._emit("failed", cell=self.cell.key, attempt=self.number, exit_code=None,
                         error=error)
            return "failed", error, self.log_path, ""
        on_node = started["spec"]
        # What the head records for this attempt names the node, its GPU and its threads.
        for key in ("node", "gpu_uuid", "device", "threads"):
            if on_node.get(key) is not None:
                self.spec[key] = on_node[key]
        write_whole(self.folder.spec, json.dumps(self.spec, indent=1))
        write_whole(self.dir / AGENT_RECORD, json.dumps(
            {"runner_pid": os.getpid(), "host": socket.gethostname(), "node": facts["node"],
             "node_host": facts["host"], "pid": started["pid"], "started": time.time()}))
        return RemoteCell(self, agent, started["pid"], facts["node"])

    def _watchdog(self, proc) -> Watchdog:
        watchdog = super()._watchdog(proc)
        watchdog.cpu_seconds = lambda: (proc.cpu_s, [])
        return watchdog

    def stop(self, proc, reason: str, dump: bool) -> str:
        """Stop the cell through its agent and record it as killed."""
        try:
            done = proc.stop(dump)
            if done.get("dump"):
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(f"fugue-tui runner: {done['dump']} (on node {proc.node})\n")
            if done.get("forced"):
                reason += f" (SIGKILL needed for pids {done['forced']} on node {proc.node})"
            if done.get("error"):
                reason += f"; {done['error']}"
            proc.fetch_attempt_files()  # its monitor's facts go into the row, dumps kept
        except NodeLost as lost:
            reason += f"; its node was lost meanwhile: {lost}"
        self.runner._record(self.spec, "killed", reason)
        self.runner._emit("killed", cell=self.cell.key, attempt=self.number, reason=reason,
                          exit_code=proc.returncode)
        return reason

    def _lost(self, proc: RemoteCell, tail: EventTail, why: str):
        reason = f"node {proc.node} lost while the cell ran ({why})"
        self.forward(tail, None)
        with contextlib.suppress(Exception):
            ray.kill(proc.agent)
        self._forget()
        self.runner._record(self.spec, "killed", reason)
        self.runner._emit("killed", cell=self.cell.key, attempt=self.number, reason=reason,
                          exit_code=None, node_lost=True)
        return "killed", reason, self.log_path, "node"

    def _forget(self) -> None:
        (self.dir / AGENT_RECORD).unlink(missing_ok=True)


def orphaned_attempts(runner: Runner) -> None:
    """Attempts of an earlier runner of this campaign that never ended (their
    ``agent.json`` is still there: that runner died while they ran): each recorded as
    killed, once. Their cells went with their agents (the module docstring). Then
    what an earlier runner's ``local`` cluster left is stopped."""
    for attempt in runner.folder.all_attempts():
        record_path = attempt.path / AGENT_RECORD
        try:
            record = json.loads(record_path.read_text())
            spec = json.loads(AttemptFolder(attempt.path).spec.read_text())
        except (OSError, ValueError):
            continue
        reason = (f"runner pid {record.get('runner_pid')} ended while this attempt ran on "
                  f"node {record.get('node')}; its agent took the cell down (Ray ends the "
                  "actors of a runner that died, and the cell dies with its agent)")
        EventWriter(spec["events"], cell=spec["cell"]["key"],
                    attempt=spec["attempt"]).emit("killed", reason=reason)
        runner._record(spec, "killed", reason)
        runner._emit("killed", cell=spec["cell"]["key"], attempt=spec["attempt"],
                     reason=reason, predecessor=True)
        record_path.unlink(missing_ok=True)
    messages = clean_local_runtimes(runner.run_dir)
    if messages:
        runner._emit("cleanup", messages=messages, predecessor=True)


def clean_local_runtimes(run_dir: Path) -> list[str]:
    """What earlier runners' ``local`` clusters left (their runner died before stopping
    them and no guard did it): each recorded runtime stopped; one line per thing done."""
    from engine.cleanup import run_recorded

    messages = []
    for folder in sorted(Path(run_dir).glob(f"{LOCAL_PREFIX}*")):
        if folder.name != f"{LOCAL_PREFIX}{os.getpid()}" and any(
                (folder / "cleanup").glob("*.json")):
            messages += [f"{folder.name}: {m}" for m in run_recorded(folder)]
    return messages


def _write_under(root: Path, files: dict[str, bytes]) -> None:
    """Each ``files`` entry (path relative to ``root``: bytes) written whole, only under
    ``root``, whatever a node sends."""
    base = Path(root).resolve()
    for rel, content in files.items():
        target = (base / rel).resolve()
        if base not in target.parents:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        tmp.replace(target)


def _model(name: str) -> str:
    """Ray's accelerator type for an NVML GPU name: ``NVIDIA L4`` → ``L4``,
    ``NVIDIA A100-SXM4-40GB`` → ``A100`` (the word Ray's ``accelerator_type`` uses)."""
    word = name.replace("NVIDIA", "").replace("Tesla", "").strip().split(" ")[0]
    return word.split("-")[0] or name


def _line(exc: BaseException) -> str:
    """One line for a Ray error: the remote exception's own message when there is one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and str(cause).strip():
        exc = cause
    text = [t for t in str(exc).strip().splitlines() if t.strip()][-1:]
    return text[0][:300] if text else type(exc).__name__
