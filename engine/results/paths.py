"""Checks on the results files' paths: a results file is absent or a regular file (never a
directory, device, pipe or broken link), and the runs folder is created with an error that
names the component in the way.

Torch-free.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.errors import OutputError


def file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_target(path: str | os.PathLike[str]) -> Path:
    """The real path of a results file that is absent or a regular file; else OutputError."""
    shown = os.fspath(path)
    real = os.path.realpath(shown)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        if os.path.islink(shown):
            raise OutputError(
                f"results file '{shown}' is a broken symbolic link (to '{real}')") from None
        return Path(real)
    except NotADirectoryError:
        return Path(real)  # a parent is a regular file: make_dirs names it
    except OSError as e:
        raise OutputError(f"results file '{shown}': {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        via = f", '{real}'" if real != os.path.abspath(shown) else ""
        raise OutputError(f"results file '{shown}' is not a regular file "
                          f"({file_kind(st.st_mode)}{via})")
    return Path(real)


def blocking_file(path: Path) -> Path | None:
    """The first component of ``path`` (from the root down) that exists and is no directory."""
    for part in [*reversed(path.parents), path]:
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return None


def make_dirs(directory: Path, shown: str | os.PathLike[str]) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = blocking_file(Path(directory))
        if blocker is None:
            raise OutputError(f"runs path '{shown}' cannot be created "
                              f"(a component is not a directory)") from None
        if blocker == Path(directory):
            raise OutputError(f"runs path '{shown}' is not a directory") from None
        raise OutputError(
            f"runs path '{shown}' is under a regular file '{blocker}'") from None
    except OSError as e:
        raise OutputError(f"runs path '{shown}' cannot be created: {e.strerror or e}") from None


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
