"""The runner split by role (issue 40): attempts, lanes, placement strategies, the journal
and the commands get narrow collaborators, never the :class:`Runner`, and no module of
``engine/runner`` reaches into another object's private attributes; the runner keeps the
cell spec and its events typed (no ``spec["…"]``, no ``spec.to_dict()``, no spec or event
parameter typed as a dict). Checked on the source (AST), and each check is shown to catch
an offending snippet."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[4] / "engine" / "runner"
#: The Runner's own module, and the entry points that make one (the process's command line).
MAKE_THE_RUNNER = {"supervisor.py", "cli.py", "__main__.py"}
#: ``os._exit`` is the documented way to end a process at once (no atexit, no flush): an
#: underscore name of the standard library's public API, not a reach-in.
PUBLIC_UNDERSCORE = {("os", "_exit")}
_RUNNER_WORD = re.compile(r"\bRunner\b")


def _takes_the_runner(tree: ast.Module) -> list[str]:
    """Each function (method or not) with a parameter named ``runner`` or annotated with
    ``Runner``, and each import of ``Runner`` (also under TYPE_CHECKING)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                        *([args.vararg] if args.vararg else []),
                        *([args.kwarg] if args.kwarg else [])]:
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg == "runner" or _RUNNER_WORD.search(annotation):
                    name = getattr(node, "name", "lambda")
                    found.append(f"line {node.lineno}: {name}({arg.arg}: {annotation})")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "Runner":
                    found.append(f"line {node.lineno}: imports Runner from {node.module}")
    return found


def _private_reach_ins(tree: ast.Module) -> list[str]:
    """Each ``x._name`` whose ``x`` is not ``self``, ``cls`` or ``super()`` (dunders are
    the language's, not private)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and (owner.id in ("self", "cls")
                                            or (owner.id, node.attr) in PUBLIC_UNDERSCORE):
            continue
        if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


#: Names of parameters that carry a cell spec or an event.
SPEC_OR_EVENT = {"spec", "event", "events", "sample", "last_sample", "failure"}


def _spec_or_event_as_dict(tree: ast.Module) -> list[str]:
    """Each ``spec[...]`` read, each ``<...>spec.to_dict()`` call, and each parameter or
    return that carries a spec or an event annotated as a dict."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else (
                owner.attr if isinstance(owner, ast.Attribute) else "")
            if name in ("spec", "on_node", "local"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "to_dict" and "spec" in ast.unparse(node.func.value)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg in SPEC_OR_EVENT and re.search(r"\bdict\b|Mapping", annotation):
                    found.append(f"line {node.lineno}: {node.name}({arg.arg}: {annotation})")
            returns = ast.unparse(node.returns) if node.returns else ""
            if re.search(r"(spec|event)", node.name) and re.search(r"\bdict\b", returns):
                found.append(f"line {node.lineno}: {node.name} -> {returns}")
    return found


def _modules() -> list[Path]:
    return sorted(RUNNER.glob("*.py"))


def test_the_runners_modules_are_there():
    names = {p.name for p in _modules()}
    assert {"supervisor.py", "attempt.py", "concurrent.py", "cluster.py", "journal.py",
            "strategy.py", "commands.py"} <= names


@pytest.mark.parametrize("path", [p for p in _modules() if p.name not in MAKE_THE_RUNNER],
                         ids=lambda p: p.name)
def test_no_class_or_function_outside_the_runners_module_takes_the_runner(path):
    assert _takes_the_runner(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_reaches_into_another_objects_private_attributes(path):
    assert _private_reach_ins(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_the_runner_keeps_specs_and_events_typed(path):
    assert _spec_or_event_as_dict(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("source, caught", [
    ("def f(spec):\n    return spec['cell']['key']\n", True),
    ("class A:\n    def f(self):\n        return self.spec['events']\n", True),
    ("def f(a):\n    return a.spec.to_dict()\n", True),
    ("def f(event: dict[str, Any]) -> None: ...\n", True),
    ("def f(spec: Mapping[str, Any]) -> None: ...\n", True),
    ("def cell_spec(c) -> dict[str, Any]: ...\n", True),
    ("def f(spec: CellRunSpec, event: RunnerEvent) -> Event:\n    return spec.events\n", False),
    ("def f(command: dict[str, Any]) -> None: ...\n", False),
])
def test_the_typed_check_catches_a_spec_or_an_event_as_a_dict(source, caught):
    assert bool(_spec_or_event_as_dict(ast.parse(source))) is caught


@pytest.mark.parametrize("source", [
    "class A:\n    def __init__(self, runner): ...\n",
    "class A:\n    def __init__(self, r: Runner): ...\n",
    "class A:\n    def __init__(self, r: 'Runner | None'): ...\n",
    "def f(*, owner: list[Runner]): ...\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
    "    from engine.runner.supervisor import Runner\n",
])
def test_the_runner_check_catches_a_class_that_takes_the_runner(source):
    assert _takes_the_runner(ast.parse(source))


@pytest.mark.parametrize("source, caught", [
    ("def f(runner):\n    runner._emit('x')\n", True),
    ("def f(a):\n    return a.b._lock\n", True),
    ("class A:\n    def f(self):\n        return self.runner._record\n", True),
    ("class A:\n    def f(self):\n        return self._lock, super()._watchdog(1)\n", False),
    ("import os\nos._exit(0)\n", False),
    ("class A:\n    def f(self):\n        return type(self).__name__\n", False),
])
def test_the_reach_in_check_catches_a_private_attribute_of_another_object(source, caught):
    assert bool(_private_reach_ins(ast.parse(source))) is caught
