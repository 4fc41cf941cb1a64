"""Built-in datasets, held in memory as CPU tensors (``DatasetBundle``).

Torch-free at import: every loader imports torch, torchvision or scikit-learn inside
itself, and ``available(root)`` only looks at files, so the runner and the dashboard can
say what is missing without loading anything.

Offline, bundled with scikit-learn (always available):
  ``digits``        1797 8x8 images, pixels/16 → [0, 1], in_shape (1, 8, 8), 10 classes.
  ``wine``          178 x 13 features, 3 classes.
  ``breast_cancer`` 569 x 30 features, 2 classes.
  ``diabetes``      442 x 10 features, regression target standardised (z-score).
Generated in memory (always available):
  ``synthetic_cifar10`` CIFAR-10-shaped noise, 10,000 + 2,000 images, seed 0: for
                throughput measurements only (the GPU check); accuracy is chance.
Tabular features are z-scored with the mean and std of the *whole* dataset (there is no
official split, and jobs draw their own holdouts and folds): a small, deliberate leak of
first and second moments into validation, the same for every executor.

From disk, under ``data_root()`` ($FUGUE_DATA_DIR, else ~/.cache/fugue-tui/data):
  ``cifar10``/``cifar100`` torchvision's python pickles (root/cifar-10-batches-py,
                root/cifar-100-python), (3, 32, 32), 10/100 classes, official test split.
  ``mnist``      torchvision's raw idx files (root/MNIST/raw), (1, 28, 28), 10 classes.
  ``cal_housing`` scikit-learn's cache file ``cal_housing_py3.pkz`` (in root or in
                scikit-learn's data home), 20640 x 8 features, regression (target in
                units of $100,000, not standardised).
The scikit-learn bundled arrays are cached (see :func:`sklearn_arrays`): importing
scikit-learn costs ~2.5 s per process on the 2-core reference VM, paid by every cell and
every mp/ray worker otherwise (bench part ``fixed_cost``).
Images are scaled to [0, 1] then normalised per channel with the training set's mean and
std (constants below, with their sources). Nothing is downloaded here: FUGUE_OFFLINE-style
behaviour is the only behaviour; a missing dataset is reported with how to fetch it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.registry import DATASETS, DatasetSpec, register_dataset

# Per-channel mean/std of the training images after scaling to [0, 1].
# CIFAR-10: population std over all 50,000 training images (not the often-copied
# 0.2023/0.1994/0.2010, which average per-image stds): kuangliu/pytorch-cifar issue #19.
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
# CIFAR-100, computed the same way over its 50,000 training images
# (gist weiaicunzai/e623931921efefd4c331622c344d8151, referenced from the issue above).
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)
# MNIST: pytorch/examples mnist/main.py, transforms.Normalize((0.1307,), (0.3081,)).
MNIST_MEAN = (0.1307,)
MNIST_STD = (0.3081,)

_CIFAR10_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                  "data_batch_5", "test_batch", "batches.meta")
_CIFAR100_FILES = ("train", "test", "meta")
_MNIST_RAW = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_CAL_HOUSING_FILE = "cal_housing_py3.pkz"


@dataclass
class DatasetBundle:
    """One dataset in memory, ready to index.

    ``train_x``: float32 CPU tensor (N, *in_shape); ``train_y``: int64 class indices (N,)
    for classification, float32 targets (N,) for regression; ``test_x``/``test_y`` the same
    for the official test split, or ``None`` when the dataset has none (jobs then hold out
    part of the training pool). ``n_outputs`` is the number of classes, or 1 for
    regression. ``source`` says where the data came from and how it was transformed.
    """

    name: str
    task: str
    in_shape: tuple[int, ...]
    n_outputs: int
    train_x: Any
    train_y: Any
    test_x: Any | None
    test_y: Any | None
    source: str

    @property
    def has_test(self) -> bool:
        return self.test_x is not None


def data_root() -> Path:
    """``$FUGUE_DATA_DIR`` if set, else ``~/.cache/fugue-tui/data`` (not created here)."""
    env = os.environ.get("FUGUE_DATA_DIR")
    return Path(env).expanduser() if env else Path("~/.cache/fugue-tui/data").expanduser()


def _root(root: str | Path | None) -> Path:
    return Path(root).expanduser() if root is not None else data_root()


def _root_note(root: str | Path | None) -> str:
    """How the data root was chosen, for reasons: the user fixes it via FUGUE_DATA_DIR."""
    if root is not None:
        return f"data root {_root(root)}"
    if os.environ.get("FUGUE_DATA_DIR"):
        return f"FUGUE_DATA_DIR={data_root()}"
    return f"FUGUE_DATA_DIR unset, default {data_root()}"


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


# --- scikit-learn bundled data ------------------------------------------------------------

def _sklearn_available(root: str | Path | None = None) -> tuple[bool, str]:
    if not _has_module("sklearn"):
        return False, "scikit-learn is not installed (pip install scikit-learn)"
    return True, ""


def _zscore(x: Any) -> Any:
    """Column z-score with whole-dataset statistics; constant columns are left at 0."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _tabular(name: str, task: str, x: Any, y: Any, n_outputs: int, source: str) -> DatasetBundle:
    import numpy as np
    import torch

    feats = torch.from_numpy(_zscore(x).astype(np.float32))
    if task == "classification":
        target = torch.from_numpy(np.asarray(y, dtype=np.int64))
    else:
        target = torch.from_numpy(np.asarray(y, dtype=np.float32))
    return DatasetBundle(name, task, (feats.shape[1],), n_outputs, feats, target, None, None,
                         source)


