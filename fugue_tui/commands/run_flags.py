"""``fugue-tui run``'s flags and its ``--help`` epilog (the registered executors with their
options, and the workload types)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from engine.errors import FugueError
from fugue_tui.commands.arguments import INTEGER, integer, real, timestamp

#: Flags that set an option of some executors only: the flag, the option key it sets on
#: them, and the executors it applies to.
PLANNED_FLAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("--scheduler", "scheduler", ("ray", "seq", "mp", "unified_model")),
    ("--sweep", "sweep", ("unified_model",)),
    ("--max-parallel", "max_parallel", ("mp", "ray", "unified_model")),
    ("--features", "features", ("unified_model",)),
)
#: Flags that describe an ad-hoc experiment (they need --model and --dataset).
ADHOC_FLAGS = ("type", "k", "task", "epochs", "batch_size", "lr", "optimizer", "search_space",
               "num_samples", "name")


def executors_epilog() -> str:
    """``fugue-tui run --help``'s epilog: each registered executor with its description and
    options (with their types and help), and the registered workload types."""
    from engine.define.executor_options import help_lines
    from engine.define.workloads import WORKLOADS
    from engine.plugins import load_plugins
    from engine.registry import EXECUTORS

    lines = []
    try:
        load_plugins()  # the built-ins are registered first, whatever a plugin does
    except FugueError as exc:
        lines.append(f"(plugins not loaded: {exc})")
    lines.append("executors (--exec; options: --option EXEC.KEY=VALUE, or [options.EXEC] in a "
                 "campaign file):")
    for name in EXECUTORS.names():
        spec = EXECUTORS.get(name)
        lines.append(f"  {name}  {spec.label}: {spec.description}".rstrip(": "))
        lines.extend(help_lines(spec.option_fields))
    lines.append(f"workload types (--type): {', '.join(WORKLOADS.names())}")
    from fugue_tui.format import terminal_columns, wrap_line

    # argparse wraps its own help to the terminal less 2 columns; this epilog is raw text
    width = max(40, terminal_columns() - 2)
    return "\n".join(part for line in lines for part in wrap_line(line, width, hang=4))


def _number_or_word(declared: Any) -> Callable[[str], Any]:
    """An option that is an integer or a word (``max_parallel``: N or ``auto``), checked by
    its declaration."""
    def parse(text: str) -> Any:
        value: Any = int(text) if INTEGER.fullmatch(text) else text
        if declared.check is not None:
            try:
                declared.check(value)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        return value
    return parse


def add_run_arguments(run: argparse.ArgumentParser, at_least: Callable[[int], Any]) -> None:
    """The ``run`` sub-command's flags (dests prefixed ``run_`` where the top-level parser
    has a flag of the same name, so the two never overwrite each other)."""
    from engine.registry import EXECUTORS

    sel = run.add_argument_group("what to run (the product is the run matrix)")
    add_campaign_flags(sel, "what", at_least)
    sel.add_argument("--option", dest="run_option", action="append", default=[],
                     metavar="EXEC.KEY=VALUE", help="an executor option (see below)")
    for flag, key, targets in PLANNED_FLAGS:
        # The flag takes the option's declaration (choices, bound, axis) from the first of
        # its executors that is registered.
        declared = next((EXECUTORS.get(t).option_fields[key] for t in targets
                         if t in EXECUTORS and key in EXECUTORS.get(t).option_fields), None)
        # Choices: every value some of its executors take (--scheduler sha: seq, not ray).
        union = [c for t in targets if t in EXECUTORS and key in EXECUTORS.get(t).option_fields
                 for c in EXECUTORS.get(t).option_fields[key].choices]
        choices = tuple(dict.fromkeys(union)) or None
        kind: Any = str
        if declared and int in declared.types:
            kind = at_least(int(declared.minimum)) if declared.minimum is not None else integer
            if str in declared.types:  # max_parallel: a number or "auto"
                kind = _number_or_word(declared)
        sel.add_argument(flag, dest=f"run_{key}",
                         nargs="+" if declared and declared.axis and list in declared.types
                         else None,
                         choices=choices, type=kind, metavar=key.upper(),
                         help=_targets_help(targets, EXECUTORS.names()))
    how = run.add_argument_group("how and where")
    add_campaign_flags(how, "how", at_least)
    how.add_argument("--resume", dest="run_resume", action="store_true",
                     help="skip cells whose key already has an ok row of this campaign")
    how.add_argument("--reuse-from-any-campaign", dest="run_reuse_any", action="store_true",
                     help="with --resume: an ok row of any campaign in the runs folder "
                          "counts too")
    how.add_argument("--remeasure-holes", dest="run_remeasure_holes", action="store_true",
                     help="with --resume: an ok row whose monitor columns are missing for a "
                          "reason other than no device does not count: its cell runs again")
    how.add_argument("--since", dest="run_since", metavar="TIME", type=timestamp,
                     help="with --resume: only ok rows written at or after this time count: "
                     "ISO 8601 with an offset (2026-11-30T14:00:00+09:00) or "
                     "YYYYmmdd_HHMMSS, read as this host's local time (rows are "
                     "compared as instants)")
    how.add_argument("--dry-run", dest="run_dry_run", action="store_true",
                     help="print the cells and their keys, run nothing, write nothing")
    how.add_argument("--json", dest="run_json", action="store_true",
                     help="with --dry-run: the plan as JSON (schema fugue-tui/plan, "
                          "docs/json.md)")
    adhoc = run.add_argument_group(
        "an ad-hoc experiment (not in the catalogue; rows carry exp_id adhoc or --name)")
    adhoc.add_argument("--model", dest="run_model", metavar="MODEL", nargs="+", action="extend", default=[],
                       help="model (several for --type multi_model, paired with --dataset)")
    adhoc.add_argument("--dataset", dest="run_dataset", metavar="DATASET", nargs="+", action="extend", default=[],
                       help="dataset (several for --type multi_model)")
    adhoc.add_argument("--type", dest="run_type", metavar="TYPE",
                       help="ensemble (default), cv, hpo (default with --search-space), "
                            "multi_model (default with several models/datasets), or a "
                            "plugin's type")
    adhoc.add_argument("--k", dest="run_k", metavar="K", type=integer, help="jobs of an ensemble, folds of a cv "
                                                           "(default 5)")
    adhoc.add_argument("--task", dest="run_task", metavar="TASK", help="task (default: the dataset's)")
    adhoc.add_argument("--epochs", dest="run_epochs", metavar="N", type=integer, help="default 10")
    adhoc.add_argument("--batch-size", dest="run_batch_size", metavar="N", type=integer, help="default 64")
    adhoc.add_argument("--lr", dest="run_lr", metavar="LR", type=real, help="default 0.001")
    adhoc.add_argument("--optimizer", dest="run_optimizer", metavar="NAME", help="default adamw")
    adhoc.add_argument("--search-space", dest="run_search_space", nargs="+", action="extend",
                       metavar="KEY=SPEC",
                       help="hpo axes: a grid KEY=V1,V2 (lr=0.1,0.01) or a distribution "
                            "KEY=loguniform:LO:HI, uniform:LO:HI, randint:LO:HI (HI exclusive), "
                            "choice:V1,V2; dotted keys reach model_kwargs.* and "
                            "optimizer_kwargs.*")
    adhoc.add_argument("--num-samples", dest="run_num_samples", metavar="N", type=integer,
                       help="hpo: draws of the sampled axes per grid point (Ray Tune's "
                            "num_samples; default 1)")
    adhoc.add_argument("--name", dest="run_name", metavar="ID", help="the experiment id (default adhoc)")


def add_campaign_flags(group: Any, which: str, at_least: Callable[[int], Any]) -> None:
    """The flags of the campaign keys declared as ``run`` flags of group ``which``
    (``what``, ``how``: :func:`engine.define.campaign_schema.flags`), in declaration order:
    each flag's spelling, metavar, help, and its parsing from the key's types — a count
    that argparse checks takes its bound's low end (``--passes``: >= 1), a checked choice
    its choices (``--compile``); a many-valued flag extends a list."""
    from engine.define.campaign_schema import flag_help, flags

    for key in flags(which):
        flag = key.flag
        assert flag is not None  # flags() returns only keys with one
        kwargs: dict[str, Any] = {"dest": flag.dest, "help": flag_help(key)}
        if flag.metavar:
            kwargs["metavar"] = flag.metavar
        if flag.many:
            kwargs.update(nargs="+", action="extend")
        if flag.const is not None:
            kwargs.update(nargs="?", const=flag.const)
        if flag.checked and key.choices:
            kwargs["choices"] = key.choices
        parse = _FLAG_TYPES.get(key.name)
        if parse is None and int in key.types and list not in key.types:
            low = key.bound.low if key.bound is not None else None
            parse = at_least(int(low)) if flag.checked and low is not None else integer
        if parse is not None:
            kwargs["type"] = parse
        group.add_argument(flag.spelling, **kwargs)


def _targets_help(targets: tuple[str, ...] | list[str], registered: list[str]) -> str:
    """Which executors a planned flag is for: ``for ray only``, ``for seq and mp only``, or
    ``for every executor`` when it names all that are registered (``--scheduler``)."""
    if set(registered) <= set(targets):
        text = "for every executor"
    else:
        text = f"for {' and '.join(targets)} only"
    return text + ("" if all(t in registered for t in targets) else " (not built yet)")


def _precisions(text: str) -> list[str]:
    """``--precision`` values: one name or a comma list, each checked (one line on error)."""
    import argparse

    from engine.define.comma import comma_parts
    from engine.errors import nearest
    from engine.precision import PRECISIONS

    try:
        names = comma_parts(text, "--precision")
    except FugueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--precision: ")) from None
    if not names:
        raise argparse.ArgumentTypeError(f"empty precision; name one of {', '.join(PRECISIONS)}")
    for name in names:
        if name not in PRECISIONS:
            raise argparse.ArgumentTypeError(f"unknown precision {name!r}"
                                             f"{nearest(name, PRECISIONS)}; known: "
                                             f"{', '.join(PRECISIONS)}")
    return names


def _save_models(text: str) -> str:
    """``--save-models`` value: true, best or false (argparse's one line on error)."""
    import argparse

    from engine.define.save_models import parse_save_models

    try:
        return parse_save_models(text, "--save-models")
    except FugueError as exc:
        raise argparse.ArgumentTypeError(
            str(exc).removeprefix("--save-models: key 'save_models' ")) from None


#: Flags whose words need more than their key's type to parse: the key, the parser.
_FLAG_TYPES: dict[str, Callable[[str], Any]] = {"precision": _precisions,
                                                "save_models": _save_models}
