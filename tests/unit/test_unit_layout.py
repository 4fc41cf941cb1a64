"""tests/unit is grouped like the code it tests (issue 41): ``tests/unit/engine/<package>/``,
``tests/unit/fugue_tui/<package or module>/``, ``tests/unit/bench/``, so that the tests of a
module are found beside each other. A test file directly in tests/unit is one of the
repository-wide checks listed in :data:`REPOSITORY_WIDE`; every folder names a package or
module that exists (a folder left behind by a rename fails here) and is a package itself
(two test files with one basename in two folders stay distinct, and cross-imports read
``tests.unit.<group>.<module>``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"

#: The test files that stay directly in tests/unit, and why: each checks the repository as a
#: whole (its configuration, its documents, its dependency lock, this folder), not one package.
REPOSITORY_WIDE = {
    "test_suite_phases.py": "scripts/test's two phases run every test once (serial marks)",
    "test_lint.py": "ruff over every Python file ([tool.ruff])",
    "test_import_contracts.py": "import-linter's contracts between all packages (pyproject)",
    "test_import_hygiene.py": "what every entry point may import, across the packages",
    "test_types.py": "mypy over the packages listed in [tool.mypy]",
    "test_constraints_lock.py": "constraints.txt against pyproject's dependencies",
    "test_docs.py": "docs/ and the README against the registries",
    "test_docs_userfix.py": "the README and campaigns/ against what runs",
    "test_readme_layout.py": "the README's Layout section against the source tree",
    "test_unit_layout.py": "this folder's own grouping",
    "test_snapshot_helpers.py": "tests/snapshots' helpers: what a differing snapshot shows",
}

#: The code trees a group may mirror (tests/unit/<tree>/...).
TREES = ("engine", "fugue_tui", "bench")


def misplaced(unit: Path, root: Path, allowed: dict[str, str]) -> list[str]:
    """What breaks the grouping of ``unit`` (a tests/unit folder) against the code under
    ``root``: one line per problem, empty when the grouping holds.

    A group folder ``unit/a/b`` must mirror ``root/a/b/`` (a package) or ``root/a/b.py`` (a
    module), with ``a`` one of :data:`TREES`, and hold an ``__init__.py``; a ``test_*.py``
    directly in ``unit`` must be one of ``allowed``."""
    problems = []
    for path in sorted(unit.glob("test_*.py")):
        if path.name not in allowed:
            problems.append(f"{path.relative_to(unit)}: directly in tests/unit; move it to the "
                            "folder of the package or module it tests")
    for folder in sorted(p for p in unit.rglob("*") if p.is_dir()):
        rel = folder.relative_to(unit)
        if "__pycache__" in rel.parts:
            continue
        code = root.joinpath(*rel.parts)
        if rel.parts[0] not in TREES:
            problems.append(f"{rel}/: not one of the code trees {', '.join(TREES)}")
        elif not ((code / "__init__.py").is_file() or code.with_suffix(".py").is_file()):
            problems.append(f"{rel}/: no package {rel}/ nor module {rel}.py in the code")
        if not (folder / "__init__.py").is_file():
            problems.append(f"{rel}/: no __init__.py")
    return problems


def test_tests_unit_is_grouped_like_the_packages():
    assert misplaced(UNIT, ROOT, REPOSITORY_WIDE) == []


def test_every_repository_wide_check_exists():
    # An entry left behind by a rename would let a new file of that name sit at the top.
    assert sorted(n for n in REPOSITORY_WIDE if not (UNIT / n).is_file()) == []


def test_the_check_names_each_kind_of_misplacement(tmp_path):
    code, unit = tmp_path / "code", tmp_path / "unit"
    for pkg in ("engine", "engine/runner"):
        (code / pkg).mkdir(parents=True)
        (code / pkg / "__init__.py").write_text("")
    (code / "engine" / "events.py").write_text("")
    for group in ("engine", "engine/runner", "engine/events", "engine/gone", "misc"):
        (unit / group).mkdir(parents=True)
        if group != "engine/events":
            (unit / group / "__init__.py").write_text("")
    (unit / "test_wide.py").write_text("")
    (unit / "test_stray.py").write_text("")
    assert misplaced(unit, code, {"test_wide.py": "why"}) == [
        "test_stray.py: directly in tests/unit; move it to the folder of the package or "
        "module it tests",
        "engine/events/: no __init__.py",
        "engine/gone/: no package engine/gone/ nor module engine/gone.py in the code",
        "misc/: not one of the code trees engine, fugue_tui, bench",
    ]
