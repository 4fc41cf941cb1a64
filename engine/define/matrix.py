"""Campaign → ordered cells. Torch-free.

Order: passes outermost, then experiments (selection order), executors (campaign order),
compile modes. Passes outermost interleaves strategies in time, so slow drift of the
machine (thermals, background load) spreads over all of them instead of biasing one.
Executor axes (``engine.define.axes``): ray's ``scheduler`` option expands hpo experiments into one
cell per scheduler (other workloads run once, without one); unified_model's ``sweep =
"ablation"`` replaces the compile axis by the six rungs of the ablation ladder, each with its
own compile setting and requested features.
A K sweep (``k_sweep``, ``engine.define.ksweep``) runs each ensemble at every K of the
list: within a pass, experiment, then K, then executor. A swept cell's definition is the
experiment at that K, so K enters its keys (all three) through the hashed definition and
jobs, and only when swept: a campaign without ``k_sweep`` hashes what it always did. A
swept cell at the catalogue's own K is that very configuration and shares its keys.

A cell's key is a hash of its resolved configuration (experiment definition, jobs,
executor and options, compile mode, seed, pass) plus the machine identity, so resume
matches exactly what was asked on this machine, never a look-alike string. An option that
declares a ``legacy`` value (``engine.define.executor_options.option``: mp's ``start``) is
keyed by what it resolves to, and only when that is not the legacy behaviour; declared as
an axis too, a list of values runs one cell each (``start = ["forkserver", "spawn"]``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from engine import precision as precision_lib
from engine.bounds import MAX_CELLS, MAX_PLANNED_JOBS
from engine.define.campaign import Campaign
from engine.define.executor_options import NO_LEGACY
from engine.define.save_models import cell_save_models
from engine.define.sha_slots import check_sha_slots
from engine.define.workloads import expand
from engine.errors import ConfigError


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
    #: Requested unified-model features (``vf:1,s:0,fl:0``), None for other executors.
    features: str | None = None
    #: Most jobs at once (the executor's ``max_parallel`` option); None = all jobs.
    max_parallel: int | None = None
    #: Hash of the configuration without the pass: rows of the same configuration pool
    #: across passes and campaigns, and only those (engine.results.analysis).
    config_key: str = ""
    #: Hash of what every executor of the cell's experiment shares (experiment definition,
    #: jobs, seed, threads): a strategy's seq baseline must have the same one.
    workload_key: str = ""
    #: The values of the options this cell's campaign sweeps as a list (mp's ``start``),
    #: e.g. ``forkserver``: in the slug and label; None when none is swept.
    variant: str | None = None
    #: The requested precision (``engine.precision``): the campaign's axis value,
    #: else the experiment's default; None when neither is set (the jobs' legacy ``amp``
    #: flags decide). Hashed only off the legacy behaviour (``precision.hashed``).
    precision: str | None = None
    #: The cell's K when the campaign sweeps K (``k_sweep``): in the slug (``-k8``) and
    #: label (``K=8``); None when K is not swept (the experiment's own K, no new name).
    k: int | None = None
    #: How ``max_parallel`` was decided (``engine.profile.auto``): ``user`` (a number
    #: written), ``profile`` (``"auto"`` estimated from this machine's profiles) or ``all``
    #: (absent, or ``"auto"`` without a profile); None for executors without the option.
    max_parallel_method: str | None = None
    #: The profiles (``profile_id``, comma-separated) an ``"auto"`` estimate used.
    max_parallel_profile: str | None = None
    #: One line each for the user about that decision (a missing profile, another
    #: machine's ignored); the front ends print each distinct line once.
    notes: list[str] = field(default_factory=list)
    #: Which jobs' weights the cell writes after its group window (issue 50,
    #: ``engine.define.save_models``): ``"false"``, ``"true"`` or ``"best"``. Never hashed.
    save_models: str = "false"
    #: A stream cell's arrival times (issue 51, ``engine.define.arrivals``): seconds after
    #: its group window opens, one per job in ``jobs`` order; None: a batch cell.
    arrivals: list[float] | None = None
    #: A stream cell's stream: ``sha256``, ``templates``, ``count``, ``process`` (and
    #: ``rate``) — what its rows and report name it by; None: a batch cell.
    stream: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        parts = [self.exp_id, self.executor]
        if self.k is not None:
            parts.append(f"K={self.k}")
        if self.variant:
            parts.append(self.variant)
        if self.rung:
            parts.append(f"rung {self.rung}")
        if self.scheduler:
            parts.append(self.scheduler)
        if self.compile_mode != "off":
            parts.append(f"compile={self.compile_mode}")
        if self.precision not in (None, "fp32"):
            parts.append(self.precision)
        return " ".join(parts) + f" pass {self.pass_index}"

    @property
    def slug(self) -> str:
        """A folder name: ``003-D_ens-seq-p1``."""
        comp = "" if self.compile_mode == "off" else f"-c{self.compile_mode}"
        shown = self.precision if self.precision != "fp32" else None
        extra = "".join(f"-{v}" for v in (self.scheduler, self.rung, self.variant, shown) if v)
        extra = extra.replace("+", "")
        if self.k is not None:
            extra = f"-k{self.k}{extra}"
        return f"{self.index:03d}-{self.exp_id}-{self.executor}{extra}{comp}-p{self.pass_index}"


def cell_key(config: dict[str, Any], machine: dict[str, Any]) -> str:
    """16 hex digits of sha256 over canonical JSON of the configuration and machine."""
    return _digest({"config": config, "machine": machine})


def _dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces (what every key hashes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _digest(doc: dict[str, Any]) -> str:
    return hashlib.sha256(_dumps(doc).encode()).hexdigest()[:16]


def _split_json(doc: dict[str, Any], texts: dict[str, str], at: str) -> tuple[str, str]:
    """``_dumps(doc)`` cut after the entry ``at``: ``(head, tail)``, ``head + tail`` equal to
    it byte for byte. ``texts`` holds entries already serialised (the jobs: megabytes for
    K = 4096), so that a plan serialises them once per experiment, not once per cell."""
    entries = [f"{json.dumps(key)}:{texts[key] if key in texts else _dumps(doc[key])}"
               for key in sorted(doc)]
    cut = sorted(doc).index(at) + 1
    return "{" + ",".join(entries[:cut]), "".join("," + e for e in entries[cut:]) + "}"


def _sha(*parts: str) -> Any:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode())
    return hasher


def check_plan_size(campaign: Campaign) -> None:
    """A campaign plans at most :data:`~engine.bounds.MAX_CELLS` cells and
    :data:`~engine.bounds.MAX_PLANNED_JOBS` jobs in all (``engine.bounds``), counted from
    each experiment's K and each executor's variants, before any job is expanded.

    Raises:
        ConfigError: naming the campaign file, the count and the bound.
    """
    assert campaign.catalogue is not None
    cells = jobs = 0
    for exp_id in campaign.experiments:
        exp = campaign.catalogue.get(exp_id)
        sizes = list(campaign.k_sweep) or [exp.k]
        for executor in campaign.executors:
            table = dict(campaign.options.get(executor, {}))
            n = (len(_variants(campaign, exp.type, executor, table))
                 * len(_option_points(executor, table, exp.type))
                 * len(campaign.precision or [None]))
            cells += n * campaign.passes * len(sizes)
            jobs += n * campaign.passes * sum(sizes)
    where = str(campaign.source) if campaign.source else "campaign"
    shape = (f"{len(campaign.experiments)} experiments x {len(campaign.executors)} executors "
             f"and their variants x {campaign.passes} passes")
    if cells > MAX_CELLS:
        raise ConfigError(f"{where}: the campaign plans {cells} cells ({shape}): at most "
                          f"{MAX_CELLS} (README, \"Bounds\"); select fewer experiments, "
                          "executors or passes")
    if jobs > MAX_PLANNED_JOBS:
        raise ConfigError(f"{where}: the campaign plans {jobs} jobs in all ({shape}): at most "
                          f"{MAX_PLANNED_JOBS} (README, \"Bounds\"); select fewer experiments, "
                          "executors or passes, or smaller K")


@dataclass(frozen=True)
class HostShare:
    """What one cell of a multi-device campaign may use of the host (issue 27): the cores of
    its device's share (``engine.runner.placement.split_cores``: the host's cores split
    between ``devices`` concurrent cells; the host's RAM is split between them too) and a
    device of the campaign's GPU model, whose total memory budgets ``max_parallel =
    "auto"`` (every device is of one model)."""

    cores: int
    devices: int
    gpu_uuid: str = ""


def build_cells(campaign: Campaign, machine: dict[str, Any],
                share: HostShare | None = None) -> list[CellSpec]:
    """Expand ``campaign`` into its cells (see the module docstring for order and keys).
    ``share``: a multi-device campaign's per-cell share of the host, which
    ``max_parallel = "auto"`` budgets with instead of the whole host (None: one device).

    Each experiment is expanded and serialised once; the keys of its cells hash the same
    canonical JSON as :func:`cell_key`, the part up to the jobs hashed once per
    configuration and continued per pass (a hash state copied), so that the largest legal
    plan is built in about a second.

    Raises:
        ConfigError: the plan is larger than the bounds of :func:`check_plan_size`.
    """
    assert campaign.catalogue is not None
    if campaign.arrivals is not None:
        return _stream_cells(campaign, machine, share)
    check_plan_size(campaign)
    machine_text = ',"machine":' + _dumps(machine) + "}"
    from engine.define.ksweep import at_size

    # Per experiment, the sizes it runs at: each K of the sweep, or its own K (None).
    sizes: list[int | None] = list(campaign.k_sweep) or [None]
    shared: dict[tuple[str, int | None],
                 tuple[dict[str, Any], list[dict[str, Any]], dict[str, str], str]] = {}
    precisions: dict[tuple[str, int | None], list[tuple[str | None, dict[str, str]]]] = {}
    # the campaign's precisions, or one None: each experiment's own
    requested: list[str | None] = list(campaign.precision) if campaign.precision else [None]
    for exp_id in campaign.experiments:
        for size in sizes:
            exp = campaign.catalogue.get(exp_id)
            exp = exp if size is None else at_size(exp, size)
            experiment = exp.to_dict()
            jobs = [job.to_dict() for job in expand(exp, campaign.seed)]
            texts = {"experiment": _dumps(experiment), "jobs": _dumps(jobs)}
            workload = {"experiment": experiment, "jobs": jobs, "seed": campaign.seed,
                        "threads": campaign.threads}
            head, tail = _split_json(workload, texts, "jobs")
            shared[exp_id, size] = (experiment, jobs, texts, _sha(head, tail).hexdigest()[:16])
            # The precision axis: the campaign's values, else the experiment's default
            # (None: the legacy amp flags). A campaign value is hashed only off what runs
            # without it.
            jobs_amp = [bool(j.get("amp")) for j in jobs]
            precisions[exp_id, size] = [
                (p or exp.precision,
                 # hashed() is False for None: said again for the type
                 {"precision": p} if p is not None
                 and precision_lib.hashed(p, jobs_amp, exp.precision) else {})
                for p in requested]
    configs: dict[tuple[Any, ...], tuple[Any, str]] = {}
    cells: list[CellSpec] = []
    parallel = _ParallelResolver(campaign, machine, share)
    packing = _PackingResolver()
    for pass_index in range(1, campaign.passes + 1):
        for exp_id, size in ((e, s) for e in campaign.experiments for s in sizes):
            experiment, jobs, texts, workload_key = shared[exp_id, size]
            exp_type = experiment["type"]
            for executor in campaign.executors:
                given = dict(campaign.options.get(executor, {}))
                for point, (precision, hashed) in itertools.product(
                        _variants(campaign, exp_type, executor, given), precisions[exp_id, size]):
                    cell_table = _cell_table(executor, given, point)
                    # Packing (engine.executors.packing): the cell gets the UUIDs, the key
                    # the GPU models they resolve to (Cell keys, rule 3).
                    cell_table, packed_key = packing.resolve_table(cell_table)
                    point = {**point, **hashed}
                    for options, literal, resolved, variant in _option_points(
                            executor, cell_table, exp_type):
                        # "auto" becomes the number it resolves to before anything is
                        # hashed (Cell keys, rule 3): the cell keys as if that number was
                        # written. Per cell, after the option axes expand: each value of
                        # mp's start list, and each precision, gets its own estimate.
                        options, how = parallel.resolve(exp_id, executor, jobs, options,
                                                        point["compile_mode"], precision)
                        if given.get("max_parallel") == "auto":
                            from engine.define.executor_options import key_options
                            from engine.registry import EXECUTORS

                            literal, resolved = key_options(
                                EXECUTORS.get(executor).option_fields, options, exp_type)
                        if packed_key is not None:
                            literal = {**literal, "devices": packed_key}
                        config = {"experiment": experiment, "jobs": jobs,
                                  "executor": executor, "options": literal,
                                  "seed": campaign.seed, "pass": pass_index,
                                  "threads": campaign.threads, **point}
                        if resolved:  # only off the legacy behaviour: old keys stay
                            config["resolved"] = resolved
                        # Everything before "jobs" in key order is the same in every pass.
                        head, tail = _split_json(config, texts, "jobs")
                        memo = (exp_id, size, executor, _dumps(point), _dumps(literal),
                                _dumps(resolved))
                        if memo not in configs:
                            unpassed = {k: v for k, v in config.items() if k != "pass"}
                            configs[memo] = (_sha('{"config":', head),
                                             _sha(*_split_json(unpassed, texts, "jobs")
                                                  ).hexdigest()[:16])
                        prefix, config_key = configs[memo]
                        key = prefix.copy()
                        key.update((tail + machine_text).encode())
                        cells.append(CellSpec(
                            index=len(cells) + 1, exp_id=exp_id, executor=executor,
                            pass_index=pass_index, key=key.hexdigest()[:16],
                            experiment=experiment, jobs=jobs, options=options,
                            max_parallel=options.get("max_parallel"),
                            config_key=config_key, workload_key=workload_key,
                            variant=variant, k=size, **how,
                            save_models=cell_save_models(
                                campaign.save_models,
                                campaign.catalogue.get(exp_id).save_models),
                            **{**point, "precision": precision}))
    # sha with fewer slots than trials would deadlock at its first rung: refused now.
    check_sha_slots(cells, str(campaign.source) if campaign.source else "campaign")
    return cells


#: The exp_id, slug and group row ``mode`` of a stream cell (issue 51).
STREAM_ID = "stream"


def _check_trace_jobs(stream: list[Any], trace: str | None, campaign: Campaign) -> None:
    """A trace's overrides against what its jobs can take, at load as an experiments
    file's are: a ``batch_size`` above the job's training samples failed every cell at
    run time (one line now, naming the trace's arrival; exit 2, nothing written)."""
    from engine.define.validate import check_batch_size
    from engine.define.workloads import JobSpec

    where = str(campaign.source) if campaign.source else "campaign"
    for arrival in stream:
        job = JobSpec.from_dict(arrival.job)
        check_batch_size(job, f"{where}: key 'arrivals': trace {trace}: arrival "
                              f"{arrival.index + 1} ({arrival.experiment}, job {job.job_id})")


def _stream_cells(campaign: Campaign, machine: dict[str, Any],
                  share: HostShare | None = None) -> list[CellSpec]:
    """A stream campaign's cells (issue 51): per pass, per executor and its variants
    (compile modes, option axes, precision), one cell serving the whole stream.

    Its keys hash, in place of the experiment and its jobs, the resolved stream once:
    ``"arrivals": {"sha256": <the stream's hash>, "templates": [ids], "seed": <the key's
    own seed, only when it sets one>}`` (the sha256 covers every arrival time and each
    job's configuration and seed, ``engine.define.arrivals``); the rest as a batch cell's
    (executor, options, seed, pass, threads, the variant's point). ``workload_key``: the
    same without the executor, its options, the point and the pass.

    Raises:
        ConfigError: the plan is larger than the bounds of :func:`check_plan_size`.
    """
    from engine.define.arrivals import generate, stream_sha256

    assert campaign.catalogue is not None and campaign.arrivals is not None
    spec = campaign.arrivals
    stream = generate(spec, campaign.catalogue, campaign.seed)
    if spec.process == "trace":
        _check_trace_jobs(stream, spec.trace, campaign)
    sha = stream_sha256(stream)
    templates = spec.templates
    jobs = [a.job for a in stream]
    times = [a.time_s for a in stream]
    keyed: dict[str, Any] = {"sha256": sha, "templates": templates}
    if spec.seed is not None:
        keyed["seed"] = spec.seed
    info: dict[str, Any] = {"sha256": sha, "templates": templates, "count": len(stream),
                            "process": spec.process,
                            **({"rate": spec.rate} if spec.rate is not None else {})}
    # the templates' definitions ride along (not hashed: the stream's sha256 covers the
    # jobs they made) so that a row can say what an hpo template's trial was
    experiment = {"id": STREAM_ID, "type": STREAM_ID, "size": None, "templates": templates,
                  "definitions": {t: campaign.catalogue.get(t).to_dict() for t in templates}}
    workload_key = _digest({"arrivals": keyed, "seed": campaign.seed,
                            "threads": campaign.threads})
    where = str(campaign.source) if campaign.source else "campaign"
    parallel = _ParallelResolver(campaign, machine, share)
    requested: list[str | None] = list(campaign.precision) if campaign.precision else [None]
    cells: list[CellSpec] = []
    for pass_index in range(1, campaign.passes + 1):
        for executor in campaign.executors:
            given = dict(campaign.options.get(executor, {}))
            for point, precision in itertools.product(
                    _variants(campaign, STREAM_ID, executor, given), requested):
                cell_table = _cell_table(executor, given, point)
                point = {**point, **({"precision": precision} if precision else {})}
                for options, literal, resolved, variant in _option_points(
                        executor, cell_table, STREAM_ID):
                    options, how = parallel.resolve(STREAM_ID, executor, jobs, options,
                                                    point["compile_mode"], precision)
                    if given.get("max_parallel") == "auto":  # hashed as the number (rule 3)
                        from engine.define.executor_options import key_options
                        from engine.registry import EXECUTORS

                        literal, resolved = key_options(
                            EXECUTORS.get(executor).option_fields, options, STREAM_ID)
                    config: dict[str, Any] = {
                        "arrivals": keyed, "executor": executor, "options": literal,
                        "seed": campaign.seed, "pass": pass_index,
                        "threads": campaign.threads, **point}
                    if resolved:
                        config["resolved"] = resolved
                    unpassed = {k: v for k, v in config.items() if k != "pass"}
                    cells.append(CellSpec(
                        index=len(cells) + 1, exp_id=STREAM_ID, executor=executor,
                        pass_index=pass_index, key=cell_key(config, machine),
                        experiment=experiment, jobs=jobs, options=options,
                        max_parallel=options.get("max_parallel"),
                        config_key=_digest(unpassed), workload_key=workload_key,
                        variant=variant, **how, save_models=campaign.save_models,
                        arrivals=times, stream=info, **point))
                    if len(cells) > MAX_CELLS:
                        raise ConfigError(f"{where}: the campaign plans more than "
                                          f"{MAX_CELLS} cells (README, \"Bounds\")")
    return cells


#: The budget's ``cores`` / ``ram`` source when a multi-device campaign's cell share set it.
SHARE_SOURCE = "share: the host's {what} split between {n} devices"


class _PackingResolver:
    """mp's ``devices`` of each cell, resolved once per plan (NVML in this process's
    environment: an outer ``CUDA_VISIBLE_DEVICES`` is indexed into)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[list[str], list[str]]] = {}

    def resolve_table(self, table: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """``(table with devices as GPU UUIDs, the key's value of devices)``; the table as
        given and None when it has no ``devices``.

        Raises:
            ConfigError: a device that does not resolve (the campaign check said so first).
        """
        value = table.get("devices")
        if value is None:
            return table, None
        from engine.measure import gpu_pool as packing

        memo = _dumps(value)
        if memo not in self._memo:
            try:
                found = packing.resolve(value)
            except ValueError as exc:
                raise ConfigError(f"options: key 'devices': {exc}") from None
            self._memo[memo] = ([d.uuid for d in found], packing.key_value(found))
        uuids, keyed = self._memo[memo]
        return {**table, "devices": list(uuids)}, keyed


class _ParallelResolver:
    """``max_parallel`` of each cell (``engine.profile.auto``): profiles and the budget are
    read once per plan, and only when some executor asks for ``"auto"``.

    With a :class:`HostShare` (a multi-device campaign) the budget's cores and RAM are the
    cell's share, not the host's (its cells run side by side, each pinned to its own cores
    and all in one RAM: a whole-host budget would let every cell start a process per host
    core and fill the host's memory), its device memory that of the campaign's GPU model,
    and a profile counts when measured on this host and stack with a GPU of that model,
    whichever device it ran on (the key's rule for these campaigns: host and model, never
    the UUID). The method is then ``profile-share`` when a share was used (``[budget]``
    ``cores`` and ``ram`` both given: ``profile``).
    """

    def __init__(self, campaign: Campaign, machine: dict[str, Any],
                 share: HostShare | None = None):
        self.campaign, self.machine, self.share = campaign, machine, share
        self._loaded: tuple[Any, Any, dict[str, str]] | None = None
        #: (experiment, jobs, executor, compile mode, mp start, precision) -> the resolution
        self._memo: dict[tuple[str, int, str, str, str, str | None], Any] = {}
        #: profile rows left out (damaged, impossible): told with each "auto" cell
        self._read_notes: list[str] = []

    def _context(self) -> tuple[Any, Any, dict[str, str]]:
        if self._loaded is None:
            from engine.profile.budget import make_budget
            from engine.profile.store import read_profiles, torch_cuda_version

            machine = self.machine
            device = str(machine.get("device", "cpu"))
            ident = {"host": str(machine.get("host", "")),
                     "device": "cuda" if device.startswith("cuda") else "cpu",
                     "gpu_name": str(machine.get("gpu_name") or ""),
                     "gpu_uuid": str(machine.get("gpu_uuid") or ""),
                     "torch": str(machine.get("torch", "")), "cuda": torch_cuda_version()}
            where = (f"{self.campaign.source}: budget" if self.campaign.source else "budget")
            share, given = self.share, dict(self.campaign.budget)
            budget = make_budget(**given, gpu_uuid=(share.gpu_uuid if share else None)
                                 or ident["gpu_uuid"] or None, where=where)
            profiles = read_profiles(self.campaign.runs_dir, self._read_notes)
            if share is not None:
                # What the host measured is shared by the cells running at once (one per
                # device); a value given in [budget] is one cell's already (make_budget).
                split = {r: SHARE_SOURCE.format(what=f"{how} {r}", n=share.devices)
                         for r, how in (("cores", "pinned"), ("ram", budget.source("ram")))
                         if given.get(r) is None and share.devices > 1}
                if split:
                    budget = dataclasses.replace(
                        budget, cores=share.cores if "cores" in split else budget.cores,
                        ram_mb=budget.ram_mb / share.devices if "ram" in split
                        else budget.ram_mb,
                        sources=tuple((r, split.get(r, how)) for r, how in budget.sources))
                # by model: a profile's UUID is not compared (``ident`` has none)
                from engine.profile.store import Profile

                profiles = [Profile({**p.row, "gpu_uuid": ""}) for p in profiles]
            self._loaded = (profiles, budget, ident)
        return self._loaded

    def resolve(self, exp_id: str, executor: str, jobs: list[dict[str, Any]],
                table: dict[str, Any], compile_mode: str, precision: str | None = None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The options table of one cell (its option axes expanded: one ``start``) with
        ``max_parallel`` resolved for its start method and ``precision``, and the CellSpec
        fields that say how (``max_parallel_method``, ``max_parallel_profile``,
        ``notes``)."""
        from engine.profile.auto import AUTO, resolve
        from engine.registry import EXECUTORS

        if "max_parallel" not in EXECUTORS.get(executor).option_fields:
            return table, {}
        value = table.get("max_parallel")
        if value != AUTO:
            return table, {"max_parallel_method": "user" if value is not None else "all"}
        start = table.get("start", "forkserver")
        start = start if isinstance(start, str) else "forkserver"
        # a K sweep: one per K; a start list and a precision list: one per value
        memo = (exp_id, len(jobs), executor, compile_mode, start, precision)
        if memo not in self._memo:
            profiles, budget, ident = self._context()
            self._memo[memo] = resolve(
                AUTO, jobs, executor, compile_mode=compile_mode,
                device=str(self.machine.get("device", "cpu")), profiles=profiles,
                ident=ident, budget=budget, mp_start=start, precision=precision)
        found = self._memo[memo]
        method = found.method
        budget = self._context()[1]
        if method == "profile" and any(budget.source(r).startswith("share")
                                       for r in ("cores", "ram")):
            method = "profile-share"  # estimated with the cell's share of the host
        return ({**table, "max_parallel": found.k},
                {"max_parallel_method": method,
                 "max_parallel_profile": ",".join(found.profiles) or None,
                 "notes": [*self._read_notes, *found.notes]})


def _option_points(executor: str, table: dict[str, Any], workload: str | None = None
                   ) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], str | None]]:
    """The cells of one executor's options table along its legacy-declared axis options
    (a list runs one cell per value; one value, or none, one cell): for each, the options
    the cell reads (one value per option), what of them is hashed (``key_options``: the
    literal table without legacy-declared options, and their non-legacy resolved values),
    and the variant text for the slug and label: the values of the swept options
    (``forkserver``; a boolean by the option's name, ``reuse_actors`` or
    ``no-reuse_actors``), None when nothing is swept — so neither a single value nor a new
    default renames a cell's folder. Options that do not apply to ``workload`` (ray's
    ``reuse_actors`` outside hpo) neither expand nor enter the key."""
    import itertools

    from engine.define.executor_options import key_options
    from engine.registry import EXECUTORS

    fields = EXECUTORS.get(executor).option_fields
    # ``scheduler`` is the matrix's own axis (:func:`_variants`), never swept here.
    swept = [name for name, f in fields.items()
             if f.axis and f.legacy is not NO_LEGACY and f.applies(workload)
             and isinstance(table.get(name), list) and name != "scheduler"]
    out = []
    for values in itertools.product(*(dict.fromkeys(table[n]) for n in swept)):
        options = {**table, **dict(zip(swept, values, strict=False))}
        literal, resolved = key_options(fields, options, workload)
        variant = "-".join(_variant_text(n, v) for n, v in zip(swept, values, strict=False)) or None
        out.append((options, literal, resolved, variant))
    return out