#: Bumped when what the cache holds changes meaning (the key also carries scikit-learn's
#: version: a new scikit-learn may ship different bundled files).
_CACHE_FORMAT = 1


def dataset_cache_dir(root: str | Path | None = None) -> Path:
    """Where :func:`sklearn_arrays` keeps its copies: ``<data root>/.cache``."""
    return _root(root) / ".cache"


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


def _load_digits(root: str | Path | None = None) -> DatasetBundle:
    import numpy as np
    import torch

    data, target = sklearn_arrays("digits", root)
    # Pixels are counts 0..16 (4x4 blocks of a 32x32 bitmap): /16 gives [0, 1] images.
    x = torch.from_numpy((data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8))
    y = torch.from_numpy(target.astype(np.int64))
    return DatasetBundle("digits", "classification", (1, 8, 8), 10, x, y, None, None,
                         "sklearn.datasets.load_digits (bundled), pixels/16")


def _load_wine(root: str | Path | None = None) -> DatasetBundle:
    data, target = sklearn_arrays("wine", root)
    return _tabular("wine", "classification", data, target, 3,
                    "sklearn.datasets.load_wine (bundled), features z-scored over all 178 rows")


def _load_breast_cancer(root: str | Path | None = None) -> DatasetBundle:
    data, target = sklearn_arrays("breast_cancer", root)
    return _tabular("breast_cancer", "classification", data, target, 2,
                    "sklearn.datasets.load_breast_cancer (bundled), features z-scored over "
                    "all 569 rows")


def _load_diabetes(root: str | Path | None = None) -> DatasetBundle:
    import numpy as np

    data, target = sklearn_arrays("diabetes", root)
    y = np.asarray(target, dtype=np.float64)
    mean, std = float(y.mean()), float(y.std())
    return _tabular("diabetes", "regression", data, (y - mean) / std, 1,
                    f"sklearn.datasets.load_diabetes (bundled), features z-scored over all "
                    f"442 rows, target standardised (mean {mean:.2f}, std {std:.2f})")


# --- California housing (scikit-learn's download cache) -----------------------------------

def _sklearn_data_home() -> Path:
    """scikit-learn's default data home, computed as ``get_data_home`` does but without
    importing scikit-learn or creating the folder."""
    return Path(os.environ.get("SCIKIT_LEARN_DATA", "~/scikit_learn_data")).expanduser()


def _cal_housing_home(root: str | Path | None) -> tuple[Path | None, list[Path]]:
    """The first of (root, scikit-learn's data home) holding the cache file, and both."""
    candidates = [_root(root), _sklearn_data_home()]
    for home in candidates:
        if (home / _CAL_HOUSING_FILE).is_file():
            return home, candidates
    return None, candidates


def _cal_housing_available(root: str | Path | None = None) -> tuple[bool, str]:
    ok, reason = _sklearn_available()
    if not ok:
        return ok, reason
    home, candidates = _cal_housing_home(root)
    if home is None:
        tried = " or ".join(str(c / _CAL_HOUSING_FILE) for c in candidates)
        return False, (f"California housing not found: no {tried} ({_root_note(root)}); "
                       f"fetch it once with python -c \"from sklearn.datasets import "
                       f"fetch_california_housing as f; f(data_home='{candidates[0]}')\"")
    return True, ""


