"""The structure measured by types (issue 40): mypy over the runner, the cell, the observers
and the definitions finds nothing, and no function there carries a cell spec or an event as
a plain dict — they travel as :class:`engine.cell.protocol.CellRunSpec` and the event classes
of :mod:`engine.event_types`; only the protocol modules turn them into JSON and back.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"
PACKAGES = ("engine/runner", "engine/cell", "engine/observe", "engine/define")
#: Where a spec or an event is a document by design: they parse and serialise it (the
#: protocol modules of the JSON contract in pyproject.toml; the probe's "spec" is its own
#: request document, engine.cell.profile_probe being that format's protocol).
PROTOCOL = {"engine/cell/protocol.py", "engine/cell/profile_probe.py"}
#: Other things called "spec" that are no cell spec: (file, function) -> what it is.
NOT_A_CELL_SPEC = {
    ("engine/define/search_space.py", "distribution"): "a [search] key's TOML table",
    ("engine/define/search_space.py", "draw"): "a [search] key's TOML table",
}
#: Names that say "this is a spec or an event".
CARRIERS = ("spec", "event")


def test_mypy_finds_nothing() -> None:
    if not MYPY.exists():
        pytest.fail(f"{MYPY} missing: mypy is in the test extra (pyproject.toml)")
    done = subprocess.run([str(MYPY), "--no-error-summary", "--cache-dir",
                           str(ROOT / ".mypy_cache")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _is_plain_document(annotation: ast.expr | None) -> bool:
    """``dict``, ``dict[str, Any]``, ``Mapping[str, Any]``, ``MutableMapping[...]`` (also
    inside ``X | None``)."""
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(part.strip().split("[")[0].split(".")[-1] in ("dict", "Dict", "Mapping",
                                                           "MutableMapping")
               for part in text.split("|"))


def _carrier(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in CARRIERS)


def plain_carriers(path: Path, rel: str = "") -> list[str]:
    """``file:line function(param)`` for each spec or event passed or returned as a dict."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if (rel, node.name) in NOT_A_CELL_SPEC:
            continue
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if _carrier(arg.arg) and _is_plain_document(arg.annotation):
                found.append(f"{path}:{node.lineno} {node.name}({arg.arg}: "
                             f"{ast.unparse(arg.annotation)})")
        if _carrier(node.name) and _is_plain_document(node.returns):
            found.append(f"{path}:{node.lineno} {node.name}() -> {ast.unparse(node.returns)}")
    return found


def test_no_spec_or_event_travels_as_a_dict() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in PROTOCOL:
                found += plain_carriers(path, rel)
    assert not found, "specs and events travel typed:\n" + "\n".join(found)


def test_the_check_sees_a_dict_carrier(tmp_path: Path) -> None:
    """The scan is not blind: a parameter or a return of each kind is caught."""
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import Any, Mapping\n"
                      "def a(spec: dict[str, Any]) -> None: ...\n"
                      "def b(event: Mapping[str, Any] | None) -> None: ...\n"
                      "def cell_spec() -> dict[str, Any]: ...\n"
                      "def fine(spec: 'CellRunSpec', count: dict[str, int]) -> int: ...\n")
    assert [line.split()[1] for line in plain_carriers(sample)] == [
        "a(spec:", "b(event:", "cell_spec()"]
