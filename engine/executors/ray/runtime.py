"""A private Ray runtime for one cell: start or connect, check, account, stop, clean up.

Torch-free, and ``ray`` is imported only inside the functions that need it: the runner
imports this module to run the cleanup handler (:func:`cleanup_handler`) after a cell
ended, and the runner never loads ray or torch.

Why the pieces exist:

- Ray's Unix sockets live under its temporary folder and must stay below the 107-byte
  ``AF_UNIX`` path limit, so the folder is a short ``/tmp/fr-XXXXXXXX`` path (not the run
  folder, which may be deep); its ``logs`` are linked into the attempt folder while the
  cell runs and copied there when it ends.
- Every process of a runtime we start carries our tag: the core processes name the
  temporary folder on their command line, every process inherits ``FUGUE_RAY_TAG`` from the
  cell, and workers are the raylet's children. :func:`find_ours` matches on those, never on
  a process name, so another user's Ray (or another cell's) is left alone.
- The cell records a cleanup entry (``engine.cleanup``) before it starts Ray, so the runner
  stops what survived a watchdog kill or a SIGKILL of the cell.
- A runtime we start has a token of its own in its temporary folder, never the user's
  ``~/.ray/auth_token`` (:mod:`engine.executors.ray.auth` says why).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import FugueError
from engine.executors.ray import auth
from engine.executors.ray.options import check_address

#: Environment variable that marks every process of a runtime we start (value: the tag).
TAG_ENV = "FUGUE_RAY_TAG"
#: Cleanup record name in the attempt folder (``engine.cleanup``).
CLEANUP_NAME = "ray"
CLEANUP_HANDLER = "engine.executors.ray.runtime:cleanup_handler"
#: Linked (while running) and then copied (after the end) into the attempt folder.
LOGS_LINK = "ray-logs"
#: Unix socket paths may hold 107 bytes; Ray appends about 70 to its temporary folder
#: (``/session_YYYY-MM-DD_HH-MM-SS_ffffff_PID/sockets/plasma_store``).
SOCKET_LIMIT = 107
_RAY_SUFFIX = len("/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store")
#: Seconds teardown waits for the workers it killed through Ray to be gone before it shuts
#: Ray down (``ray.kill`` takes tens of ms while Ray is up; a worker whose raylet went first
#: instead exits on its own, tearing down torch for seconds).
EXIT_WAIT_S = 2.0
#: Log files larger than this are not copied into the attempt folder (bytes).
MAX_LOG_COPY = 4 * 2**20
#: Object store of a local runtime, bytes: jobs load their own data, so little is needed,
#: and the default (30 % of RAM in /dev/shm) is not ours to take on a shared host.
OBJECT_STORE_BYTES = 256 * 2**20


@dataclass
class Runtime:
    """What :func:`start_runtime` started or joined (recorded in ``executor_info``)."""

    mode: str                    # local | address
    address: str
    temp_dir: str | None         # our short temporary folder (local only)
    tag: str
    num_cpus: float | None       # what we gave a local runtime (None: a cluster's own)
    num_gpus: float | None
    resources: dict[str, float] = field(default_factory=dict)  # ray.cluster_resources()
    ray_version: str = ""
    init_s: float = 0.0          # seconds in ray.init
    #: Head processes a local runtime was started without (:data:`LEAN_SKIPS`); empty when
    #: this Ray could not be started lean (a version whose internals differ) or for a cluster.
    skipped: list[str] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        keep = ("CPU", "GPU", "memory", "object_store_memory")
        return {"ray_version": self.ray_version, "ray_mode": self.mode,
                "ray_address": self.address, "temp_dir": self.temp_dir,
                "num_cpus": self.num_cpus, "num_gpus": self.num_gpus,
                "resources": {k: v for k, v in self.resources.items() if k in keep},
                "ray_init_s": round(self.init_s, 3), "ray_skipped": list(self.skipped)}


def short_temp_dir(base: str | None = None) -> Path:
    """Create a private temporary folder for Ray whose socket paths fit the AF_UNIX limit.

    ``base`` defaults to ``/tmp`` when writable (``$TMPDIR`` may be deep), else
    ``tempfile.gettempdir()``.

    Raises:
        FugueError: no base folder short enough (names the path and the limit).
    """
    candidates = [base] if base else ["/tmp", tempfile.gettempdir()]
    for folder in candidates:
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK):
            path = Path(tempfile.mkdtemp(prefix="fr-", dir=folder))
            if len(str(path)) + _RAY_SUFFIX < SOCKET_LIMIT:
                return path
            path.rmdir()
    raise FugueError(f"ray: no temporary folder short enough for Ray's sockets (a "
                     f"{SOCKET_LIMIT}-byte limit; tried {', '.join(c for c in candidates if c)})")


def _cluster_env(tag: str) -> dict[str, str]:
    """Variables every process of a local runtime inherits (read by Ray, Tune and us)."""
    return {
        TAG_ENV: tag,
        "RAY_USAGE_STATS_ENABLED": "0",       # never report usage from a benchmark host
        "RAY_CHDIR_TO_TRIAL_DIR": "0",        # Tune trials keep the cell's working folder
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # rows are the results; no per-trial CSV
        "RAY_DEDUP_LOGS": "0",
    }


def start_runtime(*, attempt_dir: str | Path, num_cpus: float | None = None,
                  num_gpus: float | None = None, address: str | None = None,
                  cuda_visible: str | None = None) -> Runtime:
    """Start a private local Ray runtime (explicit ``num_cpus``/``num_gpus``, dashboard
    off, short temporary folder) or connect to the cluster at ``address``.

    A cleanup record is written to ``attempt_dir`` *before* Ray starts, so the runner can
    stop the runtime whatever happens to the cell. ``cuda_visible`` (local only) is the
    ``CUDA_VISIBLE_DEVICES`` value the runtime and its workers get (the device under test).

    Raises:
        FugueError: unreachable address; no short temporary folder; Ray fails to start.
    """
    import ray

    if address:
        reason = check_address(address)
        if reason:
            raise FugueError(reason)
    temp_dir = None if address else short_temp_dir()
    tag = temp_dir.name if temp_dir else f"fr-addr-{os.getpid()}"
    try:
        return _start(ray, attempt_dir, temp_dir, tag, num_cpus, num_gpus, address,
                      cuda_visible)
    except BaseException:
        # Whatever got started before the failure is ours to stop now (the record may
        # not exist yet, and the cell's teardown never sees a runtime).
        with contextlib.suppress(Exception):
            ray.shutdown()
        if temp_dir is not None:
            kill_ours(str(temp_dir), tag)
            remove_temp_dir(temp_dir)
            from engine import cleanup
            cleanup.release(attempt_dir, CLEANUP_NAME)
        raise


def _start(ray, attempt_dir, temp_dir, tag, num_cpus, num_gpus, address, cuda_visible
           ) -> Runtime:
    env: dict[str, str | None] = dict(_cluster_env(tag))
    if cuda_visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible
    if temp_dir is not None:
        from engine import cleanup
        cleanup.record(attempt_dir, CLEANUP_NAME, CLEANUP_HANDLER, temp_dir=str(temp_dir),
                       tag=tag, driver_pid=os.getpid(), attempt_folder=str(attempt_dir))
    if temp_dir is not None:  # its own token, never the user's (engine.executors.ray.auth)
        env.update(auth.private_env(temp_dir))
    # inherited by the processes ray.init starts, restored below (this process's Ray keeps
    # the mode and token it read: the runtime's)
    saved = auth.apply_env(env)
    skipped: list[str] = []
    t0 = time.perf_counter()
    try:
        if address:
            # the user's cluster: the user's token (one line when it is refused)
            refused = auth.use_user_token(address)
            if refused:
                raise FugueError(f"ray: options.ray.address: {refused}")
            # Workers of an existing cluster do not inherit the cell's environment.
            passed = {k: v for k, v in os.environ.items()
                      if k.startswith(("FUGUE_", "OMP_", "MKL_", "PYTHONPATH", "RAY_CHDIR",
                                       "TUNE_"))}
            ctx = ray.init(address=address, include_dashboard=False, log_to_driver=False,
                           configure_logging=False, runtime_env={"env_vars": passed})
        else:
            auth.refresh_ray()  # Ray cached the mode and token it read before
            ctx = _lean_init(ray, skipped, num_cpus=num_cpus, num_gpus=num_gpus,
                             include_dashboard=False, _temp_dir=str(temp_dir),
                             object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False,
                             configure_logging=False)
    except FugueError:
        raise
    except Exception as exc:
        raise FugueError(f"ray: the runtime did not start: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    finally:
        auth.apply_env(saved)
    init_s = time.perf_counter() - t0
    if temp_dir is not None:
        link_logs(temp_dir, attempt_dir)
    return Runtime(mode="address" if address else "local",
                   address=str(ctx.address_info.get("address") or address or ""),
                   temp_dir=str(temp_dir) if temp_dir else None, tag=tag,
                   num_cpus=num_cpus if not address else None,
                   num_gpus=num_gpus if not address else None,
                   resources=dict(ray.cluster_resources()), ray_version=ray.__version__,
                   init_s=init_s, skipped=skipped)


#: Head processes ``ray.init`` starts that a private runtime of one cell never uses: the
#: API server (a minimal dashboard serving job submission and the state API: the cell
#: submits no jobs), the autoscaler's monitor (one node, nothing to scale) and the log
#: monitor (it forwards worker output to the driver, which ``log_to_driver=False`` turns
#: off; workers still write their log files). Each is a Python process that costs about
#: half a CPU second to start on the 2-core host, ``ray.init`` waits up to a second for the
#: API server, and ``ray.shutdown`` up to a second for each to stop (bench/RESULTS.md,
#: ``fixed_cost``).
LEAN_SKIPS = ("api_server", "autoscaler_monitor", "log_monitor")
#: The Ray versions whose internals :func:`_lean_init` was written against (the
#: ``ray._private.node.Node`` class, its ``start_api_server`` method and the ``no_monitor``
#: and ``include_log_monitor`` parameters); any other version starts the full runtime.
LEAN_VERSIONS = ("2.60.",)


def _await_registration(node, timeout: float = 30.0) -> None:
    """Wait, polling the GCS every 50 ms, until the raylet ``node`` just started has
    registered. ``ray.init`` then finds it at its first look: its own wait asks once a
    second, and the raylet (which waits for its agents) registers about a second after it
    starts, so that wait ends on the next whole second. Gives up quietly after ``timeout``
    (``ray.init``'s own wait then decides)."""
    deadline = time.monotonic() + timeout
    client = node.get_gcs_client()
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the GCS not answering yet: look again
            if any(key.hex() == node.node_id for key in client.get_all_node_info(timeout=1)):
                return
        time.sleep(0.05)


def _lean_init(ray, skipped: list[str], **kwargs):
    """``ray.init(**kwargs)`` for a new local runtime, without the head processes of
    :data:`LEAN_SKIPS` (their names are appended to ``skipped``).

    Ray offers no public switch for them: ``ray.init`` builds ``ray._private.node.Node``
    from its arguments, so the node class is replaced, for this one call, by a subclass
    whose parameters say ``no_monitor`` and ``include_log_monitor=False`` and whose API
    server start does nothing (what Ray itself does when that server fails to start and
    the dashboard was not asked for), and which, once it has started the raylet, waits for
    it in 50 ms steps (:func:`_await_registration`) instead of ``ray.init``'s whole seconds.
    On a Ray version other than :data:`LEAN_VERSIONS`, or one without those internals, this
    is plain ``ray.init``.
    """
    try:
        import ray._private.node as node_module

        base = node_module.Node
        lean = ray.__version__.startswith(LEAN_VERSIONS) and all(
            hasattr(base, name) for name in ("start_api_server", "start_ray_processes",
                                             "get_gcs_client"))
    except (ImportError, AttributeError):
        lean = False
    if not lean:
        return ray.init(**kwargs)

    class LeanNode(base):
        def __init__(self, ray_params, *args, **kw):
            if kw.get("head") or (args and args[0]):
                ray_params.no_monitor = True
                ray_params.include_log_monitor = False
            super().__init__(ray_params, *args, **kw)

        def start_api_server(self, *args, **kw):
            self._webui_url = None

        def start_ray_processes(self, *args, **kw):
            super().start_ray_processes(*args, **kw)
            if self.head:
                _await_registration(self)

    node_module.Node = LeanNode
    try:
        ctx = ray.init(**kwargs)
    finally:
        node_module.Node = base
    skipped.extend(LEAN_SKIPS)
    return ctx


def check_resources(runtime: Runtime, need: dict[str, float]) -> None:
    """Stop with a message unless the runtime shows the resources this cell relies on
    (``{"CPU": 2, "GPU": 0}``): exactly those for a local runtime we started (anything
    else means Ray did not take our numbers), at least those for an existing cluster.

    Raises:
        FugueError: names each resource seen against what was expected.
    """
    seen = runtime.resources
    exact = runtime.mode == "local"
    wrong = [f"{k} {seen.get(k, 0):g} (expected {'' if exact else 'at least '}{v:g})"
             for k, v in need.items()
             if (abs(seen.get(k, 0) - v) > 1e-6 if exact else seen.get(k, 0) + 1e-9 < v)]
    if wrong:
        raise FugueError(f"ray: the runtime at {runtime.address} does not show the resources "
                         f"this cell needs: {'; '.join(wrong)}")


def share(total: float, parts: int) -> float:
    """``total / parts`` as a Ray resource quantity that ``parts`` requests fit in:
    whole units when at least one, else rounded *down* to Ray's 4-decimal precision."""
    each = total / parts
    if each >= 1:
        return float(int(each))
    return int(each * 10_000) / 10_000


def actor_request(nodes: Iterable[dict[str, float]], count: int, gpu: bool
                  ) -> dict[str, float]:
    """Each of ``count`` actors' request, ``{"CPU": c, "GPU": g}``, from the nodes' own
    resources (``ray.nodes()[i]["Resources"]``): the largest share that lets all ``count``
    run at once, each on one node. A local runtime is one node with this cell's cores, so
    that is ``share(cores, count)``; a cluster of 1-CPU nodes gets at most 1 CPU per actor
    whatever this host has. ``gpu``: the cell trains on a GPU (each actor then shares one);
    else no GPU is asked for.

    Candidate shares are a node's quantity split in 1..``count`` parts (:func:`share`); the
    GPU share is chosen first, then the largest CPU share that fits beside it. When nothing
    fits, the smallest candidates are returned and :func:`check_schedulable` says why.
    """
    nodes = list(nodes)

    def candidates(resource: str) -> list[float]:
        found = {share(n.get(resource, 0.0), m) for n in nodes for m in range(1, count + 1)
                 if n.get(resource, 0.0) > 0}
        # None on any node: one unit shared, as a single node would give (and the check
        # that follows names what is missing).
        return sorted((c for c in found if c > 0), reverse=True) or [share(1.0, count)]

    gpus = 0.0
    if gpu:
        gpu_options = candidates("GPU")
        gpus = next((g for g in gpu_options if fits({"GPU": g}, count, nodes) >= count),
                    gpu_options[-1])
    cpu_options = candidates("CPU")
    cpus = next((c for c in cpu_options if fits({"CPU": c, "GPU": gpus}, count, nodes) >= count),
                cpu_options[-1])
    return {"CPU": cpus, "GPU": gpus}


def fits(per_actor: dict[str, float], count: int, nodes: Iterable[dict[str, float]]
         ) -> int:
    """How many of ``count`` requests of ``per_actor`` resources the ``nodes`` (each a
    dict of total resources, as ``ray.nodes()[i]["Resources"]``) can hold at once."""
    placed = 0
    for node in nodes:
        free = dict(node)
        while placed < count and all(free.get(k, 0) + 1e-9 >= v for k, v in per_actor.items()
                                     if v):
            for k, v in per_actor.items():
                free[k] = free.get(k, 0) - v
            placed += 1
    return placed


def check_schedulable(per_actor: dict[str, float], count: int,
                      nodes: Iterable[dict[str, float]], what: str = "actors") -> None:
    """Fail at once, with a message, when ``count`` requests can never all run together
    (a fractional GPU on a cluster without one, more CPU than any node has, ...), instead
    of leaving Ray to wait for resources that will never appear.

    Raises:
        FugueError: names the request, how many fit and the nodes' resources.
    """
    nodes = list(nodes)
    placed = fits(per_actor, count, nodes)
    if placed < count:
        request = ", ".join(f"{k} {v:g}" for k, v in per_actor.items() if v)
        offer = "; ".join(", ".join(f"{k} {n.get(k, 0):g}" for k in per_actor) for n in nodes)
        raise FugueError(f"ray: {count} {what} of {{{request}}} each can never be scheduled: "
                         f"only {placed} fit on the cluster ({offer or 'no nodes'})")


#: What a runtime process is, by a marker on its command line (Ray names its workers
#: ``ray::<what>`` and starts its head processes from these files).
_KINDS = (("gcs_server", "gcs_server"), ("/raylet", "raylet"),
          ("dashboard/dashboard.py", "api_server"), ("autoscaler/_private/monitor.py",
                                                     "autoscaler_monitor"),
          ("log_monitor.py", "log_monitor"), ("ray::DashboardAgent", "dashboard_agent"),
          ("ray::RuntimeEnvAgent", "runtime_env_agent"), ("ray::", "worker"))


def process_kinds(runtime: Runtime) -> dict[str, int]:
    """How many processes of each kind our local runtime runs now (``{"raylet": 1,
    "worker": 3, ...}``; empty for a cluster): recorded in ``executor_info``, it shows
    what ran beside the jobs."""
    if runtime.temp_dir is None:
        return {}
    import psutil

    counts: dict[str, int] = {}
    for proc in find_ours(runtime.temp_dir, runtime.tag):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        kind = next((k for marker, k in _KINDS if marker in cmdline), "other")
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def link_logs(temp_dir: str | Path, attempt_dir: str | Path) -> None:
    """Link ``<attempt>/ray-logs`` to the runtime's ``session_latest/logs``."""
    link = Path(attempt_dir) / LOGS_LINK
    with contextlib.suppress(OSError):
        if link.is_symlink():
            link.unlink()
        link.symlink_to(Path(temp_dir) / "session_latest" / "logs", target_is_directory=True)


def keep_logs(temp_dir: str | Path, attempt_dir: str | Path) -> None:
    """Replace the link by a copy of the log files (each up to ``MAX_LOG_COPY`` bytes), so
    the logs outlive the temporary folder."""
    link = Path(attempt_dir) / LOGS_LINK
    source = Path(temp_dir) / "session_latest" / "logs"
    if not link.is_symlink():
        return
    with contextlib.suppress(OSError):
        link.unlink()
    if not source.is_dir():
        return
    with contextlib.suppress(OSError):
        shutil.copytree(source, link, symlinks=True, dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if _too_big(Path(d) / n)])