def _load_cal_housing(root: str | Path | None = None) -> DatasetBundle:
    from sklearn.datasets import fetch_california_housing

    home, _ = _cal_housing_home(root)
    if home is None:
        raise ConfigError(f"dataset 'cal_housing': {_cal_housing_available(root)[1]}")
    d = fetch_california_housing(data_home=str(home), download_if_missing=False)
    return _tabular("cal_housing", "regression", d.data, d.target, 1,
                    f"sklearn.datasets.fetch_california_housing ({home / _CAL_HOUSING_FILE}), "
                    f"features z-scored over all 20640 rows, target in $100,000")


# --- torchvision image datasets -----------------------------------------------------------

def _files_available(folder: str, files: tuple[str, ...], label: str, how: str
                     ) -> Callable[[str | Path | None], tuple[bool, str]]:
    def available(root: str | Path | None = None) -> tuple[bool, str]:
        if not _has_module("torchvision"):
            return False, (f"{label} needs torchvision: pip install 'fugue-tui[vision]'")
        base = _root(root) / folder
        missing = [f for f in files if not (base / f).is_file()]
        if missing:
            what = base if len(missing) == len(files) else base / missing[0]
            return False, f"{label} not found: missing {what} ({_root_note(root)}); {how}"
        return True, ""

    return available


_TV_HOW = "fetch it once with torchvision.datasets.{cls}(root=<data root>, download=True)"


def _mnist_available(root: str | Path | None = None) -> tuple[bool, str]:
    raw = _files_available("MNIST/raw", _MNIST_RAW, "MNIST", _TV_HOW.format(cls="MNIST"))
    ok, reason = raw(root)
    if ok:
        return ok, reason
    # torchvision still reads the legacy processed/{training,test}.pt files.
    legacy = _root(root) / "MNIST" / "processed"
    if _has_module("torchvision") and all((legacy / f).is_file()
                                          for f in ("training.pt", "test.pt")):
        return True, ""
    return ok, reason


