"""The trained models a cell hands back (issue 50): the canonical weights digest
(:mod:`engine.models.digest`), and, beside it, saving and loading members."""
