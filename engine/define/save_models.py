"""``save_models``: which trained models a cell hands back (issue 50).

A campaign key (``save_models = true``), an experiment key (the same values, for that
experiment's cells) and ``fugue-tui run --save-models [true|best]``:

- ``false`` (the default): nothing is written, as before;
- ``true``: every job's final weights, ``<attempt>/models/<job_id>.safetensors`` beside
  its JSON (:mod:`engine.models.save`);
- ``"best"``: only the best trial of an hpo group and the best member of an ensemble, by
  the group's metric.

An experiment that sets the key decides for its own cells; the others take the campaign's
(its file, or ``--save-models``). The value is carried to the cell on its
:class:`~engine.define.matrix.CellSpec` and never hashed: saving changes no measured
figure (it happens after the group window), so it is no part of ``key``, ``config_key`` or
``workload_key`` (docs/measurement.md, "Cell keys"), and ``--resume`` finds a cell
whatever it saved. Torch-free.
"""

from __future__ import annotations

from typing import Any

from engine.errors import ConfigError

#: The values of the key, as the cell spec carries them (``engine.models.save`` re-exports
#: them: declared here, below the packages that train, so that the definitions import
#: nothing of the models' package, which imports torch and the plugins).
SAVE_MODES = ("false", "true", "best")
#: The allowed values as a campaign file writes them (the one-line refusal names them).
ALLOWED_TEXT = 'false, true or "best"'


def parse_save_models(value: Any, where: str) -> str:
    """A ``save_models`` value as one of :data:`SAVE_MODES`.

    ``value``: a TOML boolean, or one of the strings ``"false"``, ``"true"``, ``"best"``
    (what ``--save-models`` and the plan form give). ``where``: the file (and table) or
    flag it came from.

    Raises:
        ConfigError: ``"<where>: key 'save_models' must be false, true or "best", got
            'all'"``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value in SAVE_MODES:
        return value
    raise ConfigError(f"{where}: key 'save_models' must be {ALLOWED_TEXT}, got {value!r}")


def cell_save_models(campaign_value: str, experiment_value: str | None) -> str:
    """What one cell saves: its experiment's own value when it sets one, else the
    campaign's."""
    return experiment_value if experiment_value is not None else campaign_value


__all__ = ["ALLOWED_TEXT", "SAVE_MODES", "cell_save_models", "parse_save_models"]
