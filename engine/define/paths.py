"""Where user text becomes a path: one rule for names, one for folders. Torch-free.

**Names.** A campaign name is the run folder ``<runs_dir>/<name>/``, an experiment id a part
of each of its cells' folders (``cells/<NNN>-<id>-<executor>-p<pass>-<key8>/``), so each
must be one safe path component: :data:`NAME_RULE`, 1 to 128 ASCII letters, digits, ``.``,
``_`` or ``-``, starting with a letter or digit. Such a name is never ``.`` or ``..``, never
hidden, absolute or more than one component, and means the same on every file system. A
campaign name must also not be one of the runs folder's own entries (``samples``, the
results files: :func:`engine.runfolder.reserved_entry`), in any case.

**Folders.** A folder the user types (``runs_dir`` in a campaign, ``--runs-dir``, the folder
of ``report``, ``--export DIR``, ``experiments_file``) goes through :func:`user_path` where
the text is read: a leading ``~`` or ``~user`` is expanded there, once, and nothing else is
(``$VARIABLES`` are the shell's job). Everything after it (the pre-flight check, the dry
run, the runner, the cells) uses the path it returns, so they cannot disagree about where
the results go. Empty text is refused: ``Path("")`` is the working directory, which nobody
means by leaving a value empty, and so is text no system call takes (a NUL byte, a component
longer than a file name may be: :func:`engine.results.paths.path_text_problem`, the one rule
every entry point that takes a path asks).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from engine.errors import ConfigError
from engine.results.paths import path_text_problem, shown_path
from engine.runfolder import PROFILES_FILE, SAMPLES, SELFCHECK_FILE, reserved_entry

#: The rule every name that becomes a path component follows (said in each error line).
NAME_RULE = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_safe_name(name: object) -> bool:
    """Whether ``name`` follows :data:`NAME_RULE` (one safe path component)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_campaign_name(name: object, where: str, stem: str | None = None) -> str:
    """The campaign's name (its run folder): the ``name`` key, else the file's stem
    (``stem``), else ``"campaign"``.

    Raises:
        ConfigError: an empty ``name``, one that breaks :data:`NAME_RULE`, a reserved one,
            or (without the key) a file name that cannot name the run folder.
    """
    if name is None:
        if stem is not None and not _campaign_problem(stem):
            return stem
        if stem is not None:
            raise ConfigError(f"{where}: no key 'name', and the file name '{stem}' cannot name "
                              f"the run folder ({_campaign_problem(stem)}): add a key 'name'")
        return "campaign"
    if name == "":
        raise ConfigError(f"{where}: key 'name' is empty: give the run folder's name "
                          f"({NAME_RULE}), or leave the key out to use the file's name")
    problem = _campaign_problem(name)
    if problem:
        raise ConfigError(f"{where}: key 'name' {problem}, got {name!r}")
    return str(name)


def _campaign_problem(name: object) -> str | None:
    if not is_safe_name(name):
        return f"must be {NAME_RULE} (it names the run folder <runs_dir>/<name>/)"
    entry = reserved_entry(str(name))
    if entry is not None:
        what = ("monitor samples" if entry == SAMPLES else "memory profiles"
                if entry == PROFILES_FILE else "self-check verdicts"
                if entry == SELFCHECK_FILE else "results")
        return (f"is reserved: the runs folder's own '{entry}' holds its {what} "
                f"(choose another name)")
    return None


def check_experiment_id(exp_id: object, where: str) -> str:
    """An experiment id from an experiments file (it names its cells' folders).

    Raises:
        ConfigError: an id that breaks :data:`NAME_RULE`, naming ``where`` (the file).
    """
    if not is_safe_name(exp_id):
        raise ConfigError(f"{where}: experiment id {exp_id!r} must be {NAME_RULE} (it names "
                          f"the cells' folders)")
    return str(exp_id)


def user_path(text: str | os.PathLike[str], what: str) -> Path:
    """``text`` as a path: a leading ``~`` / ``~user`` expanded, nothing else changed.

    ``what`` names the value in errors (``"c.toml: key 'runs_dir'"``,
    ``"argument --runs-dir"``).

    Raises:
        ConfigError: empty (or blank) text, text no path can be (a NUL byte, a component
            longer than a file name may be, longer than a path may be: ``<what>: 'x/aaa...'
            (306 characters) has a 300-byte component, ...``), or a ``~`` that cannot be
            expanded (no such user, no home directory).
    """
    raw = os.fspath(text)
    if not raw.strip():
        raise ConfigError(f"{what} is empty: give a folder ('.' for the working directory)")
    problem = path_text_problem(raw)
    if problem is not None:
        raise ConfigError(f"{what}: {shown_path(raw)} {problem}")
    expanded = os.path.expanduser(raw)
    if expanded.startswith("~"):
        user = raw[1:].split(os.sep, 1)[0]
        why = f"no user '{user}'" if user else "no home directory (HOME is not set)"
        raise ConfigError(f"{what}: cannot expand {raw!r}: {why} (write './{raw}' for a "
                          f"folder named '~...')")
    problem = path_text_problem(expanded)  # '~' may expand past the longest path
    if problem is not None:
        raise ConfigError(f"{what}: {shown_path(raw)} expands to {shown_path(expanded)}, which "
                          f"{problem}")
    return Path(expanded)
