"""The check, before any cell runs, that results can be written under a runs folder.

Torch-free.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from engine.errors import OutputError
from engine.results.columns import RESULT_FILES
from engine.results.paths import check_target, make_dirs
from engine.results.store import write_all


def preflight(runs_dir: str | os.PathLike[str]) -> Path:
    """Check that results can be written under ``runs_dir`` before any cell runs.

    Resolves and creates the folder, checks that it is a directory, that each results file
    is absent or a regular file that opens for appending, and writes, fsyncs and removes a
    small probe file. Returns the resolved folder. Raises :class:`OutputError` (one line)
    on any failure; nothing else is written.
    """
    try:
        directory = Path(runs_dir).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise OutputError(f"runs path '{runs_dir}' cannot be resolved: {e}") from None
    if os.path.lexists(directory) and not directory.is_dir():
        raise OutputError(f"runs path '{directory}' is not a directory")
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    make_dirs(directory, directory)
    try:
        _check_writable(directory)
    except OutputError:
        for created in missing:  # leave nothing behind: remove the folders made just now
            try:
                created.rmdir()
            except OSError:
                break
        raise
    return directory


def _check_writable(directory: Path) -> None:
    if not directory.is_dir():
        raise OutputError(f"runs path '{directory}' is not a directory")
    for name in RESULT_FILES:
        target = check_target(directory / name)
        if target.exists():
            try:
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError as e:
                raise OutputError(f"results file '{directory / name}' cannot be opened for "
                                  f"appending: {e.strerror or e}") from None
            os.close(fd)
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
        raise OutputError(f"runs path '{directory}' is not writable: {e.strerror or e}") from None
