"""Built-in datasets: declared shapes match what loads, availability answers from files."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from engine.errors import ConfigError
from engine.parts import dataset_files, datasets
from engine.registry import DATASETS

OFFLINE = {"digits": 1797, "wine": 178, "breast_cancer": 569, "diabetes": 442}


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_offline_dataset_matches_its_spec(name):
    spec = DATASETS.get(name)
    assert spec.available(None) == (True, "")
    bundle = datasets.load_dataset(name)
    assert (bundle.name, bundle.task, bundle.in_shape, bundle.n_outputs) == (
        name, spec.task, spec.in_shape, spec.n_outputs)
    assert bundle.train_x.shape == (OFFLINE[name], *spec.in_shape)
    assert bundle.train_x.dtype == torch.float32 and bundle.train_x.device.type == "cpu"
    assert bundle.train_y.shape == (OFFLINE[name],)
    assert not torch.isnan(bundle.train_x).any() and not torch.isnan(bundle.train_y.float()).any()
    assert bundle.test_x is None and bundle.test_y is None and not bundle.has_test
    assert bundle.source
    if spec.task == "classification":
        assert bundle.train_y.dtype == torch.int64
        assert set(bundle.train_y.unique().tolist()) == set(range(spec.n_outputs))
    else:
        assert bundle.train_y.dtype == torch.float32 and spec.n_outputs == 1


def test_digits_are_unit_range_images():
    bundle = datasets.load_dataset("digits")
    assert bundle.in_shape == (1, 8, 8)
    assert float(bundle.train_x.min()) == 0.0 and float(bundle.train_x.max()) == 1.0


@pytest.mark.parametrize("name", ["wine", "breast_cancer", "diabetes"])
def test_tabular_features_are_standardised(name):
    x = datasets.load_dataset(name).train_x.double()
    assert torch.allclose(x.mean(0), torch.zeros(x.shape[1], dtype=x.dtype), atol=1e-5)
    assert torch.allclose(x.std(0, unbiased=False), torch.ones(x.shape[1], dtype=x.dtype),
                          atol=1e-4)


def test_diabetes_target_is_standardised_and_says_so():
    bundle = datasets.load_dataset("diabetes")
    y = bundle.train_y.double()
    assert abs(float(y.mean())) < 1e-6 and abs(float(y.std(unbiased=False)) - 1) < 1e-6
    assert "standardised" in bundle.source


def test_data_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path))
    assert dataset_files.data_root() == tmp_path
    monkeypatch.delenv("FUGUE_DATA_DIR")
    assert dataset_files.data_root().parts[-3:] == (".cache", "fugue-tui", "data")


@pytest.mark.parametrize("name, folder", [("cifar10", "cifar-10-batches-py"),
                                          ("cifar100", "cifar-100-python"),
                                          ("mnist", "MNIST")])
def test_image_datasets_unavailable_in_empty_root(monkeypatch, tmp_path, name, folder):
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path))
    ok, reason = DATASETS.get(name).available(None)
    assert not ok
    assert str(tmp_path / folder) in reason and "FUGUE_DATA_DIR" in reason
    with pytest.raises(ConfigError, match=rf"dataset '{name}' is not available: .*{folder}"):
        datasets.load_dataset(name)


def test_cal_housing_unavailable_names_paths_and_fetch(monkeypatch, tmp_path):
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "sk"))
    ok, reason = DATASETS.get("cal_housing").available(None)
    assert not ok
    assert str(tmp_path / "data" / "cal_housing_py3.pkz") in reason
    assert str(tmp_path / "sk" / "cal_housing_py3.pkz") in reason
    assert "fetch_california_housing" in reason
    assert not (tmp_path / "sk").exists()  # answering created nothing


def test_unknown_dataset_names_the_nearest():
    with pytest.raises(ConfigError, match=r"unknown dataset 'cifar1O'.*did you mean 'cifar10'"):
        datasets.load_dataset("cifar1O")


def _idx(path, magic, arr):
    path.write_bytes(struct.pack(">i", magic) + struct.pack(f">{arr.ndim}i", *arr.shape)
                     + arr.astype(np.uint8).tobytes())


def test_tiny_fake_mnist_loads_normalised(monkeypatch, tmp_path):
    """Four raw idx files in torchvision's layout: shapes, dtypes and normalisation."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 6), ("t10k", 4)):
        _idx(raw / f"{prefix}-images-idx3-ubyte", 2051, rng.integers(0, 256, (n, 28, 28)))
        _idx(raw / f"{prefix}-labels-idx1-ubyte", 2049, np.arange(n) % 10)
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path))
    assert DATASETS.get("mnist").available(None) == (True, "")
    bundle = datasets.load_dataset("mnist")
    assert bundle.train_x.shape == (6, 1, 28, 28) and bundle.test_x.shape == (4, 1, 28, 28)
    assert bundle.train_x.dtype == torch.float32 and bundle.train_y.dtype == torch.int64
    assert bundle.test_y.tolist() == [0, 1, 2, 3] and bundle.has_test
    lo, hi = (0 - 0.1307) / 0.3081, (1 - 0.1307) / 0.3081
    assert float(bundle.train_x.min()) >= lo - 1e-5 and float(bundle.train_x.max()) <= hi + 1e-5


# --------------------------------------------------------------------------- the bundled-data cache

@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer", "diabetes"])
def test_cached_arrays_equal_scikit_learns_and_the_second_load_skips_it(monkeypatch, tmp_path,
                                                                        name):
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("FUGUE_NO_DATASET_CACHE", raising=False)
    fresh = dataset_files._sklearn_fetch(name)
    first = dataset_files.sklearn_arrays(name)            # fetches and writes the cache
    assert len(list(dataset_files.dataset_cache_dir().glob(f"{name}-scikit-learn-*.npz"))) == 1
    calls = []
    monkeypatch.setattr(dataset_files, "_sklearn_fetch", lambda n: calls.append(n))
    second = dataset_files.sklearn_arrays(name)           # must not touch scikit-learn
    assert calls == []
    for a, b, c in zip(fresh, first, second, strict=False):
        assert a.dtype == c.dtype and a.shape == c.shape
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_a_corrupt_or_tampered_cache_is_refetched(monkeypatch, tmp_path):
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("FUGUE_NO_DATASET_CACHE", raising=False)
    data, target = dataset_files.sklearn_arrays("wine")
    (path,) = dataset_files.dataset_cache_dir().glob("wine-*.npz")
    path.write_bytes(path.read_bytes()[:100])        # torn
    again, _ = dataset_files.sklearn_arrays("wine")
    np.testing.assert_array_equal(again, data)
    bad = data.copy()
    bad[0, 0] += 1.0                                  # same shape, other values, old digest
    with np.load(path) as z:
        digest = z["sha256"]
    np.savez(path, data=bad, target=target, sha256=digest)
    again, _ = dataset_files.sklearn_arrays("wine")
    np.testing.assert_array_equal(again, data)
    with np.load(path) as z:                          # and the file was rewritten
        np.testing.assert_array_equal(z["data"], data)


def test_unwritable_root_still_loads_and_opt_out_bypasses(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUGUE_DATA_DIR", str(blocker))  # .cache cannot be created below a file
    data, _ = dataset_files.sklearn_arrays("wine")
    assert data.shape == (178, 13)
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "root"))
    monkeypatch.setenv("FUGUE_NO_DATASET_CACHE", "1")
    dataset_files.sklearn_arrays("wine")
    assert not (tmp_path / "root").exists()
