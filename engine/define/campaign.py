"""Campaign files: what to run, how often and where (a TOML file, ``campaigns/*.toml``).

::

    name = "quick"                      # run folder runs/<name>/ (engine.define.paths)
    experiments = "D_ens,D_cv"          # the harness's selection syntax, or a list
    executors = ["seq"]
    passes = 1                          # repeats of the whole matrix
    seed = 42                           # job i gets seed + i
    runs_dir = "runs"                   # relative to the working directory; ~ expanded
    device = "auto"                     # auto | cpu | cuda | cuda:N
    compile = "off"                     # off | on | both
    compile_mode = "default"            # torch.compile mode when compile is on
    precision = ["fp32", "bf16"]        # fp32 | tf32 | amp-fp16 | amp-bf16 | bf16, or a
                                        # list (one cell each); amp = true = "amp-fp16"
    threads = 0                         # torch threads per cell process; 0 = all cores
    retries = 0                         # automatic retries of a failed or hung cell
    monitor = true                      # the per-cell sampler (engine/measure/monitor.py)
    monitor_interval_s = 0.5            # seconds between monitor samples
    [watchdog]                          # hung-cell detection (engine/runner/watchdog.py)
    interval_s = 10.0                   # seconds between checks
    suspect_after = 3                   # checks without progress before "suspect"
    hung_after = 6                      # ... before "hung"
    cpu_fraction = 0.05                 # below this share of one core the tree counts as idle
    action = "kill"                     # kill (then retry) | flag (wait for a command)
    experiments_file = "my.toml"        # optional user catalogue, merged over the built-in one
    [options.ray]                       # per-executor options: each executor declares
    scheduler = ["fifo", "asha"]        # its own (engine/executors/__init__.py; the table
    [options.unified_model]             # of them all: docs/executors.md)
    max_parallel = 8                    # or "auto" (engine.profile.auto)
    [budget]                            # what "auto" may fill (default: measured here)
    ram = "6GiB"                        # host RAM; device = "40GiB"; cores = 8

Torch-free.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.bounds import CAMPAIGN
from engine.define import tomlfile
from engine.define.catalogue import Catalogue, load_catalogue
from engine.define.executor_options import check_table
from engine.precision import parse_axis
from engine.define.ksweep import check_k_sweep
from engine.define.paths import check_campaign_name, user_path
from engine.define.sha_slots import check_options_sha_slots
from engine.define.validate import check_experiment
from engine.define.watchdog_settings import ACTIONS, WatchdogSettings
from engine.define.cluster import ClusterSettings, parse_cluster
from engine.define.devices import check_device_pair, parse_devices
from engine.errors import ConfigError, known, nearest
from engine.registry import EXECUTORS

COMPILE_CHOICES = ("off", "on", "both")
#: Passes repeat the whole matrix; more than this is a typo, not a measurement plan.
MAX_PASSES = int(CAMPAIGN["passes"].high)  # the bounds of engine.bounds
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,), "experiments": (str, list, int), "executors": (list, str),
    "passes": (int,), "seed": (int,), "runs_dir": (str,), "device": (str,),
    "compile": (str,), "compile_mode": (str,), "threads": (int,),
    "experiments_file": (str,), "options": (dict,), "description": (str,),
    "retries": (int,), "watchdog": (dict,), "monitor": (bool,), "monitor_interval_s": (float,),
    "precision": (str, list), "amp": (bool,),
    "k_sweep": (list,),
    "budget": (dict,),
    "devices": (str, list), "one_cell_per_host": (bool,),
    "cluster": (str,), "gpu": (str,), "cpus_per_cell": (int,),
}
#: ``[budget]``: what ``max_parallel = "auto"`` may fill (engine.profile.budget); a missing
#: key is measured on the machine (its total RAM, the device's total memory, its cores).
_BUDGET_KEYS: dict[str, tuple[type, ...]] = {"ram": (str, int, float),
                                             "device": (str, int, float), "cores": (int,)}
_WATCHDOG_KEYS: dict[str, tuple[type, ...]] = {
    "interval_s": (float,), "suspect_after": (int,), "hung_after": (int,),
    "cpu_fraction": (float,), "gpu_busy_pct": (float,), "action": (str,),
}
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


@dataclass(frozen=True)
class Campaign:
    """A validated campaign. ``experiments`` holds resolved ids in selection order."""

    name: str
    experiments: list[str]
    executors: list[str]
    passes: int = 1
    seed: int = 42
    runs_dir: Path = Path("runs")
    device: str = "auto"
    compile: str = "off"
    compile_mode: str = "default"
    threads: int = 0
    retries: int = 0
    watchdog: WatchdogSettings = field(default_factory=WatchdogSettings)
    monitor: bool = True
    monitor_interval_s: float = 0.5
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The precision axis (``engine.precision``): one cell per value, in order;
    #: None when the campaign sets none (each experiment's default or legacy amp flag).
    precision: list[str] | None = None
    #: ``[budget]`` as written (``ram``, ``device``, ``cores``), checked; what
    #: ``max_parallel = "auto"`` may fill. Empty: measured on the machine.
    budget: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    file_hash: str = ""
    #: sha256 (16 hex) of the user experiments file's bytes; "" without one.
    experiments_file_hash: str = ""
    catalogue: Catalogue | None = field(default=None, compare=False, repr=False)
    #: Settings that run but do not do what they seem to (printed by the front ends).
    warnings: list[str] = field(default_factory=list, compare=False)
    #: The swept ensemble sizes (``k_sweep``), increasing; empty: each experiment's own K.
    k_sweep: tuple[int, ...] = ()
    #: ``devices`` (issue 27, engine.define.devices): the devices cells may run on at once,
    #: one cell per device; empty when the campaign names one ``device`` (today's runner).
    #: A one-element list of ``cpu`` or ``cuda:N`` is folded into ``device`` here.
    devices: tuple[str, ...] = ()
    #: With ``devices``: run one cell at a time on the host anyway (each still on its
    #: placed device), for measurements that must share no host resources.
    one_cell_per_host: bool = False
    #: ``cluster`` (issue 28, engine.define.cluster): the Ray cluster the cells run on, with
    #: its ``gpu`` selector and ``cpus_per_cell``; None: on this host (the runner's own).
    cluster: ClusterSettings | None = None

    def resolved(self) -> dict[str, Any]:
        """The campaign as it runs (after overrides), JSON-able."""
        return {"name": self.name, "experiments": self.experiments, "executors": self.executors,
                "passes": self.passes, "seed": self.seed, "runs_dir": str(self.runs_dir),
                "device": self.device, "compile": self.compile, "compile_mode": self.compile_mode,
                "threads": self.threads, "retries": self.retries,
                "watchdog": self.watchdog.__dict__, "options": self.options,
                "monitor": self.monitor, "monitor_interval_s": self.monitor_interval_s,
                "precision": self.precision,
                "source": str(self.source) if self.source else None, "file_hash": self.file_hash,
                "catalogue": [str(p) for p in self.catalogue.sources] if self.catalogue else [],
                # only when swept: the resolved campaign of a run without it stays as it was
                **({"k_sweep": list(self.k_sweep)} if self.k_sweep else {}),
                **({"devices": list(self.devices)} if self.devices else {}),
                **({"one_cell_per_host": True} if self.one_cell_per_host else {}),
                **(self.cluster.resolved() if self.cluster else {}),
                **({"budget": self.budget} if self.budget else {})}

    def compile_modes(self) -> list[str]:
        """The compile axis of the matrix: ``"off"`` and/or the compile mode."""
        return {"off": ["off"], "on": [self.compile_mode],
                "both": ["off", self.compile_mode]}[self.compile]


def parse_campaign(doc: dict[str, Any], where: str, *, file_hash: str = "",
                   source: Path | None = None, overrides: dict[str, Any] | None = None,
                   base_dir: Path | None = None) -> Campaign:
    """Validate a campaign table (from a file, or built by the dashboard).

    ``overrides`` (command-line values) replace file values before validation. The names
    it may use are those registered: each process loads the built-ins and the user's
    plugins at its entry (:func:`engine.plugins.load_plugins`) before calling this.

    Raises:
        ConfigError: unknown key (nearest name), wrong type, unknown experiment or
            executor (with the known ones), a count below 1, an impossible choice.
    """
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    doc = {**doc, **given}

    def at(key: str) -> str:
        """Where ``key``'s value came from: its command-line flag, else the file."""
        return f"argument --{key.replace('_', '-')}" if key in given else where

    tomlfile.check_keys(doc, _KEYS, where)
    # Where results go, expanded once, here: the pre-flight check, the dry run, the runner
    # and the cells all use this path (engine.define.paths).
    runs_dir = user_path(doc.get("runs_dir", "runs"), at("runs_dir") if "runs_dir" in given
                         else f"{where}: key 'runs_dir'")
    user_file = doc.get("experiments_file")
    if user_file:
        user_file = str(user_path(user_file, at("experiments_file")))
    # The file's value is relative to the campaign file; a command-line value to the
    # working directory (where the shell, and the argument check, resolved it).
    if (user_file and base_dir is not None and "experiments_file" not in given
            and not Path(user_file).is_absolute()):
        user_file = str(base_dir / user_file)
    if user_file and not Path(user_file).is_file():
        raise ConfigError(f"{at('experiments_file')}: key 'experiments_file': no such file "
                          f"{user_file}")
    catalogue = load_catalogue(user_file)
    if "experiments" not in doc:
        raise ConfigError(f"{where}: missing key 'experiments' (e.g. experiments = \"D_ens\")")
    experiments = catalogue.select(doc["experiments"], where=f"{where}: experiments")
    seed = doc.get("seed", 42)
    for exp_id in experiments:
        check_experiment(catalogue.get(exp_id), seed, at("seed"))
    executors = doc.get("executors", ["seq"])
    executors = [executors] if isinstance(executors, str) else executors
    if not executors:
        raise ConfigError(f"{where}: key 'executors' must name at least one executor; "
                          f"{known(EXECUTORS.names())}")
    for name in executors:
        if not isinstance(name, str) or name not in EXECUTORS:
            raise ConfigError(f"{where}: unknown executor {name!r}"
                              f"{nearest(str(name), EXECUTORS.names())}; {known(EXECUTORS.names())}")
    passes = doc.get("passes", 1)
    if not 1 <= passes <= MAX_PASSES:
        raise ConfigError(f"{at('passes')}: key 'passes' must be between 1 and {MAX_PASSES}, "
                          f"got {passes}")
    retries = doc.get("retries", 0)
    if retries < 0:
        raise ConfigError(f"{at('retries')}: key 'retries' must be >= 0, got {retries}")
    CAMPAIGN["retries"].check(retries, at("retries"), "key 'retries'")
    watchdog = _watchdog(doc.get("watchdog", {}), f"{where}: watchdog")
    threads = doc.get("threads", 0)
    if threads < 0:
        raise ConfigError(f"{where}: key 'threads' must be >= 0 (0 = all cores), got {threads}")
    CAMPAIGN["threads"].check(threads, where, "key 'threads'")
    compile_choice = doc.get("compile", "off")
    if compile_choice not in COMPILE_CHOICES:
        raise ConfigError(f"{where}: key 'compile' must be one of {', '.join(COMPILE_CHOICES)}, "
                          f"got {compile_choice!r}{nearest(compile_choice, COMPILE_CHOICES)}")
    compile_mode = doc.get("compile_mode", "default")
    if compile_mode not in COMPILE_MODES:
        raise ConfigError(f"{where}: key 'compile_mode' must be one of {', '.join(COMPILE_MODES)}, "
                          f"got {compile_mode!r}{nearest(compile_mode, COMPILE_MODES)}")
    precision = parse_axis(doc, at("precision") if "precision" in given else where)
    doc = check_device_pair(doc, given, where)
    devices: tuple[str, ...] = ()
    if "devices" in doc:
        devices = parse_devices(doc["devices"], at("devices"))
        if len(devices) == 1 and _DEVICE.match(devices[0]) and devices[0] != "auto":
            # one cpu or cuda:N device: exactly today's `device` (same keys, same runner)
            doc = {**doc, "device": devices[0]}
            devices = ()
    device = doc.get("device", "auto")
    if not _DEVICE.match(device):
        raise ConfigError(f"{at('device')}: key 'device' must be auto, cpu, cuda or cuda:N, "
                          f"got {device!r}")
    # devices = "cpu" (or one cuda:N) is folded into device above: what is left is a list
    cluster = parse_cluster(doc, device, devices, at)
    options = doc.get("options", {})
    for executor, table in options.items():
        if executor not in EXECUTORS:
            raise ConfigError(f"{where}: options.{executor}: unknown executor"
                              f"{nearest(executor, EXECUTORS.names())}; {known(EXECUTORS.names())}")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: options.{executor} must be a table")
        if ("max_parallel" in table
                and "max_parallel" not in EXECUTORS.get(executor).option_fields):
            # seq's answer is always 1: "auto" (or a number) has nothing to decide there.
            raise ConfigError(f"{where}: options.{executor}: key 'max_parallel': executor "
                              f"'{executor}' runs one job at a time; max_parallel (a number "
                              "or \"auto\") applies to executors that run jobs concurrently")
        for packing_key in ("devices", "jobs_per_device"):
            if (packing_key in table
                    and packing_key not in EXECUTORS.get(executor).option_fields):
                # Packing pins mp's worker processes to GPUs (engine.executors.packing).
                how = ("trains in the cell's one process on its one device"
                       if executor in ("seq", "unified_model")
                       else "does not pack jobs onto several GPUs (not built for it)")
                raise ConfigError(f"{where}: options.{executor}: key '{packing_key}': "
                                  f"executor '{executor}' {how}; devices (packing jobs onto "
                                  "several GPUs) applies to mp")
        check_table(EXECUTORS.get(executor).option_fields, table, f"{where}: options.{executor}")
    for executor in dict.fromkeys(executors):
        # An executor's own campaign-time check (ray: is the cluster address reachable),
        # named by its declaration so that definitions never import an executor's code.
        found = EXECUTORS.get(executor).check_options(options.get(executor, {}))
        if found:
            key, reason = found
            raise ConfigError(f"{where}: options.{executor}: key '{key}': {reason}")
    packed_hpo = [e for e in experiments if catalogue.get(e).type == "hpo"]
    if ("ray" in executors and packed_hpo
            and (options.get("ray") or {}).get("devices") is not None):
        # ray's packing places actor pools; Ray Tune places hpo's trials itself.
        raise ConfigError(f"{where}: options.ray: key 'devices': packs ray's actor pools, "
                          f"not the Tune trials of hpo experiment '{packed_hpo[0]}' (use mp "
                          "for it, or leave devices out)")
    k_sweep = check_k_sweep(doc.get("k_sweep"), at("k_sweep"),
                            [catalogue.get(e) for e in experiments])
    warnings = _axis_warnings(options, executors, [catalogue.get(e) for e in experiments])
    # sha with fewer slots than trials would deadlock at its first rung: refused now.
    check_options_sha_slots(options, executors, [catalogue.get(e) for e in experiments],
                            doc.get("seed", 42), where)
    interval = float(doc.get("monitor_interval_s", 0.5))
    if not (math.isfinite(interval) and 0.05 <= interval <= 60):
        raise ConfigError(f"{where}: key 'monitor_interval_s' must be between 0.05 and 60 "
                          f"seconds, got {doc.get('monitor_interval_s')!r}")
    budget = _budget(doc.get("budget", {}), f"{where}: budget")
    name = check_campaign_name(doc.get("name"), where, source.stem if source else None)
    return Campaign(
        name=name, experiments=experiments, executors=list(dict.fromkeys(executors)),
        passes=doc.get("passes", 1), seed=doc.get("seed", 42),
        runs_dir=runs_dir, device=device, compile=compile_choice,
        compile_mode=compile_mode, threads=threads, retries=retries, watchdog=watchdog,
        monitor=doc.get("monitor", True), monitor_interval_s=interval,
        options=options, budget=budget, precision=precision, source=source,
        file_hash=file_hash, catalogue=catalogue, warnings=warnings, k_sweep=k_sweep,
        devices=devices, one_cell_per_host=doc.get("one_cell_per_host", False),
        cluster=cluster,
        # the file actually merged: the campaign's, or the default one (engine.dirs)
        experiments_file_hash=(hashlib.sha256(Path(catalogue.sources[1]).read_bytes())
                               .hexdigest()[:16] if len(catalogue.sources) > 1 else ""))


