"""The trained models a cell hands back (issue 50): the canonical weights digest
(:mod:`engine.models.digest`), saving members (:mod:`engine.models.save`), listing what a
run folder kept (:mod:`engine.models.listing`) and loading one back as the user's own
module (:func:`load`, defined in :mod:`engine.models.loader`).

``load`` is exported lazily: importing this package (the runner does, for
:data:`engine.models.save.SAVE_MODES`) imports no torch; ``engine.models.load(path)`` does.
Its module is not named ``load``: a submodule of that name would be bound as the package's
``load`` attribute when imported, hiding the function.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "load":
        from engine.models.loader import load

        globals()["load"] = load  # found directly from now on
        return load
    raise AttributeError(f"module 'engine.models' has no attribute {name!r}")
