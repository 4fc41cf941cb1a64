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
The scikit-learn bundled arrays are cached (see
:func:`engine.parts.dataset_files.sklearn_arrays`): importing scikit-learn costs ~2.5 s per
process on the 2-core reference VM, paid by every cell and every mp/ray worker otherwise
(bench part ``fixed_cost``).
Images are scaled to [0, 1] then normalised per channel with the training set's mean and
std (constants below, with their sources). Nothing is downloaded here: FUGUE_OFFLINE-style
behaviour is the only behaviour; a missing dataset is reported with how to fetch it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.parts.dataset_files import (
    CAL_HOUSING_FILE,
    always_available,
    cal_housing_available,
    cal_housing_home,
    cifar10_available,
    cifar100_available,
    mnist_available,
    root_dir,
    sklearn_arrays,
    sklearn_available,
)
from engine.parts.dataset_files import (
    data_root as data_root,  # re-exported: engine.datasets and plugins use it
)
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


def _load_cal_housing(root: str | Path | None = None) -> DatasetBundle:
    from sklearn.datasets import fetch_california_housing

    home, _ = cal_housing_home(root)
    if home is None:
        raise ConfigError(f"dataset 'cal_housing': {cal_housing_available(root)[1]}")
    d = fetch_california_housing(data_home=str(home), download_if_missing=False)
    return _tabular("cal_housing", "regression", d.data, d.target, 1,
                    f"sklearn.datasets.fetch_california_housing ({home / CAL_HOUSING_FILE}), "
                    f"features z-scored over all 20640 rows, target in $100,000")


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
        base = root_dir(root)
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
    DatasetSpec("digits", _load_digits, "classification", (1, 8, 8), 10, sklearn_available,
                _BUNDLED, (1797, None)),
    DatasetSpec("wine", _load_wine, "classification", (13,), 3, sklearn_available, _BUNDLED,
                (178, None)),
    DatasetSpec("breast_cancer", _load_breast_cancer, "classification", (30,), 2,
                sklearn_available, _BUNDLED, (569, None)),
    DatasetSpec("diabetes", _load_diabetes, "regression", (10,), 1, sklearn_available,
                _BUNDLED, (442, None)),
    DatasetSpec("cal_housing", _load_cal_housing, "regression", (8,), 1,
                cal_housing_available, "scikit-learn download cache (cal_housing_py3.pkz)",
                (20640, None)),
    DatasetSpec("cifar10", _torchvision_loader("cifar10", "CIFAR10", CIFAR10_MEAN, CIFAR10_STD,
                                               10, (3, 32, 32), cifar10_available),
                "classification", (3, 32, 32), 10, cifar10_available,
                "torchvision CIFAR10 files under FUGUE_DATA_DIR", (50000, 10000)),
    DatasetSpec("cifar100", _torchvision_loader("cifar100", "CIFAR100", CIFAR100_MEAN,
                                                CIFAR100_STD, 100, (3, 32, 32),
                                                cifar100_available),
                "classification", (3, 32, 32), 100, cifar100_available,
                "torchvision CIFAR100 files under FUGUE_DATA_DIR", (50000, 10000)),
    DatasetSpec("synthetic_cifar10", _load_synthetic_cifar10, "classification", (3, 32, 32),
                10, always_available, "generated in memory (seed 0): throughput only",
                (10000, 2000)),
    DatasetSpec("mnist", _torchvision_loader("mnist", "MNIST", MNIST_MEAN, MNIST_STD, 10,
                                             (1, 28, 28), mnist_available),
                "classification", (1, 28, 28), 10, mnist_available,
                "torchvision MNIST files under FUGUE_DATA_DIR", (60000, 10000)),
):
    register_dataset(_spec)
del _spec


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