def _axis_warnings(options: dict[str, dict[str, Any]], executors: list[str],
                   experiments: list[Any]) -> list[str]:
    """Settings that will not do what they seem to (run anyway, once, and say so)."""
    out = []
    ray_opts = options.get("ray", {})
    if "scheduler" in ray_opts:
        if "ray" not in executors:
            out.append("options.ray.scheduler is set but executor 'ray' is not in this "
                       "campaign: no scheduler runs")
        elif not any(e.type == "hpo" for e in experiments):
            out.append("options.ray.scheduler applies to hpo experiments only; none is "
                       "selected, so ray runs each experiment once without a scheduler")
    if "sweep" in options.get("unified_model", {}) and "unified_model" not in executors:
        out.append("options.unified_model.sweep is set but executor 'unified_model' is not in "
                   "this campaign")
    return out


def _budget(table: dict[str, Any], where: str) -> dict[str, Any]:
    """``[budget]`` checked: known keys, sizes (``6GiB``, MiB) > 0, cores >= 1."""
    from engine.profile.budget import parse_cores, parse_size

    tomlfile.check_keys(table, _BUDGET_KEYS, where)
    for key, value in table.items():
        if key == "cores":
            parse_cores(value, f"{where}: key 'cores'")
        else:
            parse_size(value, f"{where}: key '{key}'")
    return dict(table)


