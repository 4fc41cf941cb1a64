"""The generated parts of the docs: a table between two markers in a hand-written file,
rewritten from a declaration (the columns, the derived metrics, the campaign keys, the
executors' options), and the ``python -m … [--check]`` command each generator offers.

One implementation for all of them, so that every generated table is replaced, checked
and refused the same way. Torch-free; imports nothing of the engine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def replace_part(text: str, begin: str, end: str, body: str, *, where: str,
                 before: str = "\n", after: str = "") -> str:
    """``text`` with what lies between the markers ``begin`` and ``end`` replaced by
    ``before + body + after`` (the markers stay; the prose around them is untouched).

    Raises:
        ValueError: a marker is missing (``where`` names the file or the table).
    """
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise ValueError(f"{where}: the markers of the generated part are missing "
                         f"({begin!r} ... {end!r})")
    return f"{head}{begin}{before}{body}{after}{end}{tail}"


def docs_command(argv: list[str] | None, path: Path, rewrite: Callable[[str], str],
                 command: str, what: str) -> int:
    """The generator's command line: no argument rewrites ``path`` (``rewrite(text)``),
    ``--check`` exits 1 when the file differs from what it would write, anything else is
    a usage error (exit 2). Returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        print(f"usage: {command} [--check]", file=sys.stderr)
        return 2
    text = path.read_text(encoding="utf-8")
    new = rewrite(text)
    if new == text:
        return 0
    if argv:
        print(f"{path}: {what} is out of date; run {command}", file=sys.stderr)
        return 1
    path.write_text(new, encoding="utf-8")
    return 0