def _images_to_tensor(data: Any, channels_last: bool, mean: tuple[float, ...],
                      std: tuple[float, ...]) -> Any:
    """uint8 images (N, H, W, C) or (N, H, W) → float32 (N, C, H, W), /255 then normalised.

    Written in place into one preallocated tensor: CIFAR's 50,000 images are 614 MB as
    float32, and a chain of out-of-place ops would hold two or three copies at once.
    """
    import torch

    u8 = torch.as_tensor(data)
    u8 = u8.permute(0, 3, 1, 2) if channels_last else u8.unsqueeze(1)
    out = torch.empty(u8.shape, dtype=torch.float32)
    out.copy_(u8)
    out.div_(255.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return out.sub_(m).div_(s)


def _torchvision_loader(name: str, cls_name: str, mean: tuple[float, ...],
                        std: tuple[float, ...], n_classes: int, in_shape: tuple[int, ...],
                        available: Callable[..., tuple[bool, str]]
                        ) -> Callable[..., DatasetBundle]:
    def load(root: str | Path | None = None) -> DatasetBundle:
        ok, reason = available(root)
        if not ok:
            raise ConfigError(f"dataset '{name}' is not available: {reason}")
        import torch
        import torchvision

        cls = getattr(torchvision.datasets, cls_name)
        base = _root(root)
        parts = []
        for train in (True, False):
            try:
                ds = cls(root=str(base), train=train, download=False)
            except RuntimeError as exc:  # torchvision's "not found or corrupted" (md5)
                raise ConfigError(f"dataset '{name}' under {base}: {exc}") from None
            # CIFAR keeps numpy (N, H, W, C); MNIST a torch (N, H, W) tensor.
            x = _images_to_tensor(ds.data, channels_last=ds.data.ndim == 4, mean=mean, std=std)
            y = torch.as_tensor(ds.targets, dtype=torch.int64)
            parts.append((x, y))
        (tx, ty), (vx, vy) = parts
        return DatasetBundle(name, "classification", in_shape, n_classes, tx, ty, vx, vy,
                             f"torchvision.datasets.{cls_name} at {base}, /255 then "
                             f"normalised (mean {mean}, std {std})")

    return load


_cifar10_available = _files_available("cifar-10-batches-py", _CIFAR10_FILES, "CIFAR-10",
                                      _TV_HOW.format(cls="CIFAR10"))
_cifar100_available = _files_available("cifar-100-python", _CIFAR100_FILES, "CIFAR-100",
                                       _TV_HOW.format(cls="CIFAR100"))

def _always_available(root: str | Path | None = None) -> tuple[bool, str]:
    return True, ""


def _load_synthetic_cifar10(root: str | Path | None = None) -> DatasetBundle:
    """CIFAR-10-shaped noise for throughput measurements where the real files are absent
    (the GPU check script): 10,000 training and 2,000 test images (3, 32, 32) drawn from
    N(0, 1) and uniform labels, from a generator seeded with 0 (identical for every process
    and executor). Nothing can be learned from it: accuracy is chance by construction."""
    import torch

    gen = torch.Generator().manual_seed(0)
    tx = torch.randn(10000, 3, 32, 32, generator=gen)
    ty = torch.randint(0, 10, (10000,), generator=gen)
    vx = torch.randn(2000, 3, 32, 32, generator=gen)
    vy = torch.randint(0, 10, (2000,), generator=gen)
    return DatasetBundle("synthetic_cifar10", "classification", (3, 32, 32), 10, tx, ty, vx,
                         vy, "synthetic: N(0, 1) images and uniform labels, seed 0 "
                             "(throughput only; accuracy is chance)")


_BUNDLED = "scikit-learn (bundled, offline)"
for _spec in (
    DatasetSpec("digits", _load_digits, "classification", (1, 8, 8), 10, _sklearn_available,
                _BUNDLED, (1797, None)),
    DatasetSpec("wine", _load_wine, "classification", (13,), 3, _sklearn_available, _BUNDLED,
                (178, None)),
    DatasetSpec("breast_cancer", _load_breast_cancer, "classification", (30,), 2,
                _sklearn_available, _BUNDLED, (569, None)),
    DatasetSpec("diabetes", _load_diabetes, "regression", (10,), 1, _sklearn_available,
                _BUNDLED, (442, None)),
    DatasetSpec("cal_housing", _load_cal_housing, "regression", (8,), 1,
                _cal_housing_available, "scikit-learn download cache (cal_housing_py3.pkz)",
                (20640, None)),
    DatasetSpec("cifar10", _torchvision_loader("cifar10", "CIFAR10", CIFAR10_MEAN, CIFAR10_STD,
                                               10, (3, 32, 32), _cifar10_available),
                "classification", (3, 32, 32), 10, _cifar10_available,
                "torchvision CIFAR10 files under FUGUE_DATA_DIR", (50000, 10000)),
    DatasetSpec("cifar100", _torchvision_loader("cifar100", "CIFAR100", CIFAR100_MEAN,
                                                CIFAR100_STD, 100, (3, 32, 32),
                                                _cifar100_available),
                "classification", (3, 32, 32), 100, _cifar100_available,
                "torchvision CIFAR100 files under FUGUE_DATA_DIR", (50000, 10000)),
    DatasetSpec("synthetic_cifar10", _load_synthetic_cifar10, "classification", (3, 32, 32),
                10, _always_available, "generated in memory (seed 0): throughput only",
                (10000, 2000)),
    DatasetSpec("mnist", _torchvision_loader("mnist", "MNIST", MNIST_MEAN, MNIST_STD, 10,
                                             (1, 28, 28), _mnist_available),
                "classification", (1, 28, 28), 10, _mnist_available,
                "torchvision MNIST files under FUGUE_DATA_DIR", (60000, 10000)),
):
    register_dataset(_spec)
del _spec


def dataset_available(name: str, root: str | Path | None = None, where: str = ""
                      ) -> tuple[bool, str]:
    """``(True, "")`` or ``(False, reason)`` for dataset ``name``, from files only.

    Raises:
        ConfigError: unknown dataset (nearest valid name).
    """
    return DATASETS.get(name, where).available(root)


def load_dataset(name: str, root: str | Path | None = None, where: str = "") -> DatasetBundle:
    """Load dataset ``name`` into CPU tensors (``root`` defaults to ``data_root()``).

    Raises:
        ConfigError: one line naming the dataset: unknown (with the nearest name) or not
            available (what is missing, and how to get it).
    """
    spec = DATASETS.get(name, where)
    ok, reason = spec.available(root)
    if not ok:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}dataset '{name}' is not available: {reason}")
    return spec.load(root)
