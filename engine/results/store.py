"""The locked, atomic append of result rows to the results CSVs (names and columns:
:mod:`engine.results.columns`; reading: :mod:`engine.results.read`).

Writing (:func:`append_rows`) happens under an inter-process lock (``<file>.lock``):

- a missing file is created whole (header + rows) through a temporary file and
  ``os.replace``, so a reader never sees a file without its header;
- rows are appended with one ``os.write`` on an ``O_APPEND`` descriptor and fsync'ed; on
  any error the file is truncated back to its previous size, so no half row ever stays;
- a file whose header lacks some of our columns is upgraded: the original is copied to
  ``<file>.bak-YYYYmmdd-HHMMSS``, and the whole file is rewritten (values keyed by column
  name) with the union header through a temporary file and ``os.replace``. Columns we do
  not know (the harness's, a user's) are kept, in place, with their values;
- a file whose last line is torn (no newline, or an unterminated quoted field) is repaired
  the same way: backed up, then rewritten without the torn tail;
- a rewrite (upgrade or repair) moves malformed lines (fewer fields than the header: a
  hand edit such as ``x,y,z``, stray NUL or 0xff bytes) to ``<file>.malformed-...``, with
  one line naming that file and the count, instead of padding them into phantom rows.

An upgrade or a repair is never silent: :func:`append_rows` and :func:`append_group` return
one line for each (the file, what was done, where the backup is); the cell and the runner
send it as a ``warning`` event, which every front end shows.

A value that was not measured is an empty cell, never 0
(:func:`engine.results.values.format_value`).

Torch-free; pandas is not imported either (the runner imports this module).
"""

from __future__ import annotations

import csv
import errno
import io
import os
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import filelock

from engine.errors import OutputError
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE, header
from engine.results.paths import check_target, file_kind, fsync_dir, make_dirs
from engine.results.read import parse_records, raise_field_limit
from engine.results.values import format_value

#: Seconds :func:`append_rows` waits for another process's lock before giving up.
LOCK_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- writing

def _write(fd: int, data: memoryview) -> int:
    """One ``os.write``; a separate function so that tests can make it fail part-way."""
    return os.write(fd, data)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = _write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[n:]


def _encode(records: Sequence[Sequence[str]], terminator: str, errors: str) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=terminator)
    writer.writerows(records)
    return buf.getvalue().encode("utf-8", errors=errors)


def _row_records(rows: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[list[str]]:
    return [[format_value(row.get(c)) for c in order] for row in rows]


def _write_replace(real: Path, data: bytes, shown: str, mode: int | None) -> None:
    """Write ``data`` to a temporary file next to ``real``, fsync, and rename it over."""
    tmp = real.parent / f".{real.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    fsync_dir(real.parent)


def _backup(real: Path, data: bytes, shown: str, mode: int, kind: str = "bak") -> Path:
    """Write ``data`` (the file's current bytes) to a new
    ``<name>.<kind>-YYYYmmdd-HHMMSS[-n]``."""
    base = f"{real.name}.{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(10_000):
        backup = real.parent / (base if n == 0 else f"{base}-{n}")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputError(f"{shown}: cannot create backup '{backup}': "
                              f"{e.strerror or e}") from None
        try:
            try:
                os.fchmod(fd, mode)
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            try:
                os.unlink(backup)
            except OSError:
                pass
            raise OutputError(f"{shown}: cannot write backup '{backup}': "
                              f"{e.strerror or e}") from None
        return backup
    raise OutputError(f"{shown}: no free backup name '{base}-N'")


def _terminator(text: str) -> str:
    end = text.find("\n")
    if end > 0 and text[end - 1] == "\r":
        return "\r\n"
    if end >= 0:
        return "\n"
    return "\r\n"  # csv's default, what the harness writes


def _check_columns(columns: Sequence[str]) -> list[str]:
    cols = list(columns)
    if not cols:
        raise ValueError("append_rows: no columns")
    seen: set[str] = set()
    for c in cols:
        if not isinstance(c, str):
            raise ValueError(f"append_rows: column name {c!r} is not a string")
        if c in seen:
            raise ValueError(f"append_rows: column '{c}' listed twice")
        seen.add(c)
    return cols


def append_rows(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]],
                columns: Sequence[str], *, lock_timeout: float = LOCK_TIMEOUT_S) -> list[str]:
    """Append ``rows`` to the CSV at ``path`` atomically, under ``<path>.lock``.

    ``columns`` is the schema the rows follow (the file's
    :func:`~engine.results.columns.header`); a row key outside it raises ``ValueError``, a missing key
    is an empty cell. Rows are written in the file's column order. See the module doc for
    creation, header upgrade (with a ``.bak-`` copy) and repair. Raises
    :class:`OutputError` when the file cannot be written; the file is then as it was.
    No rows: nothing happens.

    Returns what the user must be told: one line per upgrade or repair done (``[]`` for a
    plain append), e.g. ``runs/master_groups.csv: its incomplete last line (a write cut
    off) was removed; the file as it was is kept in runs/master_groups.csv.bak-...``.
    """
    cols = _check_columns(columns)
    allowed = set(cols)
    rows = list(rows)
    for i, row in enumerate(rows):
        unknown = [k for k in row if k not in allowed]
        if unknown:
            raise ValueError(f"append_rows: row {i} has keys outside columns: {unknown}")
    if not rows:
        return []
    shown = os.fspath(path)
    real = check_target(shown)
    make_dirs(real.parent, os.path.dirname(os.path.abspath(shown)))
    lock = _locked(real, shown, lock_timeout)
    try:
        return _append_locked(real, shown, rows, cols)
    finally:
        lock.release()


