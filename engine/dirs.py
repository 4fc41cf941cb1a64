"""Where fugue-tui keeps a user's files, through ``platformdirs`` (XDG on Linux, the
platform's conventions elsewhere). Torch-free. Each has an environment override:

* data (downloaded datasets, scikit-learn copies): ``$FUGUE_DATA_DIR``, else an existing
  ``~/.cache/fugue-tui/data`` (where versions before issue 29 downloaded: kept, so no
  dataset is stranded), else ``<user cache dir>/data`` (``$XDG_CACHE_HOME/fugue-tui/data``,
  by default ``~/.cache/fugue-tui/data`` on Linux, ``~/Library/Caches/fugue-tui/data`` on
  macOS). Datasets can be downloaded again: a cache, not user data.
* config (the dashboard's keymap, the default experiments file): ``$FUGUE_CONFIG_DIR``,
  else ``<user config dir>`` (``$XDG_CONFIG_HOME/fugue-tui``, by default
  ``~/.config/fugue-tui`` on Linux).
* the default user experiments file, merged over the catalogue when a campaign names
  none: ``$FUGUE_REGISTRY_DIR/experiments.toml`` (must exist), else
  ``<config dir>/experiments.toml`` when it exists.
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "fugue-tui"
#: Where data went before platformdirs: used while it exists.
LEGACY_DATA = Path("~/.cache/fugue-tui/data")


def data_dir() -> Path:
    """The data root (see the module docstring; not created here)."""
    env = os.environ.get("FUGUE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    legacy = LEGACY_DATA.expanduser()
    if legacy.is_dir():
        return legacy
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP, appauthor=False)) / "data"


def data_dir_note() -> str:
    """How :func:`data_dir` was chosen, in a few words (for messages)."""
    if os.environ.get("FUGUE_DATA_DIR"):
        return f"FUGUE_DATA_DIR={data_dir()}"
    legacy = LEGACY_DATA.expanduser()
    if legacy.is_dir():
        return f"FUGUE_DATA_DIR unset, default {legacy} (kept: it exists)"
    return f"FUGUE_DATA_DIR unset, default {data_dir()}"


def config_dir() -> Path:
    """The config folder (see the module docstring; not created here)."""
    env = os.environ.get("FUGUE_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def default_experiments_file() -> Path:
    """``<config dir>/experiments.toml`` (it need not exist)."""
    return config_dir() / "experiments.toml"