def _watchdog(table: dict[str, Any], where: str) -> WatchdogSettings:
    tomlfile.check_keys(table, _WATCHDOG_KEYS, where)
    settings = WatchdogSettings(**{k: (float(v) if isinstance(v, int) and _WATCHDOG_KEYS[k] == (float,)
                                       else v) for k, v in table.items()})
    if not (math.isfinite(settings.interval_s) and settings.interval_s > 0):
        raise ConfigError(f"{where}: key 'interval_s' must be a finite number > 0, "
                          f"got {settings.interval_s}")
    if not 1 <= settings.suspect_after <= settings.hung_after:
        raise ConfigError(f"{where}: need 1 <= suspect_after <= hung_after, got "
                          f"{settings.suspect_after} and {settings.hung_after}")
    if not 0 <= settings.cpu_fraction < 1:
        raise ConfigError(f"{where}: key 'cpu_fraction' must be in [0, 1), got {settings.cpu_fraction}")
    if not 0 <= settings.gpu_busy_pct <= 100:
        raise ConfigError(f"{where}: key 'gpu_busy_pct' must be in [0, 100], got "
                          f"{settings.gpu_busy_pct}")
    if settings.action not in ACTIONS:
        raise ConfigError(f"{where}: key 'action' must be one of {', '.join(ACTIONS)}, got "
                          f"{settings.action!r}{nearest(settings.action, ACTIONS)}")
    return settings


def load_campaign(path: str | Path, overrides: dict[str, Any] | None = None) -> Campaign:
    """Read and validate a campaign file (see :func:`parse_campaign` for errors)."""
    path = Path(path)
    doc = tomlfile.load(path)
    file_hash = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return parse_campaign(doc, str(path), file_hash=file_hash, source=path,
                          overrides=overrides, base_dir=path.parent)
