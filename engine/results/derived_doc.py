"""The derived-metrics table of docs/results.md, generated from the registry
(:mod:`engine.results.derived`): ``python -m engine.results.derived_doc`` rewrites it,
``--check`` exits 1 when the committed file differs (tests/unit/engine/results/test_derived.py checks the
same, so that the registry and the doc cannot drift).

Only the part between :data:`DOC_BEGIN` and :data:`DOC_END` is generated; the prose around
it is written by hand. Torch-free.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.generated_docs import docs_command, replace_part
from engine.results.derived import DERIVED

DOCS_FILE = Path(__file__).resolve().parents[2] / "docs" / "results.md"
DOC_BEGIN = ("<!-- The table below is generated from engine/results/derived.py by "
             "`python -m engine.results.derived_doc`: edit the registry there, not here. -->")
DOC_END = "<!-- end of the generated derived-metrics table -->"


def doc_table() -> str:
    """The table: one row per metric of :data:`~engine.results.derived.DERIVED`, in its
    order (name, unit, what it is formed from, its baseline, its doc)."""
    lines = ["| metric | unit | formed from | baseline (what it divides by, which rows) "
             "| meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{d.name}` | {d.unit} | {d.of} | {d.baseline} | {d.doc} |"
              for d in DERIVED]
    return "\n".join(lines) + "\n"


def with_doc_table(text: str) -> str:
    """``text`` (docs/results.md) with its generated part replaced by :func:`doc_table`.

    Raises:
        ValueError: the markers are missing.
    """
    return replace_part(text, DOC_BEGIN, DOC_END, doc_table(), before="\n\n", after="\n",
                        where=f"{DOCS_FILE}: the derived-metrics table")


def main(argv: list[str] | None = None) -> int:
    return docs_command(argv, DOCS_FILE, with_doc_table, "python -m engine.results.derived_doc",
                        "the derived-metrics table")


if __name__ == "__main__":
    sys.exit(main())
