"""``fugue-tui validate [SELECTOR]``: every catalogue experiment (or the selected ones) and
whether it can run on this machine, with a one-line reason when not; then what is registered
(models, datasets, tasks, optimizers, executors, workload types, plugins). The exit status
depends only on the experiments validated, never on how they were selected (``validate``
and ``validate all`` agree): 0 when every one can run here, 1 when one cannot, 2 for bad
input (an unknown experiment, a malformed experiments file)."""

from __future__ import annotations

import sys


def validate(selector: list[str] | None = None, experiments_file: str | None = None,
             out=None, as_json: bool = False) -> int:
    """Print what can run here and why not; see the module docstring for the exit status.
    ``as_json``: a ``fugue-tui/validate`` document instead (docs/json.md), same status.

    Raises:
        ConfigError: a malformed experiments file, a plugin that cannot be imported, an
            unknown experiment in ``selector``.
    """
    # Imported here, not at the top: every command builds validate's parser (add_parser).
    from engine import registry
    from engine.define.availability import catalogue_availability, requires_hint
    from engine.define.workloads import WORKLOADS, expand
    from engine.parts.dataset_files import data_root, has_module, root_note
    from engine.plugins import load_plugins
    from fugue_tui.commands.common import load_catalogue_and_plugins, selected
    from fugue_tui.commands.downloads import FETCHERS
    from fugue_tui.format import wrap_line

    out = out or sys.stdout
    catalogue = load_catalogue_and_plugins(experiments_file)
    ids = selected(catalogue, selector, "validate")
    experiments = []  # (experiment, ok, reason, fetchable)
    for exp, ok, reason in catalogue_availability(catalogue, ids, check=True):
        fetchable = False
        if not ok:
            try:
                fetchable = any(ds in FETCHERS and ds in registry.DATASETS
                                and registry.DATASETS.get(ds).available(None) == (False, reason)
                                for ds in {job.dataset for job in expand(exp)})
            except Exception:  # an invalid experiment or a plugin's check: the reason says enough
                fetchable = False
        experiments.append((exp, ok, reason, fetchable))
    models = []  # (name, needs, hint when its module is missing)
    for name in registry.MODELS.names():
        needs = registry.MODELS.get(name).requires
        missing = bool(needs) and not has_module(needs)
        models.append((name, needs or None, requires_hint(needs) if missing else None))
    datasets = []
    for name in registry.DATASETS.names():
        try:
            present, _ = registry.DATASETS.get(name).available(None)
        except Exception:  # a plugin's check must not break the listing
            present = False
        datasets.append((name, present))
    plugins = load_plugins()
    runnable = sum(1 for _, ok, _, _ in experiments if ok)
    code = 0 if runnable == len(experiments) else 1
    if as_json:
        from engine.plugins import plugin_versions
        from fugue_tui.jsonout import document, dump, experiment_entry

        dump(document(
            "validate", data_root=str(data_root()), experiments_file=experiments_file,
            experiments=[{**experiment_entry(exp, ok, reason),
                          "prefetch": f"fugue-tui prefetch {exp.id}" if fetchable else None}
                         for exp, ok, reason, fetchable in experiments],
            models=[{"name": n, "requires": needs, "available": hint is None,
                     "install": hint} for n, needs, hint in models],
            datasets=[{"name": n, "available": present} for n, present in datasets],
            tasks=registry.TASKS.names(), optimizers=registry.OPTIMIZERS.names(),
            executors=[{"name": n, "options": list(registry.EXECUTORS.get(n).option_fields)}
                       for n in registry.EXECUTORS.names()],
            workload_types=WORKLOADS.names(),
            plugins=[{"name": n, "version": plugin_versions().get(n)} for n in plugins],
            runnable=runnable, total=len(experiments)), out)
        return code

    def say(line: str = "") -> None:  # each line wrapped to the terminal (80 columns)
        for piece in wrap_line(line, hang=4):
            print(piece, file=out)

    width = max((len(i) for i in ids), default=2)
    note = root_note(None)
    say(f"experiments (data root {data_root()}, {note}):")
    any_fetchable = False
    for exp, ok, reason, fetchable in experiments:
        if ok:
            say(f"  {exp.id:<{width}}  ok")
            continue
        any_fetchable |= fetchable
        say(f"  {exp.id:<{width}}  no: {_short_reason(reason, fetchable, exp.id, note)}")
    if any_fetchable:  # said once, not under every experiment (README: one line each)
        say("  missing data: prefetch fetches it into the data root above (details: --json)")
    say()
    say("models: " + ", ".join(f"{n} (needs {needs}: {hint})" if hint else n
                               for n, needs, hint in models))
    say("datasets: " + ", ".join(n if present else f"{n} (missing)" for n, present in datasets))
    say(f"tasks: {', '.join(registry.TASKS.names())}")
    say(f"optimizers: {', '.join(registry.OPTIMIZERS.names())}")
    say(f"executors: {', '.join(_executor_summary(n) for n in registry.EXECUTORS.names())}")
    say(f"workload types: {', '.join(WORKLOADS.names())}")
    say(f"plugins: {', '.join(plugins) if plugins else 'none (FUGUE_PLUGINS unset)'}")
    say()
    say(f"{runnable} of {len(experiments)} experiments can run here")
    return code


def _short_reason(reason: str, fetchable: bool, exp_id: str, note: str) -> str:
    """An experiment's reason on one line: for a dataset ``prefetch`` fetches, what is
    missing and the command (the paths and the how-to are in ``--json``; one shared line
    says where it goes); else the reason without the data root's note and path (the header
    names them once)."""
    from engine.parts.dataset_files import data_root

    if fetchable:  # the reason is the dataset's own: "<label> not found: <paths>; <how>"
        return f"{reason.split(':', 1)[0]} (fugue-tui prefetch {exp_id})"
    return reason.replace(f" ({note})", "").replace(f"{data_root()}/", "")


def _executor_summary(name: str) -> str:
    from engine.registry import EXECUTORS

    spec = EXECUTORS.get(name)
    opts = f" [options: {', '.join(spec.option_fields)}]" if spec.option_fields else ""
    return f"{name}{opts}"


def add_parser(sub) -> None:
    from fugue_tui.commands.arguments import add_experiments_file

    parser = sub.add_parser(
        "validate", help="which experiments can run here and why not; what is registered",
        description="Every catalogue experiment (or the selected ones) and whether it resolves "
                    "on this machine, with a one-line reason when not; then the registered "
                    "models, datasets, tasks, optimizers, executors and workload types. Exit 0 "
                    "when every experiment validated (all, or the selected ones) can run "
                    "here, 1 when one cannot, 2 for bad input.")
    parser.add_argument("selector", nargs="*", metavar="SELECTOR",
                        help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all")
    add_experiments_file(parser, "experiments_file_sub")
    parser.add_argument("--json", action="store_true", dest="json_sub",
                        help="the answer as JSON (schema fugue-tui/validate, docs/json.md); "
                             "the same exit status")


def run(args) -> int:
    return validate(args.selector, args.experiments_file_sub or args.experiments_file,
                    as_json=args.json_sub)
