"""Campaign files: what to run, how often and where (a TOML file, ``campaigns/*.toml``)::

    experiments = "D_ens,D_cv"          # the harness's selection syntax, or a list
    executors = ["seq", "mp"]
    passes = 3
    [watchdog]                          # hung-cell detection (engine/runner/watchdog.py)
    action = "flag"
    [options.ray]                       # per-executor options: each executor declares
    scheduler = ["fifo", "asha"]        # its own (engine/executors/__init__.py; the table
                                        # of them all: docs/executors.md)

Every key, with its type, default, bound or choices and meaning, is declared once in
:mod:`engine.define.campaign_schema` (README's "Campaigns" lists them, generated from
there); this module checks a campaign against that declaration (:func:`parse_campaign`)
and holds the result (:class:`Campaign`).

Torch-free.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.bounds import CAMPAIGN
from engine.define import tomlfile
from engine.define.arrivals import StreamSpec, parse_arrivals
from engine.define.campaign_options import axis_warnings, check_options
from engine.define.campaign_schema import (
    COMPILE_CHOICES,
    COMPILE_MODES,
    KEYS,
    CampaignKey,
    check_entries,
    default,
    key_types,
    value_of,
)
from engine.define.catalogue import Catalogue, load_catalogue
from engine.define.cluster import ClusterSettings, parse_cluster
from engine.define.devices import check_device_pair, parse_devices
from engine.define.ksweep import check_k_sweep
from engine.define.paths import check_campaign_name, user_path
from engine.define.save_models import parse_save_models
from engine.define.sha_slots import check_options_sha_slots
from engine.define.validate import check_experiment
from engine.define.watchdog_settings import WatchdogSettings
from engine.errors import ConfigError, known, nearest, quoted, shown
from engine.precision import parse_axis
from engine.registry import EXECUTORS

#: Passes repeat the whole matrix; more than this is a typo, not a measurement plan.
MAX_PASSES = int(CAMPAIGN["passes"].high or 0)  # the bounds of engine.bounds
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
#: Keys whose bound is checked by a check of their own: the seed's range depends on the
#: experiments' job counts (``check_experiment``: job i's seed + i must fit too).
_OWN_BOUND_CHECK = ("seed",)


@dataclass(frozen=True)
class Campaign:
    """A validated campaign. ``experiments`` holds resolved ids in selection order.
    Defaults are the declared ones (``engine.define.campaign_schema``)."""

    name: str
    experiments: list[str]
    executors: list[str]
    passes: int = default("passes")
    seed: int = default("seed")
    runs_dir: Path = Path(default("runs_dir"))
    device: str = default("device")
    compile: str = default("compile")
    compile_mode: str = default("compile_mode")
    threads: int = default("threads")
    retries: int = default("retries")
    watchdog: WatchdogSettings = field(default_factory=WatchdogSettings)
    monitor: bool = default("monitor")
    monitor_interval_s: float = default("monitor_interval_s")
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
    one_cell_per_host: bool = default("one_cell_per_host")
    #: ``cluster`` (issue 28, engine.define.cluster): the Ray cluster the cells run on, with
    #: its ``gpu`` selector and ``cpus_per_cell``; None: on this host (the runner's own).
    cluster: ClusterSettings | None = None
    #: ``save_models`` (issue 50, engine.define.save_models): ``"false"``, ``"true"`` or
    #: ``"best"``; what cells of experiments that set none save. Never hashed.
    save_models: str = "false"
    #: ``arrivals`` (issue 51, engine.define.arrivals): the stream a stream campaign's cells
    #: serve (one cell per executor, pass and variant); None: a batch campaign.
    arrivals: StreamSpec | None = None

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
                **({"budget": self.budget} if self.budget else {}),
                **({"save_models": self.save_models} if self.save_models != "false" else {}),
                **({"arrivals": _stream_resolved(self.arrivals)} if self.arrivals else {})}

    def compile_modes(self) -> list[str]:
        """The compile axis of the matrix: ``"off"`` and/or the compile mode."""
        return {"off": ["off"], "on": [self.compile_mode],
                "both": ["off", self.compile_mode]}[self.compile]


@dataclass(frozen=True)
class _Source:
    """Where a campaign's values come from: the file (``where``) or, for the keys in
    ``given``, the command line."""

    where: str
    given: dict[str, Any]

    def at(self, key: str) -> str:
        """Where ``key``'s value came from: its command-line flag, else the file."""
        return f"argument --{key.replace('_', '-')}" if key in self.given else self.where


