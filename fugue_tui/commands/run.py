"""``fugue-tui run``: the harness's non-interactive form. It builds a campaign in memory (and,
for an experiment described on the command line, an experiments file merged over the
catalogue: ``engine.define.adhoc``), validates both exactly as a campaign file is validated,
writes them to ``<runs_dir>/.adhoc/run-<selection>-<digest>.toml`` (named after their content:
see :func:`fugue_tui.commands.run_campaign.campaign_name`) and runs them through
:func:`fugue_tui.console.batch.run_batch`, the code behind ``--batch``. Every usage error is one line,
exit 2, with nothing written. The flags are declared in :mod:`fugue_tui.commands.run_flags`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.define import campaign_schema
from engine.errors import ConfigError
from fugue_tui.commands.arguments import regular_file
from fugue_tui.commands.run_campaign import (
    campaign_name,
    check_campaign,
    rewrite_errors,
    user_words,
    write_campaign,
)
from fugue_tui.commands.run_flags import ADHOC_FLAGS, PLANNED_FLAGS


def run(args: argparse.Namespace) -> int:
    """``fugue-tui run``: build, validate, write and run the campaign (see the module
    docstring). Returns the exit status of :func:`fugue_tui.console.batch.run_batch`.

    Raises:
        ConfigError: any usage error, before anything is written.
    """
    from engine.define.adhoc import DEFAULT_NAME
    from engine.define.paths import user_path
    from engine.plugins import load_plugins
    from engine.results.preflight import preflight
    from fugue_tui.console.batch import run_batch

    def pick(own: str, top: str | None = None):
        value = getattr(args, own, None)
        return value if value is not None else (getattr(args, top, None) if top else None)

    if args.run_json and not args.run_dry_run:
        raise ConfigError("--json applies with --dry-run (the plan as JSON)")
    if pick("run_device", "device") is not None and pick("run_devices", "devices") is not None:
        raise ConfigError("arguments --device and --devices: give one of them (--device D is "
                          "--devices D with one device)")
    if args.run_since and not args.run_resume:
        raise ConfigError("--since only applies with --resume")
    if getattr(args, "run_reuse_any", False) and not args.run_resume:
        raise ConfigError("--reuse-from-any-campaign only applies with --resume")
    if getattr(args, "run_remeasure_holes", False) and not args.run_resume:
        raise ConfigError("--remeasure-holes only applies with --resume")
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
    # without --exec: the campaign's declared default executors, as a campaign file without
    # the key runs
    # the campaign's check refuses an executor given twice (--exec seq seq), as in a file
    executors = list(args.run_exec or campaign_schema.default("executors"))
    options = _planned_flag_options(args, executors)
    for item in args.run_option:
        _add_option(options, item)
    experiments_file = pick("run_experiments_file", "experiments_file")
    if experiments_file:  # the check every --experiments-file takes (a FIFO, a NUL byte)
        try:
            regular_file(experiments_file)
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"--experiments-file: {exc}") from None
    if args.run_name is not None and not args.run_name.strip():
        raise ConfigError("--name is empty: give an experiment id (letters, digits, '.', '_', "
                          f"'-'), or leave --name out for '{DEFAULT_NAME}'")
    exp_name = args.run_name or DEFAULT_NAME
    selection = list(args.run_exp or [])
    experiments_doc = None
    if is_adhoc:
        experiments_doc = _adhoc_document(args, exp_name, experiments_file)
        selection.append(exp_name)
    # Expanded once, here (engine.define.paths): the generated files, the pre-flight check
    # and the campaign all name the same folder; "" is refused, not read as "runs".
    # The text itself when there is nothing to expand: it is hashed into the run's name,
    # which must not change for `--runs-dir runs/` between versions (--resume finds it).
    runs_dir = pick("run_runs_dir", "runs_dir")
    if runs_dir is None:
        runs_dir = "runs"
    else:
        expanded = user_path(runs_dir, "--runs-dir")  # refuses "", expands a leading ~
        if runs_dir.startswith("~"):
            runs_dir = str(expanded)
    doc: dict[str, Any] = {
        "description": "generated by fugue-tui run", "experiments": selection,
        "executors": executors, "passes": pick("run_passes", "passes"),
        "seed": pick("run_seed", "seed"), "runs_dir": runs_dir,
        "device": pick("run_device", "device"), "devices": pick("run_devices", "devices"),
        "compile": args.run_compile,
        "compile_mode": args.run_compile_mode, "threads": args.run_threads,
        "retries": pick("run_retries", "retries"), "options": options or None,
        # argparse's extend gives a list of lists (each value may be a comma list)
        "precision": ([p for group in args.run_precision for p in group]
                      if args.run_precision else None),
        "k_sweep": _k_sweep(getattr(args, "run_k_sweep", None)),
        "save_models": getattr(args, "run_save_models", None),
    }
    if experiments_doc is None and experiments_file:
        doc["experiments_file"] = str(Path(experiments_file).resolve())
    doc = {key: value for key, value in doc.items() if value is not None}
    adhoc_dir = Path(runs_dir) / ".adhoc"
    name, doc = campaign_name(selection, doc, experiments_doc, adhoc_dir)
    with tempfile.TemporaryDirectory(prefix="fugue-run-") as tmp:
        path = write_campaign(Path(tmp), name, doc, experiments_doc)
        # every usage error surfaces here, before anything is written
        check_campaign(path, exp_name)
        if args.run_dry_run:
            return rewrite_errors(
                lambda: run_batch(str(path), {}, dry=True,
                                  shown=f"fugue-tui run (campaign {name})",
                                  as_json=args.run_json,
                                  words=lambda text: _flag_words(args, user_words(text, path, exp_name))),
                path, exp_name)
    preflight(runs_dir)  # an unwritable runs path: one line, exit 2, nothing written
    final = write_campaign(adhoc_dir, name, doc, experiments_doc)
    return run_batch(str(final), {}, dry=False, resume=args.run_resume, since=args.run_since,
                     reuse_any=getattr(args, "run_reuse_any", False),
                     remeasure_holes=getattr(args, "run_remeasure_holes", False),
                     words=lambda text: _flag_words(args, user_words(text, final, exp_name)))


def _flag_words(args: argparse.Namespace, text: str) -> str:
    """``--option ray.scheduler`` in a message as ``--scheduler`` when that flag set it."""
    for flag, key, targets in PLANNED_FLAGS:
        if getattr(args, f"run_{key}", None) is not None:
            for target in targets:
                text = text.replace(f"--option {target}.{key}", flag)
    return text


def _planned_flag_options(args: argparse.Namespace, executors: list[str]) -> dict[str, dict]:
    """Executor flags (``--scheduler``, ``--sweep``, ``--max-parallel``) as options of the
    run's executors that declare them. A flag that no executor of the run uses is ignored
    with a warning (the run is not duplicated)."""
    from engine.registry import EXECUTORS

    options: dict[str, dict[str, Any]] = {}
    for flag, key, targets in PLANNED_FLAGS:
        value = getattr(args, f"run_{key}")
        if value is None:
            continue
        names = " and ".join(f"'{t}'" for t in targets)
        used = [t for t in targets if t in EXECUTORS and t in executors]
        if not used and key == "max_parallel" and value == "auto":
            # Nothing to estimate: one job at a time is what seq is (the rule).
            raise ConfigError(f"{flag} auto: {' and '.join(executors)} run one job at a "
                              f"time; auto applies to {names}")
        if not used:
            print(f"fugue-tui: warning: {flag} applies to {names}, which this run does not use "
                  f"(--exec {' '.join(executors)}): ignored", file=sys.stderr)
            continue
        given = value if isinstance(value, list) else [value]
        for target in used:
            spec = EXECUTORS.get(target)
            if key not in spec.option_fields:
                raise ConfigError(f"{flag}: executor '{target}' declares no option '{key}'")
            # Each executor gets the values it takes (--scheduler fifo sha: seq both, ray
            # fifo); a value no executor of the run takes is an error.
            allowed = spec.option_fields[key].choices
            values = [v for v in given if not allowed or v in allowed]
            if not values:
                continue
            if len(values) > 1 and key not in spec.option_axes:
                raise ConfigError(f"{flag}: one value per run (got {' '.join(map(str, values))})")
            options.setdefault(target, {})[key] = values if len(values) > 1 else values[0]
        taken = set()
        for t in used:
            set_to = options.get(t, {}).get(key)
            taken.update(set_to if isinstance(set_to, list) else [set_to])
        for v in given:
            if v not in taken:
                raise ConfigError(f"{flag}: '{v}' applies to none of --exec "
                                  f"{' '.join(executors)}")
    return options


def _k_sweep(text: str | None) -> list[int] | None:
    """``--k-sweep 1,2,4``: the list of K (the campaign checks its rules: increasing,
    >= 1, ensembles only).

    Raises:
        ConfigError: a value that is not a comma-separated list of integers.
    """
    if text is None:
        return None
    from engine.define.comma import comma_parts
    from fugue_tui.commands.arguments import INTEGER

    parts = comma_parts(text, "--k-sweep")
    try:
        if not parts or not all(INTEGER.fullmatch(p) for p in parts):  # ASCII: not '١'
            raise ValueError(text)
        return [int(p) for p in parts]
    except ValueError:
        raise ConfigError(f"--k-sweep: expected comma-separated integers such as 1,2,4,8, "
                          f"got {text!r}") from None


def _add_option(options: dict[str, dict[str, Any]], item: str) -> None:
    from engine.define.adhoc import parse_value

    target, dot, rest = item.partition(".")
    key, eq, value = rest.partition("=")
    if not dot or not eq or not target or not key.strip():
        raise ConfigError(f"--option: expected EXEC.KEY=VALUE (e.g. seq.key=1), got {item!r}")
    from engine.registry import EXECUTORS

    field = (EXECUTORS.get(target).option_fields.get(key.strip())
             if target in EXECUTORS.names() else None)
    if field is not None and list in field.types and not field.axis and value.strip() != "auto":
        # a list-valued option (mp's devices): EXEC.KEY=a,b is the list [a, b]
        options.setdefault(target, {})[key.strip()] = [
            parse_value(v) for v in value.split(",") if v.strip()]
        return
    options.setdefault(target, {})[key.strip()] = parse_value(value)


def _adhoc_document(args: argparse.Namespace, exp_name: str,
                    experiments_file: str | None) -> dict[str, Any]:
    from engine.define.adhoc import (
        adhoc_table,
        check_name,
        experiments_document,
        parse_search_space,
    )
    from engine.define.catalogue import load_catalogue
    from engine.define.search_space import values_of
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
        for value in values_of((space or {}).get(key, [])):
            if isinstance(value, str):
                reg.get(value, f"--search-space {key}")
    table = adhoc_table(models=args.run_model, datasets=args.run_dataset, type=args.run_type,
                        k=args.run_k, task=args.run_task, epochs=args.run_epochs,
                        batch_size=args.run_batch_size, lr=args.run_lr,
                        optimizer=args.run_optimizer, search_space=space,
                        num_samples=args.run_num_samples)
    return experiments_document(exp_name, table, experiments_file)


def add_parser(sub) -> None:
    """``run``'s parser: its flags (:func:`.run_flags.add_run_arguments`, the campaign keys'
    from their declarations) and the registered executors in its epilog."""
    from fugue_tui.commands.arguments import at_least
    from fugue_tui.commands.run_flags import add_run_arguments, executors_epilog

    parser = sub.add_parser(
        "run", help="run experiments × executors now (a campaign built from the flags)",
        description="Build a campaign from the flags (catalogue experiments with --exp, and/or\n"
                    "an ad-hoc experiment described with --model/--dataset ...), validate it like\n"
                    "a campaign file, write it to RUNS_DIR/.adhoc/run-<selection>-<digest>.toml\n"
                    "(the digest hashes the definition: the same flags reuse the name, other\n"
                    "flags never overwrite an earlier run's files) and run it as --batch does.\n"
                    "Exit status as --batch: 0 every cell ok, 1 a cell was not, 2 bad input\n"
                    "(nothing written).\n\n"
                    "  fugue-tui run --exp D_ens,D_cv --exec seq --passes 3\n"
                    "  fugue-tui run --model mlp --dataset wine --type cv --k 5 --epochs 20\n"
                    "  fugue-tui run --model mlp --dataset digits \\\n"
                    "      --search-space lr=0.1,0.01 batch_size=32,64\n"
                    "  fugue-tui run --type multi_model --model mlp mlp_bn --dataset wine digits",
        epilog=executors_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, at_least)