def _told(shown: str, torn: bool, added: list[str], backup: Path) -> str:
    """The one line saying what an upgrade or a repair did to ``shown`` and where the
    file as it was is kept (the backup named the way ``shown`` names the file)."""
    done = []
    if torn:
        done.append("its incomplete last line (a write cut off) was removed")
    if added:
        some = ", ".join(added[:3]) + (", ..." if len(added) > 3 else "")
        done.append(f"its header was upgraded with {len(added)} new "
                    f"column{'s' if len(added) != 1 else ''} ({some})")
    kept = os.path.join(os.path.dirname(shown), backup.name)
    return f"{shown}: {' and '.join(done)}; the file as it was is kept in {kept}"


def _append_locked(real: Path, shown: str, rows: list[Mapping[str, Any]],
                   cols: list[str]) -> list[str]:
    """Append under the lock already held; the lines :func:`append_rows` returns."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        data = _encode([cols], "\r\n", "strict") + _encode(
            _row_records(rows, cols), "\r\n", "backslashreplace")
        _write_replace(real, data, shown, None)
        return []
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"results file '{shown}' is not a regular file "
                              f"({file_kind(st.st_mode)})")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    mode = stat.S_IMODE(st.st_mode)

    text = data.decode("utf-8", errors="surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        # Empty (or blank) file: nothing to keep, write it whole.
        payload = _encode([cols], "\r\n", "strict") + _encode(
            _row_records(rows, cols), "\r\n", "backslashreplace")
        _write_replace(real, payload, shown, mode)
        return []
    terminator = _terminator(text)

    # Fast path: a complete file (ends with a line break, balanced quotes) only needs its
    # header parsed. Anything else goes through the full parser, which decides for sure.
    if text.endswith(("\n", "\r")) and text.count('"') % 2 == 0:
        raise_field_limit()
        header = next(csv.reader(io.StringIO(text, newline="")), [])
        records: list[list[str]] | None = None
        torn = False
    else:
        records, torn = parse_records(text)
        header = records[0] if records else []
    if not header:
        raise OutputError(f"{shown}: the file has no header line")
    union = header + [c for c in cols if c not in header]

    if union == header and not torn:
        _append_bytes(real, shown, _encode(_row_records(rows, header), terminator,
                                           "backslashreplace"))
        return []

    # Upgrade (new columns) or repair (torn tail): back up, then rewrite whole by name.
    if records is None:
        records, torn = parse_records(text)
    if len(set(header)) != len(header):
        dup = next(c for c in header if header.count(c) > 1)
        raise OutputError(f"{shown}: column '{dup}' appears twice in the header; "
                          f"cannot add columns safely (fix or move the file)")
    body: list[list[str]] = []
    malformed: list[list[str]] = []
    for n, record in enumerate(records[1:], start=2):
        if not record:
            continue  # a blank line
        if len(record) > len(header):
            raise OutputError(f"{shown}: record {n} has {len(record)} fields but the header "
                              f"has {len(header)}; cannot add columns safely "
                              f"(fix or move the file)")
        if len(record) < len(header):
            # Every row written has the header's width: a shorter record is garbage (a
            # hand edit, stray NUL or 0xff bytes). Padded, it would become a phantom row
            # that readers skip without a word; it goes to a side file instead (issue 43).
            malformed.append(record)
            continue
        values = dict(zip(header, record, strict=False))
        body.append([values.get(c, "") for c in union])
    backup = _backup(real, data, shown, mode)
    told = []
    if malformed:
        side = _side_file(real, _encode(malformed, terminator, "surrogateescape"), shown, mode)
        count = len(malformed)
        told.append(f"{shown}: {count} malformed line{'s' if count != 1 else ''} (fewer "
                    f"fields than the header: a hand edit or stray bytes) moved to "
                    f"{os.path.join(os.path.dirname(shown), side.name)}")
    payload = (_encode([union], terminator, "surrogateescape")
               + _encode(body, terminator, "surrogateescape")
               + _encode(_row_records(rows, union), terminator, "backslashreplace"))
    _write_replace(real, payload, shown, mode)
    return [_told(shown, torn, union[len(header):], backup), *told]


def _side_file(real: Path, data: bytes, shown: str, mode: int) -> Path:
    """The malformed lines a repair takes out of ``real``, kept in a new
    ``<name>.malformed-YYYYmmdd-HHMMSS[-n]`` beside it (written before the rewrite: a
    failure leaves the results file as it was)."""
    return _backup(real, data, shown, mode, kind="malformed")


def _append_bytes(real: Path, shown: str, payload: bytes) -> None:
    """Append ``payload`` with one write (looping on short writes) and fsync; on failure
    truncate the file back to its previous size."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    try:
        before = os.fstat(fd).st_size
        try:
            write_all(fd, payload)
            os.fsync(fd)
        except BaseException as e:
            undo = _truncate(fd, before)
            if not isinstance(e, OSError):
                raise
            reason = e.strerror or str(e)
            if undo is not None:
                raise OutputError(f"{shown}: {reason}; the partial row could not be removed "
                                  f"({undo}), the file may end with a torn line") from None
            raise OutputError(f"{shown}: {reason}") from None
    finally:
        os.close(fd)


