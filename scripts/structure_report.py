#!/usr/bin/env python3
"""Sizes of the code's structure, by AST (issue 40: "sizes are reported before → after").

    .venv/bin/python scripts/structure_report.py [PACKAGE_DIR ...] [--list]

For each package folder (default: engine and fugue_tui) it counts

- modules over 400 lines (the README's rule of thumb),
- classes over 150 lines (``end_lineno - lineno + 1`` of the ``class`` statement),
- private reach-ins: ``x._name`` where ``x`` is a name other than ``self``/``cls`` or an
  attribute (``self.runner._emit``), and not a module the file imported (``os._exit`` is the standard library's business,
  ``runner._emit`` is one object reaching into another's internals), dunders excluded.

``--list`` names each one. Reports, never fails: these are measurements, not targets (a
split follows a role, never a line count).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 400
CLASS_LINES = 150


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def reach_ins(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, "x._name")`` for each private attribute read through another object."""
    modules = _imported_modules(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and (owner.id in ("self", "cls") or owner.id in modules):
            continue  # one's own internals, or a module's (os._exit: the library's business)
        if isinstance(owner, (ast.Name, ast.Attribute)):  # runner._emit, self.runner._emit
            found.append((node.lineno, f"{ast.unparse(owner)}.{node.attr}"))
    return found


def report(folders: list[Path], listing: bool) -> str:
    big_modules, big_classes, reaches = [], [], []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text()
            lines = text.count("\n") + 1
            if lines > MODULE_LINES:
                big_modules.append(f"{path} {lines}")
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > CLASS_LINES:
                        big_classes.append(f"{path}:{node.lineno} {node.name} {size}")
            reaches += [f"{path}:{line} {what}" for line, what in reach_ins(tree)]
    out = [f"{', '.join(map(str, folders))}: {len(big_modules)} modules > {MODULE_LINES} lines, "
           f"{len(big_classes)} classes > {CLASS_LINES} lines, {len(reaches)} private reach-ins"]
    if listing:
        for title, items in (("modules", big_modules), ("classes", big_classes),
                             ("reach-ins", reaches)):
            out.append(f"-- {title}")
            out += [f"   {item}" for item in items]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    listing = "--list" in argv
    folders = [Path(a) for a in argv if not a.startswith("--")] or [Path("engine"), Path("fugue_tui")]
    for folder in folders:
        if not folder.is_dir():
            print(f"structure_report: {folder}: not a folder", file=sys.stderr)
            return 2
    print(report(folders, listing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
