"""The columns tables of docs/results.md, generated from the column registry
(:mod:`engine.results.columns`): ``python -m engine.results.columns_doc`` rewrites them,
``--check`` exits 1 when the committed file differs (tests/unit/test_docs.py checks the same).

Only the part between :data:`DOC_BEGIN` and :data:`DOC_END` is generated; the prose above it
is written by hand. Torch-free.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.generated_docs import docs_command, replace_part
from engine.results import columns

DOCS_FILE = Path(__file__).resolve().parents[2] / "docs" / "results.md"
DOC_BEGIN = ("<!-- The tables below are generated from engine/results/columns.py by "
             "`python -m engine.results.columns_doc`: edit the registry there, not here. -->")
DOC_END = "<!-- end of the generated tables -->"


def doc_tables() -> str:
    """The columns tables: a section per file, a row per column, in the file's order."""
    lines: list[str] = []
    for file in columns.RESULT_FILES:
        lines += [f"## {file}", "", "| column | meaning |", "|---|---|"]
        lines += [f"| `{c.name}` | {c.doc} |" for c in columns.COLUMNS if c.file == file]
        lines.append("")
    return "\n".join(lines)


def with_doc_tables(text: str) -> str:
    """``text`` (docs/results.md) with its generated part replaced by :func:`doc_tables`.

    Raises:
        ValueError: the markers are missing.
    """
    return replace_part(text, DOC_BEGIN, DOC_END, doc_tables(), before="\n\n", after="\n",
                        where=f"{DOCS_FILE}: the columns tables")


def main(argv: list[str] | None = None) -> int:
    return docs_command(argv, DOCS_FILE, with_doc_tables, "python -m engine.results.columns_doc",
                        "the columns tables")


if __name__ == "__main__":
    sys.exit(main())
