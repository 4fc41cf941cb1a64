"""The derived-metrics table of docs/results.md, generated from the registry
(:mod:`engine.results.derived`): ``python -m engine.results.derived_doc`` rewrites it,
``--check`` exits 1 when the committed file differs (tests/unit/test_derived.py checks the
same, so that the registry and the doc cannot drift).

Only the part between :data:`DOC_BEGIN` and :data:`DOC_END` is generated; the prose around
it is written by hand. Torch-free.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    head, begin, rest = text.partition(DOC_BEGIN)
    _, end, tail = rest.partition(DOC_END)
    if not begin or not end:
        raise ValueError(f"{DOCS_FILE}: the markers of the derived-metrics table are missing")
    return f"{head}{DOC_BEGIN}\n\n{doc_table()}\n{DOC_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        print("usage: python -m engine.results.derived_doc [--check]", file=sys.stderr)
        return 2
    text = DOCS_FILE.read_text(encoding="utf-8")
    new = with_doc_table(text)
    if new == text:
        return 0
    if argv:
        print(f"{DOCS_FILE}: the derived-metrics table is not the registry's; run "
              "python -m engine.results.derived_doc", file=sys.stderr)
        return 1
    DOCS_FILE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