def parse_campaign(doc: dict[str, Any], where: str, *, file_hash: str = "",
                   source: Path | None = None, overrides: dict[str, Any] | None = None,
                   base_dir: Path | None = None) -> Campaign:
    """Validate a campaign table (from a file, or built by the dashboard).

    ``overrides`` (command-line values) replace file values before validation. The names
    it may use are those registered: each process loads the built-ins and the user's
    plugins at its entry (:func:`engine.plugins.load_plugins`) before calling this.
    The keys, their types, defaults, choices and bounds are those declared in
    :mod:`engine.define.campaign_schema`; each group of keys is checked by one function
    below, in this order (the first problem is the one reported).

    Raises:
        ConfigError: unknown key (nearest name), wrong type, unknown experiment or
            executor (with the known ones), a count below 1, an impossible choice.
    """
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    doc = {**doc, **given}
    src = _Source(where, given)
    tomlfile.check_keys(doc, key_types(), where)
    # Where results go, expanded once, here: the pre-flight check, the dry run, the runner
    # and the cells all use this path (engine.define.paths).
    runs_dir = user_path(value_of(doc, "runs_dir"), src.at("runs_dir") if "runs_dir" in given
                         else f"{where}: key 'runs_dir'")
    catalogue = load_catalogue(_experiments_file(doc, src, base_dir))
    arrivals = None
    if "arrivals" in doc:
        # a stream campaign (issue 51): its experiments are the stream's templates
        if "experiments" in doc:
            raise ConfigError(f"{src.at('experiments')}: key 'experiments' and key 'arrivals': "
                              "give one (a stream's experiments are its mix's or trace's)")
        arrivals = parse_arrivals(doc["arrivals"], where, catalogue, value_of(doc, "seed"),
                                  base_dir)
        doc = {**doc, "experiments": arrivals.templates}
    if "experiments" not in doc:
        raise ConfigError(f"{where}: missing key 'experiments' (e.g. experiments = \"D_ens\")")
    _check_lists(doc, src)
    experiments = catalogue.select(doc["experiments"], where=f"{where}: experiments")
    _check_named_once(doc["experiments"], catalogue, src.at("experiments"))
    exps = [catalogue.get(exp_id) for exp_id in experiments]
    seed = value_of(doc, "seed")
    for exp in exps:
        check_experiment(exp, seed, src.at("seed"))
    executors = _executors(value_of(doc, "executors"), where)
    if arrivals is not None:
        _check_stream_executors(executors, src, doc)
    _check_declared(doc, src)
    watchdog = _watchdog(value_of(doc, "watchdog"), f"{where}: watchdog")
    precision = parse_axis(doc, src.at("precision"))
    doc, device, devices = _placement(doc, src)
    # devices = "cpu" (or one cuda:N) is folded into device above: what is left is a list
    cluster = parse_cluster(doc, device, devices, src.at)
    options = check_options(value_of(doc, "options") or {}, executors, exps, where)
    k_sweep = check_k_sweep(doc.get("k_sweep"), src.at("k_sweep"), exps)
    warnings = axis_warnings(options, executors, exps)
    # sha with fewer slots than trials would deadlock at its first rung: refused now.
    check_options_sha_slots(options, executors, exps, seed, where)
    budget = _budget(value_of(doc, "budget"), f"{where}: budget")
    name = check_campaign_name(doc.get("name"), where, source.stem if source else None)
    save_models = parse_save_models(value_of(doc, "save_models"), src.at("save_models"))
    return Campaign(
        name=name, experiments=experiments, executors=list(executors),
        passes=value_of(doc, "passes"), seed=seed, runs_dir=runs_dir, device=device,
        compile=value_of(doc, "compile"), compile_mode=value_of(doc, "compile_mode"),
        threads=value_of(doc, "threads"), retries=value_of(doc, "retries"), watchdog=watchdog,
        monitor=value_of(doc, "monitor"),
        monitor_interval_s=float(value_of(doc, "monitor_interval_s")),
        options=options, budget=budget, precision=precision, source=source,
        file_hash=file_hash, catalogue=catalogue, warnings=warnings, k_sweep=k_sweep,
        devices=devices, one_cell_per_host=value_of(doc, "one_cell_per_host"),
        cluster=cluster, save_models=save_models, arrivals=arrivals,
        # the file actually merged: the campaign's, or the default one (engine.dirs)
        experiments_file_hash=(hashlib.sha256(Path(catalogue.sources[1]).read_bytes())
                               .hexdigest()[:16] if len(catalogue.sources) > 1 else ""))


