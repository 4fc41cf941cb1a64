"""``fugue-tui prefetch [SELECTOR] [--data-dir DIR]``: download the datasets of the selected
experiments (default all) into the data root, each into a temporary folder inside it that is
renamed into place only once complete (the downloaders: :mod:`fugue_tui.commands.downloads`).
Exit 2 when a dataset could not be fetched."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from engine.errors import ConfigError, one_line
from fugue_tui.commands.common import load_catalogue_and_plugins, selected

#: Datasets that scikit-learn ships: nothing to download.
BUNDLED = ("digits", "wine", "breast_cancer", "diabetes")
_TMP_PREFIX = ".prefetch-"


def _clean_stale(root: Path) -> None:
    """Remove temporary folders that a killed prefetch left behind (their pid is gone)."""
    for path in root.glob(f"{_TMP_PREFIX}*"):
        found = re.match(rf"{re.escape(_TMP_PREFIX)}.+?-(\d+)-", path.name)
        if not found or not path.is_dir():
            continue
        try:
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (PermissionError, OverflowError):
            pass



def prefetch(selector: list[str] | None = None, data_dir: str | None = None,
             experiments_file: str | None = None, out=None) -> int:
    """Fetch the datasets of the selected experiments; one line per dataset. Exit 0 when
    every dataset is present afterwards, 2 when one could not be fetched.

    Raises:
        ConfigError: unknown experiment, malformed experiments file, unusable data dir.
    """
    from engine.define.workloads import expand
    from engine.parts.dataset_files import data_root

    out = out or sys.stdout
    catalogue = load_catalogue_and_plugins(experiments_file)
    ids = selected(catalogue, selector, "prefetch")
    names: list[str] = []
    for exp_id in ids:
        for job in expand(catalogue.get(exp_id)):
            if job.dataset not in names:
                names.append(job.dataset)
    from engine.define.paths import user_path

    # An empty --data-dir is a mistake, not "the default" (it silently fetched elsewhere).
    root = user_path(data_dir, "argument --data-dir") if data_dir is not None else data_root()
    created = _missing_folders(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(f"not writable: {root}")
    except OSError as exc:
        _remove_empty(created)
        raise ConfigError(f"prefetch: data dir {root}: {exc.strerror or exc}") from None
    try:
        return _fetch_all(names, ids, root, data_dir, out)
    finally:
        # a prefetch that fetched nothing (offline, Ctrl-C) leaves no empty data dir of its
        # own making behind; a folder that was there, or now holds data, stays
        _remove_empty(created)


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first (what ``mkdir(parents=
    True)`` will create)."""
    out = []
    for p in (path, *path.parents):
        if os.path.lexists(p):
            break
        out.append(p)
    return out


def _remove_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (deepest first) that is empty; stop at one that is not."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _fetch_all(names: list[str], ids: list[str], root: Path, data_dir: str | None,
               out) -> int:
    from engine import registry
    from engine.parts.dataset_files import data_root

    _clean_stale(root)
    note = ""
    if data_dir and root.resolve() != data_root().resolve():
        note = f"; runs read FUGUE_DATA_DIR, so set FUGUE_DATA_DIR={root}"
    print(f"prefetching {_count(len(names), 'dataset')} of {_count(len(ids), 'experiment')} "
          f"into {root}{note}", file=out, flush=True)
    failed = left = 0
    for name in names:
        line, ok = _prefetch_one(name, root, registry.DATASETS)
        failed += ok is False
        left += ok is None
        print(f"{name}: {line}", file=out, flush=True)
    if left:
        print(f"{_count(left, 'dataset')} left to plugins (not fetched here)", file=out)
    if failed:
        print(f"{failed} of {_count(len(names), 'dataset')} could not be fetched", file=out)
    return 2 if failed else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _prefetch_one(name: str, root: Path, datasets) -> tuple[str, bool | None]:
    """``(line, True)`` present or fetched; ``(line, False)`` a fetch failed; ``(line,
    None)`` nothing this command can fetch (a dataset only a plugin provides or loads)."""
    # Imported here, not at the top: every command builds prefetch's parser (add_parser)
    # and the downloaders load the catalogue's availability checks.
    from fugue_tui.commands.downloads import FETCHERS, Unfetchable, is_network, quiet

    if name not in datasets:
        return "not registered, skipped (a plugin must provide it: FUGUE_PLUGINS)", None
    spec = datasets.get(name)
    try:
        ok, reason = spec.available(root)
    except Exception as exc:  # a plugin's check
        ok, reason = False, f"availability check failed: {one_line(exc)}"
    builtin = getattr(spec.load, "__module__", "") == "engine.parts.datasets"
    if ok:
        return ("bundled with scikit-learn, nothing to fetch" if builtin and name in BUNDLED
                else "present, skipped"), True
    if name not in FETCHERS or not builtin:
        return f"no download known for this dataset, skipped: {reason}", None
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-{os.getpid()}-", dir=root))
    started = time.monotonic()
    try:
        with quiet():
            FETCHERS[name](tmp, root)
    except Unfetchable as exc:
        return str(exc), False
    except KeyboardInterrupt:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:
        why = "download failed (no network?)" if is_network(exc) else "download failed"
        return f"{why}: {one_line(exc)}", False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok, reason = spec.available(root)
    if not ok:
        return f"downloaded, but still not usable: {reason}", False
    return f"downloaded into {root} ({time.monotonic() - started:.1f} s)", True


def add_parser(sub) -> None:
    from fugue_tui.commands.arguments import add_experiments_file

    parser = sub.add_parser(
        "prefetch", help="download the datasets of the selected experiments (default all)",
        description="Download the datasets of the selected experiments (default all) into the "
                    "data root (FUGUE_DATA_DIR, or --data-dir). Present datasets are skipped; "
                    "scikit-learn's bundled ones need nothing. Each download goes to a "
                    "temporary folder inside the data root and is renamed into place only when "
                    "complete. Exit 2 when a dataset could not be fetched.")
    parser.add_argument("selector", nargs="*", metavar="SELECTOR",
                        help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all (default all)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="download here instead of FUGUE_DATA_DIR")
    add_experiments_file(parser, "experiments_file_sub")


def run(args) -> int:
    return prefetch(args.selector, args.data_dir,
                    args.experiments_file_sub or args.experiments_file)
