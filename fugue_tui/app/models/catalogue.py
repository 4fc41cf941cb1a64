"""The plan screen's catalogue, Textual-free: one :class:`ExperimentInfo` per experiment of
the catalogue (merged with a user's experiments file and the plugins), with whether it can
run on this machine and, if not, why. Built in a thread worker (it loads the plugins and
probes the machine) and shown by :class:`fugue_tui.app.widgets.catalogue_tree.CatalogueTree`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest ``models/datasets`` part of a summary line (the tree's width), in characters.
_WHAT_WIDTH = 34


@dataclass(frozen=True)
class ExperimentInfo:
    """What the tree shows for one experiment (built from the catalogue and availability)."""

    id: str
    family: str
    type: str
    summary: str          # "mlp_bn/digits · K 5 · small"
    available: bool
    reason: str = ""
    description: str = ""


def experiment_infos(experiments_file: str | None) -> list[ExperimentInfo]:
    """The catalogue (merged with ``experiments_file``) with availability, for the tree, in
    catalogue order.

    Raises:
        ConfigError: the experiments file is malformed (names the file and key).
    """
    from engine.define.availability import catalogue_availability
    from fugue_tui.commands.common import load_catalogue_and_plugins

    catalogue = load_catalogue_and_plugins(experiments_file or None)
    out = []
    for exp, ok, reason in catalogue_availability(catalogue):
        models = ",".join(dict.fromkeys(exp.models()))
        datasets = ",".join(dict.fromkeys(exp.datasets()))
        what = f"{models}/{datasets}"
        if len(what) > _WHAT_WIDTH:
            what = what[:_WHAT_WIDTH - 1] + "…"
        summary = f"{exp.type} · {what} · K {exp.k}" + (f" · {exp.size}" if exp.size else "")
        out.append(ExperimentInfo(exp.id, exp.family, exp.type, summary, ok, reason,
                                  exp.description))
    return out
