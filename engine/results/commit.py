"""The group row is the commit record of a group's job rows.

A cell appends its job rows, then its group row (:func:`engine.results.store.append_group`);
a write error between the two rolls the job rows back, but a SIGKILL cannot be rolled back:
the job rows stay without their group row. So:

- every reader treats job rows whose ``group_id`` has no group row as absent
  (:func:`committed_jobs`, used by :func:`engine.results.load.load_runs`, hence report,
  analysis and the dashboard; the JSON progress stream only emits jobs of groups it saw);
- the runner, when it writes the row of an attempt that ended without its own
  (killed, crashed), first removes the job rows the attempt left under the same
  ``group_id`` (:func:`append_failed_group`): otherwise the runner's ``killed``/``failed``
  row would commit the dead cell's half-written ``ok`` job rows.

``--resume`` decides from the group rows alone, so uncommitted job rows never count there.

Torch-free; pandas is not imported at module level (the runner imports this module).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import OutputError
from engine.results import store
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE, header
from engine.results.paths import check_target, make_dirs
from engine.results.read import parse_records

if TYPE_CHECKING:
    import pandas as pd


def committed_jobs(jobs: pd.DataFrame, groups: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``jobs`` without the rows whose ``group_id`` no row of ``groups`` has (a cell killed
    between its job rows and its group row), and how many were left out. Rows without a
    ``group_id`` (the harness's older files) are kept; so is every row when the group
    frame has no ``group_id`` column to check against."""
    if "group_id" not in jobs.columns or "group_id" not in groups.columns or jobs.empty:
        return jobs, 0
    known = set(groups["group_id"].fillna("").astype(str)) - {""}
    gid = jobs["group_id"].fillna("").astype(str)
    keep = (gid == "") | gid.isin(known)
    dropped = int((~keep).sum())
    return (jobs[keep] if dropped else jobs), dropped


def uncommitted_note(dropped: int) -> str:
    """The line telling a reader that ``dropped`` job rows were left out."""
    return (f"{INDIVIDUAL_FILE}: {dropped} job row{'s' if dropped != 1 else ''} without "
            f"{'their' if dropped != 1 else 'its'} group row (a cell killed between writing "
            "them) left out; the file is unchanged")


def append_failed_group(runs_dir: str | os.PathLike[str], group: Mapping[str, Any], *,
                        lock_timeout: float = store.LOCK_TIMEOUT_S) -> list[str]:
    """Append the runner's row for an attempt that ended without writing its own, after
    removing the job rows that attempt left under ``group["group_id"]``.

    Takes the job file's lock, then the group file's (the order of
    :func:`~engine.results.store.append_group`). If the group row already exists (the cell
    committed, then died), nothing is removed. Returns the lines to tell the user (a
    removal, an upgrade or repair of either file).

    Raises:
        OutputError: a file cannot be written (one line); when the job rows could not be
            removed, the group row is not written either.
    """
    runs = Path(runs_dir)
    jobs_shown, group_shown = os.fspath(runs / INDIVIDUAL_FILE), os.fspath(runs / GROUPS_FILE)
    jobs_real, group_real = check_target(jobs_shown), check_target(group_shown)
    make_dirs(runs, os.path.abspath(runs_dir))
    gid = str(group.get("group_id") or "")
    jobs_lock = store._locked(jobs_real, jobs_shown, lock_timeout)
    try:
        group_lock = store._locked(group_real, group_shown, lock_timeout)
        try:
            told = []
            if gid and not _has_group(group_real, gid):
                told += _drop_jobs(jobs_real, jobs_shown, gid)
            told += store._append_locked(group_real, group_shown, [dict(group)],
                                         list(header(GROUPS_FILE)))
            return told
        finally:
            group_lock.release()
    finally:
        jobs_lock.release()


def _read(real: Path, shown: str) -> bytes | None:
    try:
        return real.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None


def _has_group(real: Path, gid: str) -> bool:
    data = _read(real, os.fspath(real))
    if data is None or gid.encode() not in data:
        return False
    records, _ = parse_records(data.decode("utf-8", errors="surrogateescape"))
    if not records or "group_id" not in records[0]:
        return False
    at = records[0].index("group_id")
    return any(len(r) > at and r[at] == gid for r in records[1:])


def _drop_jobs(real: Path, shown: str, gid: str) -> list[str]:
    """Rewrite the job file without ``gid``'s rows (temporary file + rename, so a kill
    leaves the old or the new file); nothing when it has none."""
    data = _read(real, shown)
    if data is None or gid.encode() not in data:
        return []
    text = data.decode("utf-8", errors="surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    records, torn = parse_records(text)
    if not records or "group_id" not in records[0]:
        return []
    at = records[0].index("group_id")
    kept = [r for r in records[1:] if not (len(r) > at and r[at] == gid)]
    dropped = len(records) - 1 - len(kept)
    if not dropped:
        return []
    mode = real.stat().st_mode & 0o7777
    payload = store._encode([records[0], *kept], store._terminator(text), "surrogateescape")
    store._write_replace(real, payload, shown, mode)
    cut = " and its incomplete last line" if torn else ""
    return [f"{shown}: {dropped} job row{'s' if dropped != 1 else ''} of group {gid} "
            f"(its cell was killed after writing them, before its group row){cut} removed"]
