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
#: Each loaded plugin's version (None when it declares none): rows record them.
_versions: dict[str, str | None] = {}


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
            module = importlib.import_module(name)
        except Exception as exc:  # an import error in user code: one line, naming the plugin
            raise ConfigError(f"FUGUE_PLUGINS: cannot import plugin '{name}': "
                              f"{type(exc).__name__}: {exc}") from None
        _loaded.add(name)
        _versions[name] = _module_version(module)
    for entry in importlib.metadata.entry_points(group="fugue_tui.plugins"):
        if entry.name in _loaded:
            continue
        try:
            entry.load()
        except Exception as exc:
            raise ConfigError(f"entry point fugue_tui.plugins:{entry.name}: cannot load: "
                              f"{type(exc).__name__}: {exc}") from None
        _loaded.add(entry.name)
        _versions[entry.name] = entry.dist.version if entry.dist is not None else None
    return sorted(_loaded)


def plugin_versions() -> dict[str, str | None]:
    """``{plugin: version}`` of the plugins this process loaded (:func:`load_plugins`):
    an entry point's distribution version; for a ``FUGUE_PLUGINS`` module its
    ``__version__``, else the version of the installed distribution that provides it,
    else None (a plain module declares none). Empty without plugins."""
    return dict(sorted(_versions.items()))


def _module_version(module) -> str | None:
    version = getattr(module, "__version__", None)
    if isinstance(version, str) and version:
        return version
    top = module.__name__.partition(".")[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
