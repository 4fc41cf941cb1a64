"""Helpers the sub-commands (and ``list``, the plan screen) share: loading the catalogue
(plugins first), the selection, the names of types."""

from __future__ import annotations


def load_catalogue_and_plugins(experiments_file: str | None):
    from engine.define.catalogue import load_catalogue
    from engine.plugins import load_plugins

    load_plugins()
    return load_catalogue(experiments_file)


def selected(catalogue, selector: list[str] | None, where: str) -> list[str]:
    return catalogue.select(selector, where=where) if selector else catalogue.ids()