def _truncate(fd: int, size: int) -> str | None:
    """Cut the file back to ``size`` bytes; the error text if that failed."""
    try:
        os.ftruncate(fd, size)
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.fsync(fd)
    except OSError:
        pass
    return None


def _locked(real: Path, shown: str, lock_timeout: float) -> filelock.FileLock:
    lock_path = f"{real}.lock"
    lock = filelock.FileLock(lock_path, timeout=lock_timeout)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise OutputError(f"{lock_path}: still locked after {lock_timeout:g} s "
                          f"(another process writing '{shown}'?)") from None
    except OSError as e:
        raise OutputError(f"{lock_path}: cannot take the lock: {e.strerror or e}") from None
    return lock


def append_group(runs_dir: str | os.PathLike[str], group: Mapping[str, Any],
                 jobs: Sequence[Mapping[str, Any]], *,
                 lock_timeout: float = LOCK_TIMEOUT_S) -> list[str]:
    """Append a group's job rows and its group row as one unit: both or neither. Returns
    the lines saying what was upgraded or repaired in either file (see :func:`append_rows`).

    Takes the job file's lock, then the group file's (always in that order, so writers of
    either file cannot deadlock), appends the job rows, then the group row. If the group row
    cannot be written (a full disk), the job rows just appended are cut off again, so no job
    row is ever left without its group.

    Raises:
        OutputError: nothing was written (or, if even the roll-back failed, which rows remain).
    """
    runs = Path(runs_dir)
    jobs_shown, group_shown = os.fspath(runs / INDIVIDUAL_FILE), os.fspath(runs / GROUPS_FILE)
    jobs_real, group_real = check_target(jobs_shown), check_target(group_shown)
    make_dirs(runs, os.path.abspath(runs_dir))
    cols_jobs = _check_columns(header(INDIVIDUAL_FILE))
    cols_group = _check_columns(header(GROUPS_FILE))
    for row, cols in [(r, cols_jobs) for r in jobs] + [(group, cols_group)]:
        unknown = [k for k in row if k not in set(cols)]
        if unknown:
            raise ValueError(f"append_group: keys outside columns: {unknown}")
    jobs_lock = _locked(jobs_real, jobs_shown, lock_timeout)
    try:
        group_lock = _locked(group_real, group_shown, lock_timeout)
        try:
            before = jobs_real.stat().st_size if jobs_real.exists() else None
            head = _head(jobs_real)
            told = []
            if jobs:
                told += _append_locked(jobs_real, jobs_shown, list(jobs), cols_jobs)
            try:
                told += _append_locked(group_real, group_shown, [group], cols_group)
            except OutputError as exc:
                if jobs:
                    _roll_back(jobs_real, jobs_shown, before, head, exc)
                raise
            return told
        finally:
            group_lock.release()
    finally:
        jobs_lock.release()


def _head(real: Path) -> bytes:
    try:
        with open(real, "rb") as f:
            return f.readline()
    except FileNotFoundError:
        return b""


def _roll_back(real: Path, shown: str, before: int | None, head: bytes, cause: Exception) -> None:
    """Remove job rows appended just now (we still hold the file's lock)."""
    try:
        if before is None:
            real.unlink()
            return
        if _head(real) == head:  # a plain append: the new rows are exactly the tail
            fd = os.open(real, os.O_WRONLY | os.O_CLOEXEC)
            try:
                if _truncate(fd, before) is None:
                    return
            finally:
                os.close(fd)
    except OSError:
        pass
    raise OutputError(f"{cause}; and the group's job rows could not be removed from {shown} "
                      f"(they have no group row)") from None
