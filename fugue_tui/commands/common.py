"""Helpers the sub-commands share: loading the catalogue (plugins first), the selection, and
how a missing optional module is named and installed."""

from __future__ import annotations


def load_catalogue_and_plugins(experiments_file: str | None):
    from engine.define.catalogue import load_catalogue
    from engine.plugins import load_plugins

    load_plugins()
    return load_catalogue(experiments_file)


def selected(catalogue, selector: list[str] | None, where: str) -> list[str]:
    return catalogue.select(selector, where=where) if selector else catalogue.ids()


def requires_hint(module: str) -> str:
    return ("pip install 'fugue-tui[vision]'" if module == "torchvision"
            else f"pip install {module}")


def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