def _variant_text(name: str, value: Any) -> str:
    """A swept option's value as the slug and label name it: a boolean by the option's
    name (``reuse_actors``, ``no-reuse_actors``), anything else by its value."""
    if isinstance(value, bool):
        return name if value else f"no-{name}"
    return str(value)


def _variants(campaign: Campaign, exp_type: str, executor: str,
              options: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells of one experiment × executor: compile modes × its own axes.

    Keys of each point: ``compile_mode``, and where they apply ``scheduler``, ``rung`` and
    ``features`` (None values are left out, so cell keys of executors without axes do not
    change when axes are added).
    """
    from engine.define.axes import ABLATION_LADDER, DEFAULT_FEATURES
    from engine.registry import EXECUTORS

    spec = EXECUTORS.get(executor)
    axes = spec.option_axes
    if "sweep" in axes and options.get("sweep") == "ablation":
        return [{"compile_mode": campaign.compile_mode if r.compile else "off", "rung": r.name,
                 "features": r.features} for r in ABLATION_LADDER]
    points: list[dict[str, Any]] = [{"compile_mode": m} for m in campaign.compile_modes()]
    if "sweep" in axes:
        features = options.get("features") or DEFAULT_FEATURES
        points = [{**p, "features": features} for p in points]
    if "scheduler" in axes and exp_type == "hpo":
        # The declared default (ray: fifo); an executor whose options are dicts (a plugin)
        # declares none and gets fifo, as before typed options.
        declared = spec.option_fields.get("scheduler")
        chosen = options.get("scheduler") or (declared and declared.default) or ["fifo"]
        chosen = chosen if isinstance(chosen, list) else [chosen]
        # A scheduler added to an executor after keys were pinned (seq, mp, unified_model:
        # legacy "fifo") leaves its legacy value out of the point: those cells keep the
        # keys they had (docs/measurement.md, "Cell keys", rule 1). Ray's always entered.
        legacy = declared.legacy if declared is not None else NO_LEGACY
        points = [{**p, "scheduler": name} if name != legacy else dict(p)
                  for p in points for name in dict.fromkeys(chosen)]
    return points


def _cell_table(executor: str, table: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The options table one cell reads: a legacy-declared ``scheduler`` list (seq, mp,
    unified_model) is already expanded by :func:`_variants`, so each cell holds its own
    value (and its key hashes that, never the list)."""
    from engine.registry import EXECUTORS

    declared = EXECUTORS.get(executor).option_fields.get("scheduler")
    if (declared is None or declared.legacy is NO_LEGACY
            or not isinstance(table.get("scheduler"), list)):
        return table
    return {**table, "scheduler": point.get("scheduler", declared.legacy)}
