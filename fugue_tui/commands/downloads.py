"""The dataset downloaders behind ``fugue-tui prefetch``: dataset name → a function that
downloads into a temporary folder inside the data root and moves the finished files into
place. Torch-free at import (torchvision / scikit-learn are imported inside the downloaders).
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import urllib.error
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.define.availability import requires_hint
from engine.parts.dataset_files import has_module

#: Seconds without a byte before a download is given up (urllib has no timeout by default).
SOCKET_TIMEOUT_S = 60.0


def _fetch_torchvision(cls_name: str, folder: str) -> Callable[[Path, Path], None]:
    """Download with torchvision's ``download=True`` into ``tmp`` and move ``tmp/folder``
    to ``root/folder``."""

    def fetch(tmp: Path, root: Path) -> None:
        if not has_module("torchvision"):
            raise Unfetchable(f"needs torchvision: {requires_hint('torchvision')}")
        import torchvision

        cls = getattr(torchvision.datasets, cls_name)
        for train in (True, False):  # both splits (one archive for CIFAR, four files for MNIST)
            cls(root=str(tmp), train=train, download=True)
        _move_into_place(tmp / folder, root / folder, tmp)

    return fetch


def _fetch_cal_housing(tmp: Path, root: Path) -> None:
    if not has_module("sklearn"):
        raise Unfetchable("needs scikit-learn: pip install scikit-learn")
    import inspect

    from sklearn.datasets import fetch_california_housing

    kwargs: dict[str, Any] = {"data_home": str(tmp), "download_if_missing": True}
    if "n_retries" in inspect.signature(fetch_california_housing).parameters:
        kwargs.update(n_retries=1, delay=1.0)
    fetch_california_housing(**kwargs)
    _move_into_place(tmp / "cal_housing_py3.pkz", root / "cal_housing_py3.pkz", tmp)


#: Dataset name → ``fetch(tmp, root)``: downloads into ``tmp`` (inside ``root``), then moves
#: the finished files into place. Only the built-in datasets of these names.
FETCHERS: dict[str, Callable[[Path, Path], None]] = {
    "cifar10": _fetch_torchvision("CIFAR10", "cifar-10-batches-py"),
    "cifar100": _fetch_torchvision("CIFAR100", "cifar-100-python"),
    "mnist": _fetch_torchvision("MNIST", "MNIST"),
    "cal_housing": _fetch_cal_housing,
}


class Unfetchable(Exception):
    """A dataset that cannot be fetched here for a reason other than the network."""


def _move_into_place(src: Path, dst: Path, tmp: Path) -> None:
    """Rename a finished download into place; an incomplete copy already there (the reason
    it was fetched) is moved aside into ``tmp`` first, and removed with it."""
    if not src.exists():
        raise Unfetchable(f"the download finished without producing {src.name}")
    if os.path.lexists(dst):
        os.replace(dst, tmp / f"previous-{dst.name}")
    os.replace(src, dst)


def is_network(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout,
                             socket.gaierror)):
            return True
        text = str(seen)
        if "Error downloading" in text or "urlopen error" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False



@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Downloaders print progress bars and per-mirror errors; the user gets one line."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(SOCKET_TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        socket.setdefaulttimeout(previous)
