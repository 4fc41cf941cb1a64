"""``fugue-tui list``: the catalogue, and what can run on this machine (and why not)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def print_catalogue(user_file: str | None = None, console: Console | None = None,
                    as_json: bool = False) -> int:
    """Print the catalogue table; reasons for unavailable experiments follow as numbered
    notes (one per distinct reason) so the table stays readable in 80 columns.
    ``as_json``: a ``fugue-tui/list`` document instead (docs/json.md)."""
    # Imported here, not at the top: every command builds list's parser (add_parser), and
    # the catalogue's modules would double `fugue-tui --version`'s start-up.
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from engine.define.availability import catalogue_availability
    from engine.define.search_space import space_text
    from fugue_tui.commands.common import load_catalogue_and_plugins

    console = console or Console()
    catalogue = load_catalogue_and_plugins(user_file)
    if as_json:
        from fugue_tui.jsonout import document, dump, experiment_entry

        dump(document("list", experiments_file=user_file, experiments=[
            experiment_entry(exp, ok, reason)
            for exp, ok, reason in catalogue_availability(catalogue)]))
        return 0
    table = Table(title="fugue-tui experiments", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_edge=False, collapse_padding=True,
                  padding=(0, 1))
    wide_screen = console.width >= 110
    columns = ["id", "type", "model / dataset", "K", "batch", "ep", "lr", "opt"]
    columns += ["precision", "size", "here"] if wide_screen else ["here"]
    for column in columns:
        wide = column == "model / dataset"
        table.add_column(column, no_wrap=not wide, overflow="fold", min_width=16 if wide else None,
                         ratio=1 if wide else None)
    notes: dict[str, list[str]] = {}
    for exp, ok, reason in catalogue_availability(catalogue):
        if not ok:
            notes.setdefault(reason, []).append(exp.id)
        pairs = " + ".join(f"{m}/{d}" for m, d in zip(exp.models(), exp.datasets(), strict=False))
        if exp.type == "hpo":
            pairs += " " + space_text(exp.search_space, exp.num_samples)
        here = "yes" if ok else f"no [{list(notes).index(reason) + 1}]"
        cells = [exp.id, exp.type, pairs, str(exp.k), _fmt(exp.batch_size), _fmt(exp.epochs),
                 _fmt(exp.lr), exp.optimizer if not exp.members else "mixed"]
        cells += [precision_default(exp), exp.size, here] if wide_screen else [here]
        table.add_row(*cells)
    console.print(table)
    if wide_screen and any(exp.precision is None and exp.amp
                           for exp in catalogue.experiments.values()):
        console.print(Text(f"{LEGACY_AMP}: the legacy amp flag, amp-fp16 where AMP is "
                           "allowed (CUDA), fp32 elsewhere"), highlight=False)
    for i, (reason, ids) in enumerate(notes.items(), 1):
        # wrapped at the console's width (80 columns), never inside a word (a path)
        console.print(Text(f"[{i}] {', '.join(ids)}: {reason}"), highlight=False)
    return 0


#: How ``list`` shows a legacy ``amp = true`` without a precision default: not
#: "amp-fp16", which it is only where AMP is allowed (the note under the table says so).
LEGACY_AMP = "amp (legacy)"


def precision_default(exp) -> str:
    """An experiment's precision default as ``list`` shows it: its ``precision`` when set,
    else its legacy ``amp`` flag (:data:`LEGACY_AMP`), else ``fp32``."""
    if exp.precision:
        return exp.precision
    return LEGACY_AMP if exp.amp else "fp32"


def _fmt(value) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def add_parser(sub) -> None:
    from fugue_tui.commands.arguments import add_experiments_file

    lister = sub.add_parser(
        "list", help="list the experiment catalogue and what can run here",
        description="The experiment catalogue (with a user experiments file merged over "
                    "it): per experiment its workload, jobs, model and dataset, and whether "
                    "it can run on this machine. Exit 0.")
    add_experiments_file(lister, "experiments_file_list")
    lister.add_argument("--json", action="store_true", dest="json_sub",
                        help="the catalogue as JSON (schema fugue-tui/list, docs/json.md)")


def run(args) -> int:
    """``fugue-tui list``: the experiments file given after the command, else before it."""
    return print_catalogue(args.experiments_file_list or args.experiments_file,
                           as_json=args.json_sub)
