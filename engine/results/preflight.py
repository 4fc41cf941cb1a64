"""The check, before any cell runs, that results can be written under a runs folder.

Torch-free.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from engine.errors import OutputError
from engine.results.columns import RESULT_FILES
from engine.results.paths import (
    blocking_file,
    check_target,
    make_dirs,
    path_text_problem,
    quoted,
    shown_path,
)
from engine.results.store import write_all


def preflight(runs_dir: str | os.PathLike[str]) -> Path:
    """Check that results can be written under ``runs_dir`` before any cell runs.

    ``runs_dir`` is used as given: a ``~`` was expanded where the user's text was read
    (:func:`engine.define.paths.user_path`), once, so that every user of the path agrees.
    Runs the checks of :func:`check_runs_path` (but trusts a real write over
    ``os.access``), then creates the folder and writes, fsyncs and removes a small probe
    file. Returns the resolved folder. Raises :class:`OutputError` (one line)
    on any failure; nothing else is written.
    """
    directory = _check_path(runs_dir)
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    try:
        make_dirs(directory, directory)
        _check_writable(directory)
    except OutputError:
        # leave nothing behind: remove the folders made just now, deepest first (makedirs
        # may have stopped half way: 'x/' made, 'x/<too long>' refused)
        for created in missing:
            try:
                created.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                break
        raise
    return directory


def check_runs_path(runs_dir: str | os.PathLike[str]) -> Path:
    """The checks of :func:`preflight` that write nothing (a dry run's): the path resolves,
    is a directory or can become one (no regular file on the way), each results file in it
    is absent or a regular file that opens for appending, and the folder (or the nearest
    one that exists) is writable (an empty folder made and removed at once: the only trace
    is the parent's modification time). Returns the resolved folder; raises :class:`OutputError`
    with the same line the real run would print."""
    directory = _check_path(runs_dir)
    existing = next(p for p in (directory, *directory.parents) if os.path.lexists(p))
    what = "is not writable" if existing == directory else "cannot be created"
    # Not os.access: it answers yes to root everywhere, also in /proc or /sys, where the
    # real run's mkdir then fails, and it has no reason to give (a read-only mount read as
    # "Permission denied" where the run says "Read-only file system"). Make and remove an
    # empty folder there, as the real run would make one: the kernel's refusal, in the
    # run's words (nothing stays; a dry run must refuse what the run refuses, as it says).
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".fugue-tui-probe-", dir=existing))
    except OSError as e:
        raise OutputError(f"runs path {quoted(directory)} {what}: {e.strerror or e}") from None
    return directory


def _check_path(runs_dir: str | os.PathLike[str]) -> Path:
    # The text first (a NUL byte, a component too long): each would end in a traceback
    # below (ValueError, ENAMETOOLONG), and the folder's parents would be made on the way.
    problem = path_text_problem(runs_dir)
    if problem is not None:
        raise OutputError(f"runs path {shown_path(os.fspath(runs_dir))} {problem}")
    try:
        directory = Path(runs_dir).resolve()
    except (OSError, RuntimeError) as e:
        raise OutputError(f"runs path {quoted(runs_dir)} cannot be resolved: {e}") from None
    problem = path_text_problem(directory)  # a short relative path can resolve to a long one
    if problem is not None:
        raise OutputError(f"runs path {shown_path(str(directory))} {problem}")
    try:
        if os.path.lexists(directory) and not directory.is_dir():
            raise OutputError(f"runs path {quoted(directory)} is not a directory")
        blocker = blocking_file(directory)
        if blocker is not None:
            raise OutputError(f"runs path {quoted(directory)} is under a regular file "
                              f"{quoted(blocker)}")
        if directory.is_dir():
            _check_results_files(directory)
    except OSError as e:  # a parent that cannot be searched (EACCES), a loop of links
        raise OutputError(f"runs path {quoted(directory)} cannot be checked: "
                          f"{e.strerror or e}") from None
    return directory


def _check_results_files(directory: Path) -> None:
    for name in RESULT_FILES:
        target = check_target(directory / name)
        if target.exists():
            try:
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError as e:
                raise OutputError(f"results file {quoted(directory / name)} cannot be opened for "
                                  f"appending: {e.strerror or e}") from None
            os.close(fd)


def _check_writable(directory: Path) -> None:
    if not directory.is_dir():
        raise OutputError(f"runs path {quoted(directory)} is not a directory")
    _check_results_files(directory)  # again: the folder may have been made just now
    probe = directory / f".fugue-tui-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, b"fugue-tui write probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise OutputError(f"runs path {quoted(directory)} is not writable: "
                          f"{e.strerror or e}") from None
