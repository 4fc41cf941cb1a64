"""Plugins: modules that register models, datasets, tasks, optimizers or executors with the
same functions the built-ins use (``engine.registry``).

Named by ``FUGUE_PLUGINS`` (comma-separated importable modules) or by installed packages'
``fugue_tui.plugins`` entry points. Loaded in the runner, in every cell and in every worker
process an executor starts, so all of them know the same names. Torch-free itself (a
plugin may import torch only inside its builders if the runner must stay torch-free).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os

from engine.errors import ConfigError

_loaded: set[str] = set()


def load_builtins() -> None:
    """Register the built-in models, datasets, tasks, optimizers and executors: import the
    modules that declare them (torch-free imports; a second call costs nothing). Every
    process calls this (or :func:`load_plugins`) once at its entry, before any lookup."""
    import engine.executors  # noqa: F401
    import engine.parts.datasets  # noqa: F401
    import engine.parts.models  # noqa: F401
    import engine.parts.optimizers  # noqa: F401
    import engine.parts.tasks  # noqa: F401


def load_plugins() -> list[str]:
    """Import every plugin once; return their names.

    Raises:
        ConfigError: a plugin named in ``FUGUE_PLUGINS`` cannot be imported.
    """
    load_builtins()
    names = [n.strip() for n in os.environ.get("FUGUE_PLUGINS", "").split(",") if n.strip()]
    for name in names:
        if name in _loaded:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # an import error in user code: one line, naming the plugin
            raise ConfigError(f"FUGUE_PLUGINS: cannot import plugin '{name}': "
                              f"{type(exc).__name__}: {exc}") from None
        _loaded.add(name)
    for entry in importlib.metadata.entry_points(group="fugue_tui.plugins"):
        if entry.name in _loaded:
            continue
        try:
            entry.load()
        except Exception as exc:
            raise ConfigError(f"entry point fugue_tui.plugins:{entry.name}: cannot load: "
                              f"{type(exc).__name__}: {exc}") from None
        _loaded.add(entry.name)
    return sorted(_loaded)
