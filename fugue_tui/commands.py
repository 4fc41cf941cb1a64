"""``fugue-tui validate``, ``fugue-tui prefetch`` and ``fugue-tui run``.

* ``validate [SELECTOR]``: every catalogue experiment (or the selected ones) and whether it
  can run on this machine, with a one-line reason when not; then what is registered
  (models, datasets, tasks, optimizers, executors, workload types, plugins). Exit 0 for the
  listing; with a selector, 1 when a selected experiment cannot run here.
* ``prefetch [SELECTOR] [--data-dir DIR]``: download the datasets of the selected
  experiments (default all) into the data root, each into a temporary folder inside it that
  is renamed into place only once complete. Exit 2 when a dataset could not be fetched.
* ``run``: the harness's non-interactive form. It builds a campaign in memory (and, for an
  experiment described on the command line, an experiments file merged over the catalogue:
  ``engine.define.adhoc``), validates both exactly as a campaign file is validated, writes them to
  ``<runs_dir>/.adhoc/run-<selection>-<digest>.toml`` (named after their content: see
  ``_campaign_name``) and runs them through :func:`fugue_tui.batch.run_batch`, the code
  behind ``--batch``. Every usage error is one line, exit 2, with nothing written.

Torch-free at import (prefetch imports torchvision / scikit-learn inside the downloaders).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, FugueError

# --------------------------------------------------------------------------- shared


def _load_catalogue(experiments_file: str | None):
    from engine.define.catalogue import load_catalogue
    from engine.plugins import load_plugins

    load_plugins()
    return load_catalogue(experiments_file)


def _selected(catalogue, selector: list[str] | None, where: str) -> list[str]:
    return catalogue.select(selector, where=where) if selector else catalogue.ids()


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)


def _requires_hint(module: str) -> str:
    return ("pip install 'fugue-tui[vision]'" if module == "torchvision"
            else f"pip install {module}")


# --------------------------------------------------------------------------- validate


def validate(selector: list[str] | None = None, experiments_file: str | None = None,
             out=None) -> int:
    """Print what can run here and why not; see the module docstring for the exit status.

    Raises:
        ConfigError: a malformed experiments file, a plugin that cannot be imported, an
            unknown experiment in ``selector``.
    """
    from engine import registry
    from engine.define.availability import experiment_availability
    from engine.parts.dataset_files import data_root, root_note
    from engine.plugins import load_plugins
    from engine.define.validate import check_experiment
    from engine.define.workloads import WORKLOADS, expand

    out = out or sys.stdout
    catalogue = _load_catalogue(experiments_file)
    ids = _selected(catalogue, selector, "validate")
    width = max((len(i) for i in ids), default=2)
    print(f"experiments (data root {data_root()}, {root_note(None)}):", file=out)
    unavailable = []
    for exp_id in ids:
        exp = catalogue.get(exp_id)
        try:
            check_experiment(exp, 42, f"experiment {exp_id}")
            ok, reason = experiment_availability(exp)
        except FugueError as exc:
            ok, reason = False, f"invalid: {exc}"
        if ok:
            print(f"  {exp_id:<{width}}  ok", file=out)
            continue
        unavailable.append(exp_id)
        try:
            fetchable = any(ds in FETCHERS and ds in registry.DATASETS
                            and registry.DATASETS.get(ds).available(None) == (False, reason)
                            for ds in {job.dataset for job in expand(exp)})
        except Exception:  # an invalid experiment or a plugin's check: the reason says enough
            fetchable = False
        if fetchable:
            reason += f" (or: fugue-tui prefetch {exp_id})"
        print(f"  {exp_id:<{width}}  no: {reason}", file=out)
    print(file=out)
    models = []
    for name in registry.MODELS.names():
        needs = registry.MODELS.get(name).requires
        if needs and not _has_module(needs):
            models.append(f"{name} (needs {needs}: {_requires_hint(needs)})")
        else:
            models.append(name)
    print(f"models: {', '.join(models)}", file=out)
    datasets = []
    for name in registry.DATASETS.names():
        try:
            ok, _ = registry.DATASETS.get(name).available(None)
        except Exception:  # a plugin's check must not break the listing
            ok = False
        datasets.append(name if ok else f"{name} (missing)")
    print(f"datasets: {', '.join(datasets)}", file=out)
    print(f"tasks: {', '.join(registry.TASKS.names())}", file=out)
    print(f"optimizers: {', '.join(registry.OPTIMIZERS.names())}", file=out)
    print(f"executors: {', '.join(_executor_summary(n) for n in registry.EXECUTORS.names())}",
          file=out)
    print(f"workload types: {', '.join(WORKLOADS.names())}", file=out)
    plugins = load_plugins()
    print(f"plugins: {', '.join(plugins) if plugins else 'none (FUGUE_PLUGINS unset)'}", file=out)
    print(file=out)
    print(f"{len(ids) - len(unavailable)} of {len(ids)} experiments can run here", file=out)
    return 1 if selector and unavailable else 0


def _executor_summary(name: str) -> str:
    from engine.registry import EXECUTORS

    spec = EXECUTORS.get(name)
    opts = f" [options: {', '.join(spec.options)}]" if spec.options else ""
    return f"{name}{opts}"


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# --------------------------------------------------------------------------- prefetch

#: Datasets that scikit-learn ships: nothing to download.
BUNDLED = ("digits", "wine", "breast_cancer", "diabetes")
#: Seconds without a byte before a download is given up (urllib has no timeout by default).
SOCKET_TIMEOUT_S = 60.0
_TMP_PREFIX = ".prefetch-"


def _fetch_torchvision(cls_name: str, folder: str) -> Callable[[Path, Path], None]:
    """Download with torchvision's ``download=True`` into ``tmp`` and move ``tmp/folder``
    to ``root/folder``."""

    def fetch(tmp: Path, root: Path) -> None:
        if not _has_module("torchvision"):
            raise _Unfetchable(f"needs torchvision: {_requires_hint('torchvision')}")
        import torchvision

        cls = getattr(torchvision.datasets, cls_name)
        for train in (True, False):  # both splits (one archive for CIFAR, four files for MNIST)
            cls(root=str(tmp), train=train, download=True)
        _move_into_place(tmp / folder, root / folder, tmp)

    return fetch


def _fetch_cal_housing(tmp: Path, root: Path) -> None:
    if not _has_module("sklearn"):
        raise _Unfetchable("needs scikit-learn: pip install scikit-learn")
    import inspect

    from sklearn.datasets import fetch_california_housing

    kwargs: dict[str, Any] = {"data_home": str(tmp), "download_if_missing": True}
    if "n_retries" in inspect.signature(fetch_california_housing).parameters:
        kwargs.update(n_retries=1, delay=1.0)
    fetch_california_housing(**kwargs)
    _move_into_place(tmp / "cal_housing_py3.pkz", root / "cal_housing_py3.pkz", tmp)


#: Dataset name → ``fetch(tmp, root)``: downloads into ``tmp`` (inside ``root``), then moves
#: the finished files into place. Only the built-in datasets of these names.
FETCHERS: dict[str, Callable[[Path, Path], None]] = {
    "cifar10": _fetch_torchvision("CIFAR10", "cifar-10-batches-py"),
    "cifar100": _fetch_torchvision("CIFAR100", "cifar-100-python"),
    "mnist": _fetch_torchvision("MNIST", "MNIST"),
    "cal_housing": _fetch_cal_housing,
}


class _Unfetchable(Exception):
    """A dataset that cannot be fetched here for a reason other than the network."""


def _move_into_place(src: Path, dst: Path, tmp: Path) -> None:
    """Rename a finished download into place; an incomplete copy already there (the reason
    it was fetched) is moved aside into ``tmp`` first, and removed with it."""
    if not src.exists():
        raise _Unfetchable(f"the download finished without producing {src.name}")
    if os.path.lexists(dst):
        os.replace(dst, tmp / f"previous-{dst.name}")
    os.replace(src, dst)


def _is_network(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout,
                             socket.gaierror)):
            return True
        text = str(seen)
        if "Error downloading" in text or "urlopen error" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _clean_stale(root: Path) -> None:
    """Remove temporary folders that a killed prefetch left behind (their pid is gone)."""
    for path in root.glob(f"{_TMP_PREFIX}*"):
        found = re.match(rf"{re.escape(_TMP_PREFIX)}.+?-(\d+)-", path.name)
        if not found or not path.is_dir():
            continue
        try:
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (PermissionError, OverflowError):
            pass


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Downloaders print progress bars and per-mirror errors; the user gets one line."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(SOCKET_TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        socket.setdefaulttimeout(previous)


def prefetch(selector: list[str] | None = None, data_dir: str | None = None,
             experiments_file: str | None = None, out=None) -> int:
    """Fetch the datasets of the selected experiments; one line per dataset. Exit 0 when
    every dataset is present afterwards, 2 when one could not be fetched.

    Raises:
        ConfigError: unknown experiment, malformed experiments file, unusable data dir.
    """
    from engine import registry
    from engine.parts.dataset_files import data_root
    from engine.define.workloads import expand

    out = out or sys.stdout
    catalogue = _load_catalogue(experiments_file)
    ids = _selected(catalogue, selector, "prefetch")
    names: list[str] = []
    for exp_id in ids:
        for job in expand(catalogue.get(exp_id)):
            if job.dataset not in names:
                names.append(job.dataset)
    root = Path(data_dir).expanduser() if data_dir else data_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(f"not writable: {root}")
    except OSError as exc:
        raise ConfigError(f"prefetch: data dir {root}: {exc.strerror or exc}") from None
    _clean_stale(root)
    note = ""
    if data_dir and root.resolve() != data_root().resolve():
        note = f"; runs read FUGUE_DATA_DIR, so set FUGUE_DATA_DIR={root}"
    print(f"prefetching {_count(len(names), 'dataset')} of {_count(len(ids), 'experiment')} "
          f"into {root}{note}", file=out, flush=True)
    failed = left = 0
    for name in names:
        line, ok = _prefetch_one(name, root, registry.DATASETS)
        failed += ok is False
        left += ok is None
        print(f"{name}: {line}", file=out, flush=True)
    if left:
        print(f"{_count(left, 'dataset')} left to plugins (not fetched here)", file=out)
    if failed:
        print(f"{failed} of {_count(len(names), 'dataset')} could not be fetched", file=out)
    return 2 if failed else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _prefetch_one(name: str, root: Path, datasets) -> tuple[str, bool | None]:
    """``(line, True)`` present or fetched; ``(line, False)`` a fetch failed; ``(line,
    None)`` nothing this command can fetch (a dataset only a plugin provides or loads)."""
    if name not in datasets:
        return "not registered, skipped (a plugin must provide it: FUGUE_PLUGINS)", None
    spec = datasets.get(name)
    try:
        ok, reason = spec.available(root)
    except Exception as exc:  # a plugin's check
        ok, reason = False, f"availability check failed: {_one_line(exc)}"
    builtin = getattr(spec.load, "__module__", "") == "engine.parts.datasets"
    if ok:
        return ("bundled with scikit-learn, nothing to fetch" if builtin and name in BUNDLED
                else "present, skipped"), True
    if name not in FETCHERS or not builtin:
        return f"no download known for this dataset, skipped: {reason}", None
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-{os.getpid()}-", dir=root))
    started = time.monotonic()
    try:
        with _quiet():
            FETCHERS[name](tmp, root)
    except _Unfetchable as exc:
        return str(exc), False
    except KeyboardInterrupt:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:
        why = "download failed (no network?)" if _is_network(exc) else "download failed"
        return f"{why}: {_one_line(exc)}", False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok, reason = spec.available(root)
    if not ok:
        return f"downloaded, but still not usable: {reason}", False
    return f"downloaded into {root} ({time.monotonic() - started:.1f} s)", True


# --------------------------------------------------------------------------- run

#: Flags that set an option of some executors only: the flag, the option key it sets on
#: them, and the executors it applies to.
PLANNED_FLAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("--scheduler", "scheduler", ("ray",)),
    ("--sweep", "sweep", ("unified_model",)),
    ("--max-parallel", "max_parallel", ("mp", "ray", "unified_model")),
    ("--features", "features", ("unified_model",)),
)
#: Flags that describe an ad-hoc experiment (they need --model and --dataset).
ADHOC_FLAGS = ("type", "k", "task", "epochs", "batch_size", "lr", "optimizer", "search_space",
               "name")


def executors_epilog() -> str:
    """``fugue-tui run --help``'s epilog: each registered executor with its description and
    options (with their types and help), and the registered workload types."""
    from engine.define.campaign import PLANNED_EXECUTORS
    from engine.plugins import load_builtins, load_plugins
    from engine.registry import EXECUTORS
    from engine.define.workloads import WORKLOADS

    lines = []
    try:
        load_plugins()
    except FugueError as exc:
        load_builtins()
        lines.append(f"(plugins not loaded: {exc})")
    lines.append("executors (--exec; options: --option EXEC.KEY=VALUE, or [options.EXEC] in a "
                 "campaign file):")
    for name in EXECUTORS.names():
        spec = EXECUTORS.get(name)
        lines.append(f"  {name}  {spec.label}: {spec.description}".rstrip(": "))
        if not spec.options:
            lines.append("      (no options)")
        for key, types in spec.options.items():
            help_text = spec.option_help.get(key, "")
            lines.append(f"      {key} ({_type_names(types)}){': ' + help_text if help_text else ''}")
    missing = [n for n in PLANNED_EXECUTORS if n not in EXECUTORS]
    if missing:
        flags = "; ".join(f"{flag}: {', '.join(targets)}" for flag, _, targets in PLANNED_FLAGS)
        lines.append(f"  not built yet: {', '.join(missing)} ({flags})")
    lines.append(f"workload types (--type): {', '.join(WORKLOADS.names())}")
    return "\n".join(lines)


def add_run_arguments(run: argparse.ArgumentParser, at_least: Callable[[int], Any]) -> None:
    """The ``run`` sub-command's flags (dests prefixed ``run_`` where the top-level parser
    has a flag of the same name, so the two never overwrite each other)."""
    from engine.registry import EXECUTORS

    sel = run.add_argument_group("what to run (the product is the run matrix)")
    sel.add_argument("--exp", dest="run_exp", nargs="+", action="extend", metavar="SELECTOR",
                     help="catalogue experiments: E01, 1, E08:E10, E08:, :E05, 1,4,5 or all "
                          "(several allowed)")
    sel.add_argument("--exec", dest="run_exec", nargs="+", action="extend", metavar="EXECUTOR",
                     help="executors (several allowed; default seq): see below")
    sel.add_argument("--compile", dest="run_compile", nargs="?", const="on",
                     choices=("off", "on", "both"),
                     help="torch.compile: off (default), on (the flag alone), or both")
    sel.add_argument("--compile-mode", dest="run_compile_mode", metavar="MODE",
                     help="torch.compile mode (default, reduce-overhead, max-autotune, "
                          "max-autotune-no-cudagraphs)")
    sel.add_argument("--passes", dest="run_passes", metavar="N", type=at_least(1),
                     help="repeats of the whole matrix (default 1)")
    sel.add_argument("--option", dest="run_option", action="append", default=[],
                     metavar="EXEC.KEY=VALUE", help="an executor option (see below)")
    for flag, key, targets in PLANNED_FLAGS:
        kind = {"max_parallel": at_least(1)}.get(key, str)
        sel.add_argument(flag, dest=f"run_{key}", nargs="+" if key == "scheduler" else None,
                         choices={"scheduler": ("fifo", "asha", "median", "hyperband"),
                                  "sweep": ("none", "ablation")}.get(key),
                         type=kind, metavar=key.upper(),
                         help=f"for {' and '.join(targets)} only" + (
                             "" if all(t in EXECUTORS for t in targets) else " (not built yet)"))
    how = run.add_argument_group("how and where")
    how.add_argument("--seed", dest="run_seed", metavar="N", type=int, help="job i gets seed + i (default 42)")
    how.add_argument("--retries", dest="run_retries", metavar="N", type=at_least(0),
                     help="retries of a failed or hung cell (default 0)")
    how.add_argument("--resume", dest="run_resume", action="store_true",
                     help="skip cells whose key already has an ok row")
    how.add_argument("--since", dest="run_since", metavar="YYYYmmdd_HHMMSS",
                     help="with --resume: only ok rows at or after this time count")
    how.add_argument("--runs-dir", dest="run_runs_dir", metavar="DIR",
                     help="results folder (default runs)")
    how.add_argument("--device", dest="run_device", metavar="DEVICE", help="auto (default), cpu, cuda, cuda:N")
    how.add_argument("--threads", dest="run_threads", metavar="N", type=at_least(0),
                     help="torch threads per cell process (default 0 = all cores)")
    how.add_argument("--dry-run", dest="run_dry_run", action="store_true",
                     help="print the cells and their keys, run nothing, write nothing")
    how.add_argument("--experiments-file", dest="run_experiments_file", metavar="FILE",
                     help="a user experiments file merged over the catalogue")
    adhoc = run.add_argument_group(
        "an ad-hoc experiment (not in the catalogue; its rows carry exp_id adhoc or --name)")
    adhoc.add_argument("--model", dest="run_model", metavar="MODEL", nargs="+", action="extend", default=[],
                       help="model (several for --type multi_model, paired with --dataset)")
    adhoc.add_argument("--dataset", dest="run_dataset", metavar="DATASET", nargs="+", action="extend", default=[],
                       help="dataset (several for --type multi_model)")
    adhoc.add_argument("--type", dest="run_type", metavar="TYPE",
                       help="ensemble (default), cv, hpo (default with --search-space), "
                            "multi_model (default with several models/datasets), or a "
                            "plugin's type")
    adhoc.add_argument("--k", dest="run_k", metavar="K", type=int, help="jobs of an ensemble, folds of a cv "
                                                           "(default 5)")
    adhoc.add_argument("--task", dest="run_task", metavar="TASK", help="task (default: the dataset's)")
    adhoc.add_argument("--epochs", dest="run_epochs", metavar="N", type=int, help="default 10")
    adhoc.add_argument("--batch-size", dest="run_batch_size", metavar="N", type=int, help="default 64")
    adhoc.add_argument("--lr", dest="run_lr", metavar="LR", type=float, help="default 0.001")
    adhoc.add_argument("--optimizer", dest="run_optimizer", metavar="NAME", help="default adamw")
    adhoc.add_argument("--search-space", dest="run_search_space", nargs="+", action="extend",
                       metavar="KEY=V1,V2", help="hpo grid, e.g. lr=0.1,0.01 batch_size=64,128")
    adhoc.add_argument("--name", dest="run_name", metavar="ID", help="the experiment id (default adhoc)")


def run(args: argparse.Namespace) -> int:
    """``fugue-tui run``: build, validate, write and run the campaign (see the module
    docstring). Returns the exit status of :func:`fugue_tui.batch.run_batch`.

    Raises:
        ConfigError: any usage error, before anything is written.
    """
    from engine.define.adhoc import DEFAULT_NAME
    from engine.plugins import load_plugins
    from engine.results.preflight import preflight
    from fugue_tui.batch import run_batch

    def pick(own: str, top: str | None = None):
        value = getattr(args, own, None)
        return value if value is not None else (getattr(args, top, None) if top else None)

    if args.run_since and not args.run_resume:
        raise ConfigError("--since only applies with --resume")
    is_adhoc = bool(args.run_model or args.run_dataset)
    given = [f"--{name.replace('_', '-')}" for name in ADHOC_FLAGS
             if getattr(args, f"run_{name}") is not None]
    if given and not is_adhoc:
        verb = "describe" if len(given) > 1 else "describes"
        raise ConfigError(f"{', '.join(given)} {verb} an ad-hoc experiment: give --model and "
                          f"--dataset too (catalogue experiments are run as defined: --exp)")
    if not is_adhoc and not args.run_exp:
        raise ConfigError("nothing to run: give --exp SELECTOR (catalogue experiments, e.g. "
                          "--exp D_ens) and/or --model M --dataset D (an ad-hoc experiment)")
    load_plugins()
    executors = list(dict.fromkeys(args.run_exec or ["seq"]))
    options = _planned_flag_options(args, executors)
    for item in args.run_option:
        _add_option(options, item)
    experiments_file = pick("run_experiments_file", "experiments_file")
    if experiments_file and not Path(experiments_file).is_file():
        raise ConfigError(f"--experiments-file: no such file {experiments_file}")
    exp_name = args.run_name or DEFAULT_NAME
    selection = list(args.run_exp or [])
    experiments_doc = None
    if is_adhoc:
        experiments_doc = _adhoc_document(args, exp_name, experiments_file)
        selection.append(exp_name)
    runs_dir = pick("run_runs_dir", "runs_dir") or "runs"
    doc: dict[str, Any] = {
        "description": "generated by fugue-tui run", "experiments": selection,
        "executors": executors, "passes": pick("run_passes", "passes"),
        "seed": pick("run_seed", "seed"), "runs_dir": runs_dir,
        "device": pick("run_device", "device"), "compile": args.run_compile,
        "compile_mode": args.run_compile_mode, "threads": args.run_threads,
        "retries": pick("run_retries", "retries"), "options": options or None,
    }
    if experiments_doc is None and experiments_file:
        doc["experiments_file"] = str(Path(experiments_file).resolve())
    doc = {key: value for key, value in doc.items() if value is not None}
    adhoc_dir = Path(runs_dir) / ".adhoc"
    name, doc = _campaign_name(selection, doc, experiments_doc, adhoc_dir)
    with tempfile.TemporaryDirectory(prefix="fugue-run-") as tmp:
        path = _write(Path(tmp), name, doc, experiments_doc)
        _check(path, exp_name)  # every usage error surfaces here, before anything is written
        if args.run_dry_run:
            return _rewrite_errors(
                lambda: run_batch(str(path), {}, dry=True,
                                  shown=f"fugue-tui run (campaign {name})"), path, exp_name)
    preflight(runs_dir)  # an unwritable runs path: one line, exit 2, nothing written
    final = _write(adhoc_dir, name, doc, experiments_doc)
    return run_batch(str(final), {}, dry=False, resume=args.run_resume, since=args.run_since)


def _planned_flag_options(args: argparse.Namespace, executors: list[str]) -> dict[str, dict]:
    """Executor flags (``--scheduler``, ``--sweep``, ``--max-parallel``) as options of the
    run's executors that declare them. A flag that no executor of the run uses is ignored
    with a warning (the run is not duplicated); one whose executors are not built in this
    version is an error."""
    from engine.registry import EXECUTORS

    options: dict[str, dict[str, Any]] = {}
    for flag, key, targets in PLANNED_FLAGS:
        value = getattr(args, f"run_{key}")
        if value is None:
            continue
        names = " and ".join(f"'{t}'" for t in targets)
        built = [t for t in targets if t in EXECUTORS]
        if not built:
            plural = "executors" if len(targets) > 1 else "executor"
            verb = "are" if len(targets) > 1 else "is"
            raise ConfigError(f"{flag} applies to {plural} {names}, which {verb} not built yet")
        used = [t for t in built if t in executors]
        if not used:
            print(f"fugue-tui: warning: {flag} applies to {names}, which this run does not use "
                  f"(--exec {' '.join(executors)}): ignored", file=sys.stderr)
            continue
        values = value if isinstance(value, list) else [value]
        for target in used:
            spec = EXECUTORS.get(target)
            if key not in spec.options:
                raise ConfigError(f"{flag}: executor '{target}' declares no option '{key}'")
            if len(values) > 1 and key not in spec.axes:
                raise ConfigError(f"{flag}: one value per run (got {' '.join(map(str, values))})")
            options.setdefault(target, {})[key] = values if len(values) > 1 else values[0]
    return options


def _add_option(options: dict[str, dict[str, Any]], item: str) -> None:
    from engine.define.adhoc import parse_value

    target, dot, rest = item.partition(".")
    key, eq, value = rest.partition("=")
    if not dot or not eq or not target or not key.strip():
        raise ConfigError(f"--option: expected EXEC.KEY=VALUE (e.g. seq.key=1), got {item!r}")
    options.setdefault(target, {})[key.strip()] = parse_value(value)


def _adhoc_document(args: argparse.Namespace, exp_name: str,
                    experiments_file: str | None) -> dict[str, Any]:
    from engine.define.adhoc import adhoc_table, check_name, experiments_document, parse_search_space
    from engine.define.catalogue import load_catalogue
    from engine.registry import DATASETS, MODELS, OPTIMIZERS, TASKS

    check_name(exp_name, load_catalogue(experiments_file).ids())
    for flag, names, reg in (("--model", args.run_model, MODELS),
                             ("--dataset", args.run_dataset, DATASETS),
                             ("--optimizer", [args.run_optimizer] if args.run_optimizer else [],
                              OPTIMIZERS),
                             ("--task", [args.run_task] if args.run_task else [], TASKS)):
        for value in names:
            reg.get(value, flag)  # a typo on the command line: the nearest name
    space = parse_search_space(args.run_search_space) if args.run_search_space else None
    for key, reg in (("model", MODELS), ("dataset", DATASETS), ("optimizer", OPTIMIZERS),
                     ("task", TASKS)):
        for value in (space or {}).get(key, []):
            if isinstance(value, str):
                reg.get(value, f"--search-space {key}")
    table = adhoc_table(models=args.run_model, datasets=args.run_dataset, type=args.run_type,
                        k=args.run_k, task=args.run_task, epochs=args.run_epochs,
                        batch_size=args.run_batch_size, lr=args.run_lr,
                        optimizer=args.run_optimizer, search_space=space)
    return experiments_document(exp_name, table, experiments_file)


def _campaign_name(selection: list[str], doc: dict[str, Any],
                   experiments_doc: dict[str, Any] | None,
                   adhoc_dir: Path) -> tuple[str, dict[str, Any]]:
    """The generated campaign's name and document (``doc`` with ``name`` and, for an ad-hoc
    experiment, ``experiments_file``).

    The name is ``run-<selection>-<digest>``: file-safe (``E08:E10`` → ``run-E08-E10-...``),
    at most 80 chars; ``digest`` is the first 8 hex digits of a hash of everything the
    generated campaign and experiments file say. The same flags give the same name, so a
    run continues its folder (``--resume``) as a campaign file does; any other definition
    gets a run folder and generated files of its own, so an earlier run's files, the
    provenance of its rows, are never overwritten (should ``adhoc_dir`` hold other text
    under the 8-digit name, more digits are used)."""
    import hashlib
    import json

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(s.replace(",", "_") for s in selection))
    slug = slug.strip("-_") or "run"
    if len(slug) > 60:
        digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
        slug = f"{slug[:50]}-{digest}"
    definition = json.dumps({"campaign": doc, "experiments": experiments_doc},
                            sort_keys=True, default=str)
    digest = hashlib.sha256(definition.encode()).hexdigest()
    for length in (8, 16, 64):
        name = f"run-{slug}-{digest[:length]}"
        named = {"name": name, **doc}
        if experiments_doc is not None:
            named["experiments_file"] = f"{name}.experiments.toml"
        texts = _texts(name, named, experiments_doc)
        if all(_text_or_none(adhoc_dir / file) in (None, text) for file, text in texts.items()):
            break
    return name, named


def _text_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _texts(name: str, doc: dict[str, Any],
           experiments_doc: dict[str, Any] | None) -> dict[str, str]:
    """The generated files by name: the campaign and, for an ad-hoc experiment, its
    experiments file."""
    import tomli_w

    texts = {f"{name}.toml": tomli_w.dumps(doc)}
    if experiments_doc is not None:
        texts[f"{name}.experiments.toml"] = tomli_w.dumps(experiments_doc)
    return texts


def _write(folder: Path, name: str, doc: dict[str, Any],
           experiments_doc: dict[str, Any] | None) -> Path:
    """Write the campaign (and the ad-hoc experiments file next to it) atomically."""
    texts = _texts(name, doc, experiments_doc)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for file in sorted(texts, key=lambda f: f == f"{name}.toml"):  # the campaign last
            _atomic(folder / file, texts[file])
    except OSError as exc:
        from engine.errors import OutputError

        raise OutputError(f"cannot write the generated campaign under {folder}: "
                          f"{exc.strerror or exc}") from None
    return folder / f"{name}.toml"


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _check(path: Path, exp_name: str) -> None:
    from engine.define.campaign import load_campaign

    _rewrite_errors(lambda: load_campaign(path), path, exp_name)


def _rewrite_errors(call: Callable[[], Any], path: Path, exp_name: str) -> Any:
    """Run ``call``; a ConfigError naming the generated files is re-raised naming what the
    user typed instead (``run``, ``ad-hoc experiment 'adhoc'``)."""
    try:
        return call()
    except ConfigError as exc:
        message = str(exc)
        exp_file = str(path.with_name(f"{path.stem}.experiments.toml"))
        message = message.replace(f"{exp_file}: experiments.{exp_name}",
                                  f"ad-hoc experiment '{exp_name}'")
        message = message.replace(exp_file, "ad-hoc experiments").replace(str(path), "run")
        # campaign keys back to the flags that set them
        message = message.replace("run: experiments:", "--exp:")
        message = re.sub(r"\brun: (unknown executor|executor ')", r"--exec: \1", message)
        message = re.sub(r"\brun: options\.", "--option ", message)
        message = re.sub(r"\brun: key '(\w+)'",
                         lambda m: "--" + m.group(1).replace("_", "-"), message)
        raise ConfigError(message) from None
