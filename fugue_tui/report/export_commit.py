"""An export made crash-consistent (issue 43): every file is first written into a hidden
staging folder ``DIR/.export-tmp-<pid>/``; once all are complete each replaces its target
with one ``os.replace`` (a kill at any moment leaves every target either the complete old
or the complete new version, never a truncated one), and ``manifest.json`` naming the
files and their SHA-256 is replaced last, so a reader can tell a complete export: every
file the manifest names hashes as it says. Files the export does not own are never
touched; a staging folder left by an export that was killed is removed by the next one
(with a one-line note).

``FUGUE_EXPORT_KILL_AT`` (tests only): ``staged``, ``replaced-<n>`` (after the n-th
replacement), ``aside-<n>`` (a folder moved aside where it cannot be swapped) or
``manifest`` sends SIGKILL to this process at that stage, so a test can
kill a real export at each stage deterministically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
from pathlib import Path

#: The manifest's file name (an owned file: :func:`fugue_tui.report.export.planned_files`).
MANIFEST = "manifest.json"
#: The staging folder's name prefix (hidden; ``<prefix><pid>``).
STAGING_PREFIX = ".export-tmp-"
_KILL_AT = "FUGUE_EXPORT_KILL_AT"


def kill_point(stage: str) -> None:
    """SIGKILL this process when ``FUGUE_EXPORT_KILL_AT`` names ``stage`` (tests only)."""
    if os.environ.get(_KILL_AT) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``, through
    ctypes: the standard library has no call for it); False where the system or the file
    system cannot (the caller then renames twice).

    Raises:
        OSError: the swap was possible but failed (naming ``b``).
    """
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(out: Path) -> list[str]:
    """Remove the staging folders under ``out`` of exports that are no longer running (a
    killed export's); one note per folder removed."""
    notes = []
    if not out.is_dir():
        return notes
    for path in sorted(out.glob(STAGING_PREFIX + "*")):
        pid = path.name[len(STAGING_PREFIX):]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue  # not ours to judge, or an export still running
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        notes.append(f"removed {path}: the staging folder of an export that was interrupted "
                     f"(the files it replaced are whole; see {MANIFEST})")
    return notes


def staging_folder(out: Path) -> Path:
    """A fresh, empty staging folder under ``out`` (created with ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f"{STAGING_PREFIX}{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _hashes(tmp: Path, names: list[str]) -> dict[str, str]:
    """``{relative path: sha256}`` of every file staged (a folder's files one by one)."""
    out = {}
    for name in names:
        path = tmp / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            out[file.relative_to(tmp).as_posix()] = _sha256(file)
    return out


def commit(tmp: Path, out: Path, staged: list[Path], owned_present: list[Path]) -> list[Path]:
    """Move the ``staged`` files (top-level entries of ``tmp``) over their targets in
    ``out``, remove the owned files of an earlier export this one did not write
    (``owned_present``), then replace ``manifest.json``; the final paths (the manifest
    last). A folder (``tensorboard/``) is swapped with the old one in one step
    (:func:`exchange`), else by two renames.

    Raises:
        OSError: the manifest's write failed (nothing replaced yet), or a rename failed
            (earlier targets stay replaced; the manifest still describes the earlier
            export, so a reader can tell).
    """
    names = [p.relative_to(tmp).as_posix() for p in staged]
    manifest = tmp / MANIFEST  # written before any rename: the renames need no space
    manifest.write_text(json.dumps({"format": "fugue-tui/export", "version": 1,
                                    "files": _hashes(tmp, names)}, indent=1,
                                   sort_keys=True) + "\n")
    kill_point("staged")
    written = []
    for i, name in enumerate(names, 1):
        source, target = tmp / name, out / name
        if source.is_dir() and target.is_dir() and not target.is_symlink():
            # a folder cannot be renamed over a full one: swapped in one step where the
            # system can (the old one lands in the staging folder, removed with it), else
            # moved aside first (a kill between the two renames leaves the folder absent)
            if not exchange(source, target):
                os.replace(target, tmp / f".old-{name}")
                kill_point(f"aside-{i}")
                os.replace(source, target)
        else:
            os.replace(source, target)
        written.append(target)
        kill_point(f"replaced-{i}")
    for path in set(owned_present) - set(written):
        if path.name == MANIFEST:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    kill_point("manifest")
    os.replace(manifest, out / MANIFEST)
    return [*written, out / MANIFEST]


def verify(out: Path) -> list[str]:
    """The files of the export in ``out`` that do not match its manifest (missing or
    another SHA-256); empty for a complete export. No manifest: ``[MANIFEST]``."""
    try:
        files = json.loads((out / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return [MANIFEST]
    return [name for name, digest in files.items()
            if not (out / name).is_file() or _sha256(out / name) != digest]
