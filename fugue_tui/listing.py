"""``fugue-tui list``: the catalogue with what can run on this machine and why not."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from engine.availability import experiment_availability
from engine.catalogue import load_catalogue
from engine.plugins import load_plugins


def print_catalogue(user_file: str | None = None) -> int:
    load_plugins()
    catalogue = load_catalogue(user_file)
    table = Table(title="fugue-tui experiments", title_justify="left")
    for column in ("id", "type", "family", "model / dataset", "K", "batch", "epochs", "lr",
                   "optimizer", "amp", "size", "runs here"):
        table.add_column(column, overflow="fold")
    for exp in catalogue.experiments.values():
        ok, reason = experiment_availability(exp)
        pairs = " + ".join(f"{m}/{d}" for m, d in zip(exp.models(), exp.datasets()))
        if exp.type == "hpo":
            space = " × ".join(f"{k}{v}" for k, v in exp.search_space.items())
            pairs += f"  [{space}]"
        table.add_row(exp.id, exp.type, exp.family, pairs, str(exp.k),
                      _fmt(exp.batch_size), _fmt(exp.epochs), _fmt(exp.lr),
                      exp.optimizer if not exp.members else "per member",
                      "yes" if exp.amp else "no", exp.size, "yes" if ok else f"no: {reason}")
    Console().print(table)
    return 0


def _fmt(value) -> str:
    return "" if value is None else str(value)
