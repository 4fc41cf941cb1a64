"""Where the built-in datasets' files live and what is there, from files only: the data root
($FUGUE_DATA_DIR), each dataset's availability check (with what is missing and how to fetch
it), and the verified ``.npz`` cache of scikit-learn's bundled arrays (:func:`sklearn_arrays`).
The loaders themselves, and the table of built-ins, are :mod:`engine.parts.datasets`.

Torch-free: nothing here imports torch, torchvision or scikit-learn at import time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_CIFAR10_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                  "data_batch_5", "test_batch", "batches.meta")
_CIFAR100_FILES = ("train", "test", "meta")
_MNIST_RAW = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CAL_HOUSING_FILE = "cal_housing_py3.pkz"


def data_root() -> Path:
    """``$FUGUE_DATA_DIR`` if set, else an existing ``~/.cache/fugue-tui/data``, else the
    platform's user cache folder's ``data`` (:func:`engine.dirs.data_dir`; not created
    here)."""
    from engine.dirs import data_dir

    return data_dir()


def root_dir(root: str | Path | None) -> Path:
    return Path(root).expanduser() if root is not None else data_root()


def root_note(root: str | Path | None) -> str:
    """How the data root was chosen, for reasons: the user fixes it via FUGUE_DATA_DIR."""
    if root is not None:
        return f"data root {root_dir(root)}"
    from engine.dirs import data_dir_note

    return data_dir_note()


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def sklearn_available(root: str | Path | None = None) -> tuple[bool, str]:
    if not has_module("sklearn"):
        return False, "scikit-learn is not installed (pip install scikit-learn)"
    return True, ""


#: Bumped when what the cache holds changes meaning (the key also carries scikit-learn's
#: version: a new scikit-learn may ship different bundled files).
_CACHE_FORMAT = 1


def dataset_cache_dir(root: str | Path | None = None) -> Path:
    """Where :func:`sklearn_arrays` keeps its copies: ``<data root>/.cache``."""
    return root_dir(root) / ".cache"


def _sklearn_fetch(name: str) -> tuple[Any, Any]:
    import sklearn.datasets as skd

    if name == "diabetes":
        d = skd.load_diabetes(scaled=False)
    else:
        d = getattr(skd, f"load_{name}")()
    return d.data, d.target


def sklearn_arrays(name: str, root: str | Path | None = None) -> tuple[Any, Any]:
    """``(data, target)`` of scikit-learn's bundled dataset ``name`` exactly as
    ``sklearn.datasets.load_<name>()`` returns them (``diabetes``: ``scaled=False``), read
    from a cached ``.npz`` when one is there.

    The cache file (``dataset_cache_dir()/<name>-scikit-learn-<version>-f<format>.npz``)
    holds the arrays and the SHA-256 of their bytes; a file that is unreadable, has another
    digest or another scikit-learn version's name is ignored and rewritten (atomically:
    temporary file + ``os.replace``, so a concurrent reader sees the old file or the new
    one, never half of one). A data root that cannot be written only costs the speed-up.
    ``FUGUE_NO_DATASET_CACHE=1`` bypasses the cache (to measure scikit-learn's own cost).
    """
    import numpy as np

    if os.environ.get("FUGUE_NO_DATASET_CACHE") == "1":
        return _sklearn_fetch(name)
    try:
        from importlib.metadata import version

        sk_version = version("scikit-learn")
    except Exception:  # noqa: BLE001 - no metadata: no trustworthy key, no cache
        return _sklearn_fetch(name)
    path = dataset_cache_dir(root) / f"{name}-scikit-learn-{sk_version}-f{_CACHE_FORMAT}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            data, target, digest = z["data"], z["target"], str(z["sha256"])
        if digest == _digest(data, target):
            return data, target
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        pass  # absent, torn by a crash of another writer, or not ours: fetch and rewrite
    data, target = _sklearn_fetch(name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, data=data, target=target, sha256=np.array(_digest(data, target)))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return data, target


def _digest(data: Any, target: Any) -> str:
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for a in (data, target):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


# --- California housing (scikit-learn's download cache) -----------------------------------

def _sklearn_data_home() -> Path:
    """scikit-learn's default data home, computed as ``get_data_home`` does but without
    importing scikit-learn or creating the folder."""
    return Path(os.environ.get("SCIKIT_LEARN_DATA", "~/scikit_learn_data")).expanduser()


def cal_housing_home(root: str | Path | None) -> tuple[Path | None, list[Path]]:
    """The first of (root, scikit-learn's data home) holding the cache file, and both."""
    candidates = [root_dir(root), _sklearn_data_home()]
    for home in candidates:
        if (home / CAL_HOUSING_FILE).is_file():
            return home, candidates
    return None, candidates


def cal_housing_available(root: str | Path | None = None) -> tuple[bool, str]:
    ok, reason = sklearn_available()
    if not ok:
        return ok, reason
    home, candidates = cal_housing_home(root)
    if home is None:
        tried = " or ".join(str(c / CAL_HOUSING_FILE) for c in candidates)
        return False, (f"California housing not found: no {tried} ({root_note(root)}); "
                       f"fetch it once with python -c \"from sklearn.datasets import "
                       f"fetch_california_housing as f; f(data_home='{candidates[0]}')\"")
    return True, ""


def _files_available(folder: str, files: tuple[str, ...], label: str, how: str
                     ) -> Callable[[str | Path | None], tuple[bool, str]]:
    def available(root: str | Path | None = None) -> tuple[bool, str]:
        if not has_module("torchvision"):
            return False, (f"{label} needs torchvision: pip install 'fugue-tui[vision]'")
        base = root_dir(root) / folder
        missing = [f for f in files if not (base / f).is_file()]
        if missing:
            what = base if len(missing) == len(files) else base / missing[0]
            return False, f"{label} not found: missing {what} ({root_note(root)}); {how}"
        return True, ""

    return available


#: How to get a torchvision dataset: our own command first (it verifies and caches what
#: it fetches), torchvision's call for those who want it by hand.
_TV_HOW = ("fetch it once with `fugue-tui prefetch EXPERIMENT` (or "
           "torchvision.datasets.{cls}(root=<data root>, download=True))")


def mnist_available(root: str | Path | None = None) -> tuple[bool, str]:
    raw = _files_available("MNIST/raw", _MNIST_RAW, "MNIST", _TV_HOW.format(cls="MNIST"))
    ok, reason = raw(root)
    if ok:
        return ok, reason
    # torchvision still reads the legacy processed/{training,test}.pt files.
    legacy = root_dir(root) / "MNIST" / "processed"
    if has_module("torchvision") and all((legacy / f).is_file()
                                          for f in ("training.pt", "test.pt")):
        return True, ""
    return ok, reason


cifar10_available = _files_available("cifar-10-batches-py", _CIFAR10_FILES, "CIFAR-10",
                                      _TV_HOW.format(cls="CIFAR10"))
cifar100_available = _files_available("cifar-100-python", _CIFAR100_FILES, "CIFAR-100",
                                       _TV_HOW.format(cls="CIFAR100"))

def always_available(root: str | Path | None = None) -> tuple[bool, str]:
    return True, ""
