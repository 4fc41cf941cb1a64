"""The README's "## Layout" section names every package and module of ``engine`` and
``fugue_tui`` (issue 41: it had fallen 23 engine and 17 front-end modules behind).

The section is a table with one row per package, its first cell the package's path in
backticks (`engine/define/`; `engine/` (top) for the engine's own modules). A module or a
sub-package belongs to the row of its nearest enclosing package that has one
(engine/executors/unified/bucket.py to the `engine/executors/` row) and is named there as a
word of a code span (`bucket`, `engine/cell/profile_probe.py`; a sub-package as `unified/`).
A module of a sub-package is named in that sub-package's part of the row, from the span
`unified/` to the next span naming another package (`ray/`): `mp/` (`executor`, `worker`),
or with its package in one span (`ray/options`); so a `worker` said of mp does not name
ray's. ``__init__`` and ``__main__`` are not named (every package has them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Modules every package may have without the README naming them.
UNNAMED = {"__init__", "__main__"}


def layout_rows(readme: str) -> dict[str, str]:
    """The Layout section's table: ``{package path: the rest of its row}``, the path without
    its trailing ``/`` (``"engine/define"``, ``"engine"``).

    Raises:
        ValueError: the README has no "## Layout" section or the section no table rows."""
    match = re.search(r"^## Layout\n(.*?)(?=^## )", readme + "\n## end", re.M | re.S)
    if match is None:
        raise ValueError('README.md has no "## Layout" section')
    rows = {}
    for line in match.group(1).splitlines():
        cells = line.split("|")
        key = re.match(r"\s*`([\w/]+)/`", cells[1]) if len(cells) > 2 else None
        if line.startswith("|") and key:
            rows[key.group(1)] = "|".join(cells[2:])
    if not rows:
        raise ValueError('README.md\'s "## Layout" section has no package rows')
    return rows


def spans(row: str) -> list[str]:
    """The row's code spans, in order."""
    return re.findall(r"`([^`]+)`", row)


def words(texts: list[str]) -> set[str]:
    """Every word of the spans (```unified/bucket``` gives ``unified`` and ``bucket``)."""
    return {w for text in texts for w in re.findall(r"\w+", text)}


def segment(row: str, package: tuple[str, ...], within: set[str]) -> list[str]:
    """The code spans that speak of a sub-package of the row's package: those after a span
    naming it (```ray/```, ```executors/ray/```) up to the next span naming a package (one
    that ends in ``/``) other than one of ``within`` (the names of the packages inside it,
    whose own parts of the row stay its part)."""
    out, inside = [], False
    for span in spans(row):
        if span.endswith("/"):
            path = span.rstrip("/")
            name = path.split("/")[-1]
            if name == package[-1] and f"/{'/'.join(package)}".endswith(f"/{path}"):
                inside = True
                continue
            if name not in within:
                inside = False
        if inside:
            out.append(span)
    return out


def is_named(row: str, parts: tuple[str, ...], packages: set[tuple[str, ...]]) -> bool:
    """Whether the row names the module or package at ``parts`` (its path relative to the
    row's package; ``packages``, the paths of every package there): directly in the
    package, as a word of any code span; deeper, as a word of a span in its own package's
    part of the row (``segment``) or with its package in the same span (```ray/options```).
    """
    *package, name = parts
    if not package:
        return name in words(spans(row))
    within = {p[-1] for p in packages if len(p) > len(package) and p[:len(package)] == tuple(package)}
    return (name in words(segment(row, tuple(package), within))
            or any(f"{package[-1]}/{name}" in span for span in spans(row)))


def unnamed(readme: str, root: Path, top: str) -> list[str]:
    """The packages and modules under ``root/top`` the Layout section does not name in their
    package's row, one line each (``engine/executors/unified/contract: ...``); empty when
    every one is named."""
    rows = layout_rows(readme)
    missing = []
    paths = [p for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts]
    packages = {p.parent for p in paths if p.name == "__init__.py"}
    things = [p.with_suffix("") for p in paths if p.stem not in UNNAMED] + [
        p for p in packages if p != root / top]
    for thing in sorted(things):
        rel = thing.relative_to(root)
        if rel.as_posix() in rows:  # a package with its own row
            continue
        # the nearest enclosing package with a row of its own ("." is never a row)
        owner = next((a for a in rel.parents if a.as_posix() in rows), None)
        if owner is None:
            missing.append(f"{rel.as_posix()}: no row for its package")
            continue
        parts = rel.relative_to(owner).parts
        inside = {q.relative_to(root / owner).parts for q in packages if (root / owner) in q.parents}
        if not is_named(rows[owner.as_posix()], parts, inside):
            where = (f"`{parts[-1]}`" if len(parts) == 1 else
                     f"`{parts[-1]}` after `{parts[-2]}/`, or `{parts[-2]}/{parts[-1]}`")
            missing.append(f"{rel.as_posix()}: not named in the `{owner.as_posix()}/` row "
                           f"(as {where})")
    return missing


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_layout_names_every_engine_package_and_module():
    assert unnamed(readme(), ROOT, "engine") == []


def test_the_layout_names_every_fugue_tui_package_and_module():
    assert unnamed(readme(), ROOT, "fugue_tui") == []


def test_the_check_names_what_is_missing_and_where(tmp_path):
    for path in ("pkg/__init__.py", "pkg/__main__.py", "pkg/top.py", "pkg/quiet.py",
                 "pkg/sub/__init__.py", "pkg/sub/named.py", "pkg/sub/inner/__init__.py",
                 "pkg/sub/inner/deep.py", "pkg/other/__init__.py", "pkg/other/x.py",
                 "pkg/other/y.py", "pkg/other/v.py", "pkg/other/nested/__init__.py",
                 "pkg/other/nested/z.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    text = ("## Layout\n\n| package | what |\n|---|---|\n"
            "| `pkg/sub/` | `named`, `inner/deep` |\n"
            "| `pkg/` (top) | `top`, `v`, and quiet in plain words; "
            "`other/` (`x`, `nested/` (`z`), `y`) |\n\n## Next\n")
    assert unnamed(text, tmp_path, "pkg") == [
        # named only outside other/'s part of the row
        "pkg/other/v: not named in the `pkg/` row (as `v` after `other/`, or `other/v`)",
        "pkg/quiet: not named in the `pkg/` row (as `quiet`)",
    ]
    without_top = text.replace(text.splitlines()[5] + "\n", "")
    assert unnamed(without_top, tmp_path, "pkg")[0] == "pkg/other: no row for its package"


def test_a_readme_without_the_section_is_an_error():
    with pytest.raises(ValueError, match="Layout"):
        layout_rows("# fugue-tui\n\n## Usage\n")
