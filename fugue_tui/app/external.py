"""Handing the terminal to another program ($PAGER, $EDITOR) on a file and coming back.

The dashboard suspends itself (Textual's ``App.suspend``: the terminal as it was before the
app started), runs the program in the foreground, and redraws once it exits. What can go
wrong is said in one line, never raised at the user: the variable names no program on
``PATH``, the terminal cannot be suspended (Textual's web driver, a headless test),
the program failed to start or exited non-zero.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The variables read for each role, in order, and the program used when none is set.
ROLES = {"PAGER": (("PAGER",), "less"), "EDITOR": (("EDITOR", "VISUAL"), "vi")}


class NoProgram(Exception):
    """The variable names no program here (the message is the one line to show)."""


def command(role: str, path: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """The command line that opens ``path`` for ``role`` (``PAGER`` or ``EDITOR``): the
    first set variable of :data:`ROLES` (split as a shell would, ``less -R`` is two words),
    else the default, then the path.

    Raises:
        NoProgram: the variable cannot be split, or its program is not on ``PATH`` (nor a
            path to an executable file).
    """
    env = os.environ if env is None else env
    names, default = ROLES[role]
    name, value = next(((n, env[n]) for n in names if env.get(n, "").strip()),
                       (None, default))
    where = f"${name}" if name else f"the default {role.lower()}"
    try:
        argv = shlex.split(value)
    except ValueError as error:
        raise NoProgram(f"{where} ({value!r}) cannot be read as a command: {error}") from None
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        raise NoProgram(f"{where} names '{argv[0]}', which is not a program here (not on "
                        f"PATH); set {names[0]} to one, such as {default}")
    return [*argv, str(path)]


def open_in(app: Any, role: str, path: Path) -> str | None:
    """Run ``role``'s program on ``path`` with the terminal handed to it (``app`` is
    suspended meanwhile) and come back. Returns the line to show the user when something
    went wrong, else None."""
    from textual.app import SuspendNotSupported

    try:
        argv = command(role, path)
    except NoProgram as error:
        return str(error)
    try:
        with app.suspend():
            status = subprocess.run(argv, check=False).returncode
    except SuspendNotSupported:
        return (f"this terminal cannot be handed to {argv[0]} (the dashboard cannot "
                f"suspend here); the file: {path}")
    except OSError as error:
        return f"{argv[0]} did not start: {error.strerror or error}"
    if status != 0:
        return f"{argv[0]} exited with status {status} ({path})"
    return None