def _too_big(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > MAX_LOG_COPY
    except OSError:
        return True


def find_ours(temp_dir: str | None, tag: str | None, exclude: Iterable[int] = ()) -> list:
    """Processes of the runtime identified by ``temp_dir`` (on the core processes' command
    lines) or ``tag`` (``FUGUE_RAY_TAG`` in a process's environment), and their
    descendants. Never matches by name; skips ``exclude`` and this process."""
    import psutil

    skip = {os.getpid(), *exclude}
    roots: dict[int, Any] = {}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid in skip:
            continue
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            hit = bool(temp_dir) and re.search(re.escape(temp_dir) + r"(?=[/\s]|$)",
                                                cmdline) is not None
            if not hit and tag:
                hit = proc.environ().get(TAG_ENV) == tag
        except (psutil.Error, OSError):
            continue
        if hit:
            roots[proc.pid] = proc
    found = dict(roots)
    for proc in list(roots.values()):
        try:
            for child in proc.children(recursive=True):
                if child.pid not in skip:
                    found.setdefault(child.pid, child)
        except psutil.Error:
            continue
    return list(found.values())


def kill_ours(temp_dir: str | None, tag: str | None, grace_s: float = 3.0) -> list[int]:
    """SIGTERM every process of ours, SIGKILL what is left after ``grace_s``; return
    the pids that were found."""
    import psutil

    procs = find_ours(temp_dir, tag)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    # Workers the raylet started while we were signalling: one more pass.
    late = find_ours(temp_dir, tag)
    for proc in late:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(late, timeout=grace_s)
    return sorted({p.pid for p in procs} | {p.pid for p in late})


def remove_temp_dir(temp_dir: str | Path) -> None:
    """Delete our temporary folder (only a ``fr-`` folder, never anything else)."""
    path = Path(temp_dir)
    if path.name.startswith("fr-") and path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


def recorded_processes(info: dict[str, Any]) -> list:
    """The live processes of the runtime a cleanup record names, for the monitor's count
    of the cell's CPU (:mod:`engine.measure.cores`): Ray's agents and workers run in
    sessions of their own. Those with the temporary folder on their command line (the
    core processes and agents) and their descendants (the workers, the raylet's children):
    what :func:`cleanup_handler` stops, less a match on the tag alone, whose environment
    reads of every host process cost the monitor about 1 % of a core at each scan."""
    temp_dir = info.get("temp_dir")
    if not temp_dir:
        return []
    return find_ours(temp_dir, None)


def cleanup_handler(info: dict[str, Any]) -> str:
    """``engine.cleanup`` handler, run by the runner after the cell ended: stop every
    process of the runtime the record names (by its temporary folder and tag), keep its
    logs in the attempt folder and delete the temporary folder. Returns one line."""
    temp_dir, tag = info.get("temp_dir"), info.get("tag")
    if not temp_dir or not tag:
        return "no runtime recorded"
    pids = kill_ours(temp_dir, tag, grace_s=float(info.get("grace_s", 3.0)))
    if info.get("attempt_folder"):
        keep_logs(temp_dir, info["attempt_folder"])
    remove_temp_dir(temp_dir)
    return (f"stopped {len(pids)} Ray process(es) of {tag}" if pids
            else f"no Ray process of {tag} left")


def shutdown(runtime: Runtime | None, attempt_dir: str | Path) -> list[int]:
    """Shut Ray down in this process, stop anything of ours that outlived it, keep the
    logs and release the cleanup record. Returns the pids that had to be stopped."""
    import ray

    with contextlib.suppress(Exception):
        ray.shutdown()
    if runtime is None or runtime.temp_dir is None:
        return []
    leftover = kill_ours(runtime.temp_dir, runtime.tag)
    keep_logs(runtime.temp_dir, attempt_dir)
    remove_temp_dir(runtime.temp_dir)
    from engine import cleanup
    cleanup.release(attempt_dir, CLEANUP_NAME)
    return leftover
