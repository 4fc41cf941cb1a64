"""Checks on paths: the text of any path a user gives (:func:`path_text_problem`, one rule
for every entry point: no NUL byte, no component longer than a file name may be, no path
longer than a system call takes), a results file is absent or a regular file (never a
directory, device, pipe or broken link), and the runs folder is created with an error that
names the component in the way.

Torch-free.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.errors import OutputError, shown

#: Linux's NAME_MAX and PATH_MAX, in bytes: the longest file or folder name (ext4, xfs,
#: btrfs, tmpfs alike) and the longest path a system call takes (its NUL included).
NAME_MAX = 255
PATH_MAX = 4096
#: Characters of a path shown in an error line before its middle is left out.
SHOWN_CHARS = 60


def shown_path(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` quoted for an error line (:func:`engine.errors.shown`: escapes, one line),
    its middle left out as ``...`` past ``limit`` characters, then its length:
    ``'runs/aaaaaaaaaaaaaaaaaaaaaaaaa...aaaaaaaaaaaaaaaaaaaaaaaaa/x' (306 characters)``."""
    if len(text) <= limit:
        return shown(text)
    half = (limit - 3) // 2
    return f"{shown(text[:half] + '...' + text[-half:])} ({len(text)} characters)"


def quoted(path: str | os.PathLike[str]) -> str:
    """A path in an error line: quoted, escaped (a newline in a folder's name stays on the
    one line), as :func:`engine.errors.shown` quotes values."""
    return shown(os.fspath(path))


def path_text_problem(text: str | os.PathLike[str]) -> str | None:
    """What makes ``text`` unusable as a path before any system call sees it, or None.

    Said as the end of a sentence whose subject is the path: ``has a NUL byte (character
    3), which no path can hold``; ``has a 300-byte component, more than the 255 bytes a
    file or folder name may have: the 2nd, 'aaa...aaa' (300 characters)`` (``is a 300-byte
    name, ...`` for a path of one component); ``is 5000 bytes long, more than the 4095 a
    path may have``. Python raises ``ValueError: embedded null byte`` for the first and the
    kernel ``ENAMETOOLONG`` for the others, each a traceback where it surfaces: every entry
    point that takes a path from a user asks here first.
    """
    raw = os.fspath(text)
    if "\0" in raw:
        return f"has a NUL byte (character {raw.index(chr(0)) + 1}), which no path can hold"
    try:
        size = len(os.fsencode(raw))
    except UnicodeEncodeError as exc:
        return (f"has a character this system cannot name a file with "
                f"({shown(exc.object[exc.start])}, character {exc.start + 1})")
    parts = raw.split(os.sep)
    for number, part in enumerate(parts, start=1):
        part_size = len(os.fsencode(part))
        if part_size > NAME_MAX and len(parts) == 1:
            return (f"is a {part_size}-byte name, more than the {NAME_MAX} bytes a file or "
                    f"folder name may have")
        if part_size > NAME_MAX:
            return (f"has a {part_size}-byte component, more than the {NAME_MAX} bytes a "
                    f"file or folder name may have: the {_ordinal(number)}, "
                    f"{shown_path(part, 40)}")
    if size >= PATH_MAX:
        return f"is {size} bytes long, more than the {PATH_MAX - 1} a path may have"
    return None


def _ordinal(number: int) -> str:
    suffix = ("th" if 10 <= number % 100 <= 20
              else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th"))
    return f"{number}{suffix}"


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for an error line (``a FIFO``)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_target(path: str | os.PathLike[str]) -> Path:
    """The real path of a results file that is absent or a regular file; else OutputError."""
    given = os.fspath(path)
    real = os.path.realpath(given)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        if os.path.islink(given):
            raise OutputError(f"results file {quoted(given)} is a broken symbolic link (to "
                              f"{quoted(real)})") from None
        return Path(real)
    except NotADirectoryError:
        return Path(real)  # a parent is a regular file: make_dirs names it
    except OSError as e:
        raise OutputError(f"results file {quoted(given)}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        via = f", {quoted(real)}" if real != os.path.abspath(given) else ""
        raise OutputError(f"results file {quoted(given)} is not a regular file "
                          f"({file_kind(st.st_mode)}{via})")
    return Path(real)


def blocking_file(path: Path) -> Path | None:
    """The first component of ``path`` (from the root down) that exists and is no directory."""
    for part in [*reversed(path.parents), path]:
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return None


def make_dirs(directory: Path, given: str | os.PathLike[str]) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = blocking_file(Path(directory))
        if blocker is None:
            raise OutputError(f"runs path {quoted(given)} cannot be created "
                              f"(a component is not a directory)") from None
        if blocker == Path(directory):
            raise OutputError(f"runs path {quoted(given)} is not a directory") from None
        raise OutputError(
            f"runs path {quoted(given)} is under a regular file {quoted(blocker)}") from None
    except OSError as e:
        raise OutputError(f"runs path {quoted(given)} cannot be created: "
                          f"{e.strerror or e}") from None


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
