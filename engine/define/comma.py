"""Comma lists as users write them in one string (``experiments = "D_ens,D_reg"``,
``--precision fp32,bf16``, ``--k-sweep 1,2,4``): the parts, none of them empty.

A list in a campaign holds no empty entry (README, "Failures"); a comma string is the same
list written another way, so ``"D_ens,,D_reg"`` or a trailing ``"fp32,"`` is refused
naming the entry, as ``["D_ens", "", "D_reg"]`` is, instead of being dropped silently.
"""

from __future__ import annotations

from engine.errors import ConfigError, quoted


def comma_parts(text: str, where: str) -> list[str]:
    """The stripped parts of ``text`` split at commas; ``[]`` for a blank ``text`` (the
    caller says whether nothing is allowed).

    Raises:
        ConfigError: ``"<where>: entry 2 of 3 in 'D_ens,,D_reg' is empty: remove the extra
            comma"``.
    """
    if not text.strip():
        return []
    parts = [part.strip() for part in text.split(",")]
    for i, part in enumerate(parts, 1):
        if not part:
            raise ConfigError(f"{where}: entry {i} of {len(parts)} in {quoted(text)} is "
                              "empty: remove the extra comma")
    return parts
