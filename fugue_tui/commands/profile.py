"""``fugue-tui profile [SELECTION]`` and ``fugue-tui simulate [SELECTION]``: measure this
machine's memory profiles, and say how many jobs of each experiment fit at once per
executor (``engine.profile``; docs/profiles.md).

Bad input (an unknown experiment, a budget that is not a size or not > 0, an unknown
executor) is one line and exit 2, checked before anything runs or is written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

from engine.bounds import DEFAULT_SEED
from engine.errors import ConfigError, known, nearest
from fugue_tui.commands.arguments import integer

SIMULATED = ("seq", "mp", "ray", "unified_model")


def _machine(device_text: str | None) -> tuple[str, dict[str, Any] | None]:
    """The device under test (``auto`` → cuda when NVML sees one) and its NVML identity."""
    from engine.measure.nvml import resolve_gpu
    from engine.measure.provenance import nvml_devices, resolve_device

    device_text = device_text or "auto"
    if device_text not in ("auto", "cpu", "cuda") and not device_text.startswith("cuda:"):
        raise ConfigError(f"argument --device: must be auto, cpu, cuda or cuda:N, got "
                          f"{device_text!r}")
    device = resolve_device(device_text)
    if device.startswith("cuda") and not nvml_devices():
        raise ConfigError(f"argument --device: '{device_text}': no NVIDIA GPU is visible here "
                          "(NVML finds none)")
    try:
        return device, resolve_gpu(device, os.environ)
    except ValueError as exc:
        raise ConfigError(f"argument --device: {exc}") from None


def _jobs(selector: list[str], experiments_file: str | None, seed: int,
          where: str, precisions: dict[str, str | None] | None = None
          ) -> dict[str, list[dict[str, Any]]]:
    """The selected experiments' jobs; ``precisions``, when given, receives each
    experiment's own ``precision`` (None: not set)."""
    from engine.define.workloads import expand
    from fugue_tui.commands.common import load_catalogue_and_plugins

    catalogue = load_catalogue_and_plugins(experiments_file)
    ids = catalogue.select(selector, where=where) if selector else catalogue.ids()
    if precisions is not None:
        precisions.update({exp_id: getattr(catalogue.get(exp_id), "precision", None)
                           for exp_id in ids})
    return {exp_id: [j.to_dict() for j in expand(catalogue.get(exp_id), seed)]
            for exp_id in ids}


def _starts(text: str) -> list[str]:
    """``--mp-start``: ``forkserver``, ``spawn`` or both, comma-separated (one estimate
    per value, as a campaign's ``start`` list gets).

    Raises:
        ConfigError: another value (one line naming the flag).
    """
    starts = list(dict.fromkeys(p.strip() for p in str(text).split(",") if p.strip()))
    bad = [s for s in starts if s not in ("forkserver", "spawn")]
    if bad or not starts:
        raise ConfigError(f"argument --mp-start: {text!r}: forkserver, spawn or "
                          f"forkserver,spawn{nearest(bad[0], ('forkserver', 'spawn')) if bad else ''}")
    return starts


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(p) for p in text.split(",") if p.strip()}))
    except ValueError:
        raise ConfigError(f"argument --ks: expected stack sizes like 1,2,4, got {text!r}") from None
    if ks[:1] != (1,) or len([k for k in ks if k >= 2]) < 2:
        raise ConfigError(f"argument --ks: 1 and at least two stacked sizes (>= 2: the "
                          f"increment per member is measured from them), got {text!r}")
    if ks[-1] > 256:
        raise ConfigError(f"argument --ks: at most 256 members, got {ks[-1]}")
    return ks


def _compile(text: str | None) -> str:
    from engine.define.campaign import COMPILE_MODES

    mode = text or "off"
    if mode != "off" and mode not in COMPILE_MODES:
        raise ConfigError(f"argument --compile: must be off or one of {', '.join(COMPILE_MODES)}"
                          f", got {mode!r}{nearest(mode, COMPILE_MODES)}")
    return mode


