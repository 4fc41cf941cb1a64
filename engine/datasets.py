"""Compatibility for plugins: datasets moved to :mod:`engine.parts.datasets`.

A plugin written before the re-layout (``from engine.datasets import DatasetBundle``) keeps
loading; new code imports :mod:`engine.parts.datasets`.
"""

from engine.parts.datasets import DatasetBundle, data_root, load_dataset  # noqa: F401
