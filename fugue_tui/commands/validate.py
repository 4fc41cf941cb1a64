"""``fugue-tui validate [SELECTOR]``: every catalogue experiment (or the selected ones) and
whether it can run on this machine, with a one-line reason when not; then what is registered
(models, datasets, tasks, optimizers, executors, workload types, plugins). The exit status
depends only on the experiments validated, never on how they were selected (``validate``
and ``validate all`` agree): 0 when every one can run here, 1 when one cannot, 2 for bad
input (an unknown experiment, a malformed experiments file)."""

from __future__ import annotations

import sys

from engine.define.availability import requires_hint
from engine.parts.dataset_files import has_module
from fugue_tui.commands.common import load_catalogue_and_plugins, selected
from fugue_tui.commands.downloads import FETCHERS
from fugue_tui.format import wrap_line


def validate(selector: list[str] | None = None, experiments_file: str | None = None,
             out=None) -> int:
    """Print what can run here and why not; see the module docstring for the exit status.

    Raises:
        ConfigError: a malformed experiments file, a plugin that cannot be imported, an
            unknown experiment in ``selector``.
    """
    from engine import registry
    from engine.define.availability import catalogue_availability
    from engine.define.workloads import WORKLOADS, expand
    from engine.parts.dataset_files import data_root, root_note
    from engine.plugins import load_plugins

    out = out or sys.stdout

    def say(line: str = "") -> None:  # each line wrapped to the terminal (80 columns)
        for piece in wrap_line(line, hang=4):
            print(piece, file=out)

    catalogue = load_catalogue_and_plugins(experiments_file)
    ids = selected(catalogue, selector, "validate")
    width = max((len(i) for i in ids), default=2)
    say(f"experiments (data root {data_root()}, {root_note(None)}):")
    unavailable = []
    for exp, ok, reason in catalogue_availability(catalogue, ids, check=True):
        exp_id = exp.id
        if ok:
            say(f"  {exp_id:<{width}}  ok")
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
        say(f"  {exp_id:<{width}}  no: {reason}")
    say()
    models = []
    for name in registry.MODELS.names():
        needs = registry.MODELS.get(name).requires
        if needs and not has_module(needs):
            models.append(f"{name} (needs {needs}: {requires_hint(needs)})")
        else:
            models.append(name)
    say(f"models: {', '.join(models)}")
    datasets = []
    for name in registry.DATASETS.names():
        try:
            ok, _ = registry.DATASETS.get(name).available(None)
        except Exception:  # a plugin's check must not break the listing
            ok = False
        datasets.append(name if ok else f"{name} (missing)")
    say(f"datasets: {', '.join(datasets)}")
    say(f"tasks: {', '.join(registry.TASKS.names())}")
    say(f"optimizers: {', '.join(registry.OPTIMIZERS.names())}")
    say(f"executors: {', '.join(_executor_summary(n) for n in registry.EXECUTORS.names())}")
    say(f"workload types: {', '.join(WORKLOADS.names())}")
    plugins = load_plugins()
    say(f"plugins: {', '.join(plugins) if plugins else 'none (FUGUE_PLUGINS unset)'}")
    say()
    say(f"{len(ids) - len(unavailable)} of {len(ids)} experiments can run here")
    return 1 if unavailable else 0


def _executor_summary(name: str) -> str:
    from engine.registry import EXECUTORS

    spec = EXECUTORS.get(name)
    opts = f" [options: {', '.join(spec.option_fields)}]" if spec.option_fields else ""
    return f"{name}{opts}"