def _check_stream_executors(executors: list[str], src: _Source, doc: dict[str, Any]) -> None:
    """A stream campaign's executors each serve streams (``ExecutorSpec.serves_streams``),
    pack onto no device list, and it sweeps no K (a stream's jobs are its templates' own).

    Raises:
        ConfigError: ``"<where>: key 'executors': '<name>' does not serve arrival streams
            yet (key 'arrivals'); ones that do: seq, mp, ray, unified_model"``; packing
            (``devices``) with a stream; an early-stopping ``scheduler`` (any but fifo) of
            any executor with a stream (ray's: Ray Tune's).
    """
    serving = [n for n in EXECUTORS.names() if EXECUTORS.get(n).serves_streams]
    for name in executors:
        if not EXECUTORS.get(name).serves_streams:
            raise ConfigError(f"{src.at('executors')}: key 'executors': {quoted(name)} does not serve "
                              f"arrival streams yet (key 'arrivals'); ones that do: "
                              f"{', '.join(serving)}")
    if "k_sweep" in doc:
        raise ConfigError(f"{src.at('k_sweep')}: key 'k_sweep' and key 'arrivals': a stream campaign "
                          "sweeps no K (its jobs are its templates' own)")
    options = doc.get("options")
    for name in executors:
        table = options.get(name) if isinstance(options, dict) else None
        # a stream's jobs are served whole, FIFO, by every executor: an early-stopping
        # scheduler is refused, not ignored (seq, mp and unified_model ran the stream with
        # it silently unused); ray's Tune schedulers would need the whole trial set up front
        chosen = table.get("scheduler") if isinstance(table, dict) else None
        if chosen not in (None, "fifo", ["fifo"]):
            why = ("Ray Tune's trial schedulers do not serve arrival streams (a stream's jobs "
                   "queue FIFO on ray's actor pool)" if name == "ray" else
                   f"early-stopping schedulers ("
                   f"{', '.join(map(quoted, chosen if isinstance(chosen, list) else [chosen]))}"
                   ") do not apply to arrival "
                   "streams (a stream's jobs are served whole, FIFO)")
            raise ConfigError(f"{src.where}: key 'scheduler' of [options.{name}] and key "
                              f"'arrivals': {why}")
        if isinstance(table, dict) and table.get("devices") is not None:
            raise ConfigError(f"{src.where}: key 'devices' of [options.{name}] and key "
                              "'arrivals': packing onto several devices does not serve "
                              "arrival streams yet")


def _stream_resolved(spec: StreamSpec) -> dict[str, Any]:
    """The ``arrivals`` key as the resolved campaign shows it."""
    if spec.process == "trace":
        return {"trace": spec.trace, "count": spec.count}
    return {"process": spec.process, "rate": spec.rate, "count": spec.count,
            "seed": spec.seed, "mix": dict(spec.mix)}


#: List-valued keys whose entries are checked by a check of their own: K values (ints).
_OWN_LIST_CHECK = ("k_sweep",)


def _check_lists(doc: dict[str, Any], src: _Source) -> None:
    """Every list-valued top-level key written as a list: no empty entry, none twice
    (:func:`~engine.define.campaign_schema.check_entries`), before any of them is read."""
    for k in KEYS.values():
        value = doc.get(k.name) if not k.table else None
        if isinstance(value, list) and k.name not in _OWN_LIST_CHECK:
            check_entries(value, src.at(k.name), k.name)


def _check_named_once(selector: Any, catalogue: Catalogue, where: str) -> None:
    """No experiment named twice by name or number (``["D_ens", "D_ens"]``, ``"1,E01"``):
    ranges and ``all`` are unions (``"E01:E05", "E03"`` selects five), a name given twice
    is a typo.

    Raises:
        ConfigError: ``"<where>: key 'experiments': 'E01' is listed twice ('1' and
            'E01'): give each once"``.
    """
    named: dict[str, str] = {}
    for item in selector if isinstance(selector, list) else [selector]:
        for part in (p.strip() for p in str(item).split(",")):
            if not part or part == "all" or ":" in part:
                continue
            exp_id = catalogue.select(part)[0]
            if exp_id in named:
                spelled = (quoted(exp_id) if named[exp_id] == part == exp_id
                           else f"{quoted(exp_id)} ({quoted(named[exp_id])} and {quoted(part)})")
                raise ConfigError(f"{where}: key 'experiments': {spelled} is listed twice: "
                                  "give each once (an experiment is one cell per executor "
                                  "already)")
            named[exp_id] = part


def _experiments_file(doc: dict[str, Any], src: _Source, base_dir: Path | None) -> str | None:
    """``experiments_file``, expanded and checked to exist (None: none). The file's value is
    relative to the campaign file; a command-line value to the working directory (where
    the shell, and the argument check, resolved it)."""
    user_file = doc.get("experiments_file")
    if not user_file:
        return None
    user_file = str(user_path(user_file, src.at("experiments_file") if "experiments_file" in
                              src.given else f"{src.where}: key 'experiments_file'"))
    if (base_dir is not None and "experiments_file" not in src.given
            and not Path(user_file).is_absolute()):
        user_file = str(base_dir / user_file)
    if not os.path.exists(user_file):  # a FIFO, a device: tomlfile says what it is
        raise ConfigError(f"{src.at('experiments_file')}: key 'experiments_file': no such file "
                          f"{user_file}")
    return user_file


