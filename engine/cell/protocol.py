"""The contract between the runner and a cell, torch-free: the spec's schema, the exit
statuses, the pre-allocated reason file, and what counts as "the output cannot be written".

The runner (``engine.runner``) imports this module, never the cell's entry module
(:mod:`engine.cell.main`, which brings the executors' machinery).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from engine.errors import OutputError

SPEC_SCHEMA = 1
#: Exit status of a cell that could not write its output (rows, events): the runner
#: stops the campaign (each later cell would fail the same way).
EXIT_OUTPUT = 4
#: errno values that mean "this output cannot be written here", not a bug.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
#: Size of the spec's ``reason_file``, which the runner fills with spaces before the cell
#: starts: the cell's one-line reason overwrites those bytes in place, which needs no free
#: block even on a full disk (events and log may be unwritable by then).
REASON_BYTES = 1024


def output_failure(exc: BaseException, where: str | os.PathLike[str] | None = None
                   ) -> str | None:
    """The one-line reason when ``exc`` means the cell's output cannot be written: an
    :class:`OutputError` (its message names the file), or an ``OSError`` with an errno of
    :data:`OUTPUT_ERRNOS` anywhere in its chain (``<file>: <strerror>``; a write through a
    file object names no file: then ``where``, the folder written to); else None."""
    if isinstance(exc, OutputError):
        return str(exc)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in OUTPUT_ERRNOS:
            name = seen.filename if seen.filename is not None else where
            reason = seen.strerror or os.strerror(seen.errno)
            return f"{name}: {reason}" if name is not None else reason
        seen = seen.__cause__ or seen.__context__
    return None


def write_reason(spec: dict[str, Any], line: str) -> None:
    """Overwrite the runner's pre-allocated ``reason_file`` with ``line`` (never extends
    it: no new block is needed). Best effort; absent in specs of older runners."""
    path = spec.get("reason_file")
    if not path:
        return
    data = line.replace("\n", " ").encode("utf-8", "replace")[:REASON_BYTES - 1] + b"\n"
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # no O_CREAT, no O_TRUNC
        try:
            if os.fstat(fd).st_size >= REASON_BYTES:
                os.pwrite(fd, data.ljust(REASON_BYTES, b" "), 0)
        finally:
            os.close(fd)


def read_reason(path: str | Path) -> str:
    """The line a cell left in its ``reason_file`` ("" when none)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(REASON_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def safe_name(name: str) -> str:
    """``name`` as one file-name component: characters other than letters, digits and
    ``._-`` become ``_`` (a job id in a samples path)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