def profile(args: Any, out=None) -> int:
    """``fugue-tui profile``: see the module docstring; ``--list`` prints the file."""
    from engine.define.paths import user_path
    from engine.profile.collect import collect
    from engine.profile.store import identity

    out = out or sys.stdout
    runs_dir = user_path(args.profile_runs_dir or args.runs_dir or "runs", "argument --runs-dir")
    if args.list:
        device, gpu = _machine(args.profile_device or args.device)
        return list_profiles(runs_dir, identity(device, gpu), out)
    ks = _ks(args.ks)
    compile_mode = _compile(args.compile)
    jobs = _jobs(args.selector, args.experiments_file_sub or args.experiments_file,
                 args.seed or DEFAULT_SEED, "profile")
    device, gpu = _machine(args.profile_device or args.device)
    from engine.results.preflight import preflight

    preflight(runs_dir)  # an unwritable runs folder: one line, exit 2, nothing measured
    ident = identity(device, gpu)
    from fugue_tui.console.profile_progress import ProfileProgress

    progress = ProfileProgress(ks, out)  # a live line on a terminal, else a line per K
    with _terminate_as_interrupt():
        try:
            rows = collect(jobs, runs_dir=runs_dir, device=device, ident=ident,
                           gpu_uuid=(gpu or {}).get("uuid"), compile_mode=compile_mode,
                           threads=args.threads or 0, ks=ks, max_steps=args.max_steps,
                           say=progress.say, progress=progress)
        finally:
            progress.close()
    print(f"{len(rows)} profile(s) written to {runs_dir / 'profiles.csv'}", file=out)
    return 0


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM and SIGHUP (``timeout 10 fugue-tui profile ...``, a closed terminal) stop the
    profile as Ctrl-C does — the probe's process group ended, its temp folder removed,
    exit 130 — instead of killing this process and leaving the probe behind."""
    def interrupt(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def list_profiles(runs_dir, ident: dict[str, str], out) -> int:
    """``profile --list``: every profile in the runs folder, those of another machine or
    stack marked (they are not used here)."""
    from engine.profile.store import IDENTITY, key_text, profiles_path, read_profiles

    found = read_profiles(runs_dir, warned := [])
    for note in warned:  # rows left out (damaged, impossible): never silent
        print(f"fugue-tui: warning: {note}", file=sys.stderr)
    if not found:
        print(f"no profiles in {profiles_path(runs_dir)} (fugue-tui profile SELECTION)",
              file=out)
        return 0
    print(f"{profiles_path(runs_dir)}: {len(found)} profile(s); this machine: "
          f"{ident['host']} {ident['device']} {ident['gpu_name'] or ''} torch {ident['torch']}"
          f"{' CUDA ' + ident['cuda'] if ident['cuda'] else ''}", file=out)
    for p in found:
        other = [k for k in IDENTITY if p.identity[k] != ident[k]]
        dev = p.by_k("device_reserved_mb").get(1)
        figures = [f"RSS(1) {_n(p.num('rss1_mb'))} MiB",
                   f"+{_n(p.num('rss_per_member_mb'))} MiB/member",
                   f"step {_n(p.num('step_time_ms'), '.1f')} ms"]
        if dev is not None:
            figures += [f"device {_n(dev)} MiB + context {_n(p.num('device_context_mb'))}",
                        f"+{_n(p.num('device_per_member_mb'))} MiB/member"]
        mark = (f"  [ignored here: another {', '.join(other)}]" if other else "")
        if p.row.get("load_warning"):  # its step time is not a quiet machine's
            mark += f"  [measured busy: {p.row['load_warning']}]"
        print(f"  {p.id}  {p.row.get('timestamp', '')}  {key_text(p.key)}: "
              f"{', '.join(figures)}{mark}", file=out)
    return 0


def _n(x: float | None, fmt: str = ".0f") -> str:
    return "n/a" if x is None else format(x, fmt)


def simulate(args: Any, out=None) -> int:
    """``fugue-tui simulate``: per experiment and executor, fits-at-once, the limiting
    resource and the predicted memory at that K."""
    from engine.define.paths import user_path
    from engine.profile.auto import estimate_cell
    from engine.profile.budget import SAFETY_MARGIN, host_available_mb, make_budget
    from engine.profile.store import identity, read_profiles

    out = out or sys.stdout
    runs_dir = user_path(args.profile_runs_dir or args.runs_dir or "runs", "argument --runs-dir")
    executors = _executors(args.executors)
    budget_args = {"ram": args.ram_budget, "device": args.device_budget, "cores": args.cores}
    for flag, value in (("--ram-budget", args.ram_budget), ("--device-budget",
                                                            args.device_budget)):
        if value is not None:  # checked before the catalogue: the flag named, one line
            from engine.profile.budget import parse_size

            parse_size(value, f"argument {flag}")
    if args.cores is not None:
        from engine.profile.budget import parse_cores

        parse_cores(args.cores, "argument --cores")
    compile_mode = _compile(args.compile)
    starts = _starts(args.mp_start)
    own: dict[str, str | None] = {}
    jobs = _jobs(args.selector, args.experiments_file_sub or args.experiments_file,
                 args.seed or DEFAULT_SEED, "simulate", own)
    device, gpu = _machine(args.profile_device or args.device)
    ident = identity(device, gpu)
    budget = make_budget(**budget_args, gpu_uuid=(gpu or {}).get("uuid"), where="simulate")
    profiles = read_profiles(runs_dir, warned := [])
    for note in warned:  # rows left out (damaged, impossible): never silent
        print(f"fugue-tui: warning: {note}", file=sys.stderr)
    usable = budget.usable("ram")
    dev = (f"device {budget.device_mb:.0f} MiB ({budget.source('device')}; "
           f"{budget.usable('device'):.0f} usable)" if budget.device_mb else "device: none (CPU)")
    print(f"budget: RAM {budget.ram_mb:.0f} MiB ({budget.source('ram')}; {usable:.0f} usable; "
          f"{host_available_mb():.0f} available now), {dev}, cores {budget.cores} "
          f"({budget.source('cores')}); safety margin {SAFETY_MARGIN:.0%} of each memory "
          f"budget", file=out)
    print(f"profiles: {runs_dir / 'profiles.csv'}; device {device}, compile {compile_mode}",
          file=out)
    said: set[str] = set()
    from engine.profile.precision_model import effective

    for exp_id, exp_jobs in jobs.items():
        precision = args.precision or own.get(exp_id)
        ran = effective(precision, device, any(j.get("amp") for j in exp_jobs))
        print(f"\n{exp_id} ({len(exp_jobs)} jobs) at {ran}", file=out)
        print(f"  {'executor':<14}{'fits at once':>13}  {'limiting':<9}{'RAM MiB':>9}"
              f"{'device MiB':>12}  profile", file=out)
        rows = [(e, s if e == "mp" and len(starts) > 1 else None,
                 s) for e in executors for s in (starts if e == "mp" else starts[:1])]
        for executor, shown_start, start in rows:
            est, ids, notes = estimate_cell(exp_jobs, executor, compile_mode=compile_mode,
                                            device=device, profiles=profiles, ident=ident,
                                            budget=budget, mp_start=start,
                                            precision=precision)
            name = f"{executor} {shown_start}" if shown_start else executor
            for note in notes:
                if note not in said:
                    said.add(note)
                    print(f"  note: {note}", file=out)
            if est is None and executor not in ("mp", "ray", "unified_model"):
                print(f"  {name:<14}{1:>13}  {'executor':<9}{'':>9}{'':>12}  none needed",
                      file=out)
                continue
            if est is None:
                print(f"  {name:<14}{'all ' + str(len(exp_jobs)):>13}  {'no profile':<9}"
                      f"{'':>9}{'':>12}  none: {ids[0]}", file=out)
                continue
            print(f"  {name:<14}{est.k:>13}  {est.limiting:<9}{_n(est.ram_mb):>9}"
                  f"{_n(est.device_mb):>12}  {','.join(ids)}", file=out)
            for note in est.notes:
                if note not in said:
                    said.add(note)
                    print(f"    ({name}: {note})", file=out)
    return 0


def _executors(names: list[str] | None) -> list[str]:
    from engine.registry import EXECUTORS

    chosen = names or [n for n in SIMULATED if n in EXECUTORS]
    for name in chosen:
        if name not in EXECUTORS:
            raise ConfigError(f"argument --executors: unknown executor {name!r}"
                              f"{nearest(name, EXECUTORS.names())}; {known(EXECUTORS.names())}")
    return chosen


def _add_common(parser: Any) -> None:
    """What ``profile`` and ``simulate`` share: the selection, the runs folder holding
    profiles.csv, the device and compile mode the profiles are keyed by."""
    import argparse

    from fugue_tui.commands.arguments import add_experiments_file

    parser.add_argument("selector", nargs="*", metavar="SELECTOR",
                        help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all (default all)")
    parser.add_argument("--runs-dir", dest="profile_runs_dir", metavar="DIR",
                        help="the runs folder holding profiles.csv (default runs)")
    parser.add_argument("--device", dest="profile_device", metavar="DEVICE",
                        help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--compile", metavar="MODE",
                        help="off (default) or a torch.compile mode: profiles are per mode")
    parser.add_argument("--seed", dest="seed", type=integer, help=argparse.SUPPRESS)
    add_experiments_file(parser, "experiments_file_sub")


def add_parsers(sub) -> None:
    """``profile`` and ``simulate``: memory profiles and how many jobs fit at once."""
    from fugue_tui.commands.arguments import at_least, precision_names

    parser = sub.add_parser(
        "profile", help="measure memory profiles: peak RSS of 1, 2, 4, 8 stacked jobs (--ks), device "
                        "memory, step time (per model, dataset, batch, precision, compile, "
                        "optimizer)",
        description="For each distinct (model, dataset, batch size, precision, compile, "
                    "optimizer) of the selected experiments, a brief run (one epoch) in a fresh "
                    "process measures peak RSS for K = 1, 2, 4, 8 stacked members (the increment "
                    "per member), on a GPU the CUDA context, one dataset copy and peak device "
                    "memory, and the median step time. Rows go to RUNS_DIR/profiles.csv, keyed "
                    "by this machine (host, GPU, torch, CUDA). max_parallel = \"auto\" and "
                    "fugue-tui simulate read them.")
    _add_common(parser)
    parser.add_argument("--list", action="store_true",
                        help="list the profiles in the runs folder (measure nothing)")
    parser.add_argument("--ks", default="1,2,4,8", metavar="LIST",
                        help="stack sizes measured: 1 and at least two stacked sizes "
                             "(default 1,2,4,8)")
    parser.add_argument("--max-steps", type=at_least(2), metavar="N",
                        help="stop each K after N training steps (default: one epoch, "
                             "validation included)")
    parser.add_argument("--threads", type=at_least(0), metavar="N",
                        help="torch threads of the probe (default all cores)")
    sim = sub.add_parser(
        "simulate", help="how many jobs fit at once per experiment and executor, from the "
                         "profiles and a budget",
        description="From this machine's profiles and the budget (measured here unless "
                    "given): per experiment and executor, how many jobs fit at once, the "
                    "limiting resource and the predicted memory at that number. The same "
                    "estimate as max_parallel = \"auto\". Writes nothing.")
    _add_common(sim)
    sim.add_argument("--ram-budget", metavar="SIZE",
                     help="host RAM the jobs may use: 6GiB, 512MiB or MiB (default: "
                          "this machine's total)")
    sim.add_argument("--device-budget", metavar="SIZE",
                     help="device memory (default: the GPU's total)")
    sim.add_argument("--cores", metavar="N", help="cores (default: os.cpu_count)")
    sim.add_argument("--executors", nargs="+", metavar="EXECUTOR",
                     help=f"default: {' '.join(SIMULATED)}")
    sim.add_argument("--mp-start", default="forkserver", metavar="START[,START]",
                     help="mp's start method: forkserver (workers share the parent's "
                          "pages), spawn, or forkserver,spawn for an estimate of each")
    sim.add_argument("--precision", choices=precision_names(),
                     help="the precision the cells would run (default: each "
                          "experiment's own; bf16 without a bf16 profile scales the "
                          "fp32 one, docs/profiles.md)")