def _executors(value: str | list[Any], where: str) -> list[str]:
    """``executors`` as a list of registered names (one name is a list of one)."""
    executors = [value] if isinstance(value, str) else value
    if not executors:
        raise ConfigError(f"{where}: key 'executors' must name at least one executor; "
                          f"{known(EXECUTORS.names())}")
    for name in executors:
        if not isinstance(name, str) or name not in EXECUTORS:
            raise ConfigError(f"{where}: unknown executor {shown(name)}"
                              f"{nearest(str(name), EXECUTORS.names())}; {known(EXECUTORS.names())}")
    return executors


def _check_declared(doc: dict[str, Any], src: _Source) -> None:
    """Each top-level key the campaign sets that declares choices or a bound, checked
    against them in declaration order (``passes``, ``retries``, ``threads``, ``compile``,
    ``compile_mode``, ``monitor_interval_s``, ...): a key added to the declaration with a
    bound is checked here without more code."""
    for k in KEYS.values():
        if k.table or k.name not in doc or k.name in _OWN_BOUND_CHECK:
            continue
        if k.choices or k.bound is not None:
            _refuse_threads_below_zero(k, doc[k.name], src)
            k.refuse(doc[k.name], src.at(k.name))


def _refuse_threads_below_zero(k: CampaignKey, value: Any, src: _Source) -> None:
    """``threads`` below 0, in words that say what 0 means."""
    if k.name == "threads" and value < 0:
        raise ConfigError(f"{src.at('threads')}: key 'threads' must be >= 0 (0 = all cores), "
                          f"got {value}")


def _placement(doc: dict[str, Any], src: _Source) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """``device`` and ``devices`` checked (one of them; one cpu or cuda:N device is exactly
    ``device``): ``doc`` without the replaced key, the device, the devices (a list)."""
    doc = check_device_pair(doc, src.given, src.where)
    devices: tuple[str, ...] = ()
    if "devices" in doc:
        devices = parse_devices(doc["devices"], src.at("devices"))
        if len(devices) == 1 and _DEVICE.match(devices[0]) and devices[0] != "auto":
            # one cpu or cuda:N device: exactly today's `device` (same keys, same runner)
            doc = {**doc, "device": devices[0]}
            devices = ()
    device = value_of(doc, "device")
    if not _DEVICE.match(device):
        raise ConfigError(f"{src.at('device')}: key 'device' must be auto, cpu, cuda or cuda:N, "
                          f"got {device!r}")
    return doc, device, devices


def _budget(table: dict[str, Any], where: str) -> dict[str, Any]:
    """``[budget]`` checked: known keys, sizes (``6GiB``, MiB) > 0, cores >= 1."""
    from engine.profile.budget import parse_cores, parse_size

    tomlfile.check_keys(table, key_types("budget"), where)
    for key, value in table.items():
        if key == "cores":
            parse_cores(value, f"{where}: key 'cores'")
        else:
            parse_size(value, f"{where}: key '{key}'")
    return dict(table)


def _watchdog(table: dict[str, Any], where: str) -> WatchdogSettings:
    """``[watchdog]`` checked: known keys and types, each declared bound and choice, and
    ``1 <= suspect_after <= hung_after``."""
    types = key_types("watchdog")
    tomlfile.check_keys(table, types, where)
    # TOML writes 10 for 10.0: a number key holds a float from here on
    values: dict[str, Any] = {k: (float(v) if isinstance(v, int) and types[k] == (float,)
                                  else v) for k, v in table.items()}
    settings = WatchdogSettings(**values)
    KEYS["watchdog.interval_s"].refuse(settings.interval_s, where)
    if not 1 <= settings.suspect_after <= settings.hung_after:
        raise ConfigError(f"{where}: need 1 <= suspect_after <= hung_after, got "
                          f"{settings.suspect_after} and {settings.hung_after}")
    for key in ("cpu_fraction", "gpu_busy_pct", "action"):
        KEYS[f"watchdog.{key}"].refuse(getattr(settings, key), where)
    return settings


def load_campaign(path: str | Path, overrides: dict[str, Any] | None = None) -> Campaign:
    """Read and validate a campaign file (see :func:`parse_campaign` for errors)."""
    path = Path(path)
    doc = tomlfile.load(path, kind="campaign file")
    file_hash = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return parse_campaign(doc, str(path), file_hash=file_hash, source=path,
                          overrides=overrides, base_dir=path.parent)


# COMPILE_CHOICES and COMPILE_MODES are declared in engine.define.campaign_schema; they are
# re-exported here, where importers found them before.
__all__ = ["COMPILE_CHOICES", "COMPILE_MODES", "MAX_PASSES", "Campaign", "load_campaign",
           "parse_campaign"]
