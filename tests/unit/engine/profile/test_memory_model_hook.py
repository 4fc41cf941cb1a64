"""The per-executor memory-model hook (issue 40, item 5; docs/executors.md, "Memory
model"): the estimate asks the model an executor declares with its name and options
(``ExecutorSpec.memory_model``), including a plugin's; an executor that declares none is
estimated as one job at a time with a note naming it; an unregistered one is refused.
Torch-free."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import plugins
from engine.errors import ConfigError
from engine.executors import ExecutorSpec
from engine.profile.budget import Budget
from engine.profile.estimate import fits, memory_model, predict
from engine.profile.memory_model import ONE_AT_A_TIME, MemoryModel, Prediction
from engine.profile.store import Profile
from engine.registry import EXECUTORS

PLUGIN_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "plugins"
PLUGIN = "fugue_memory_plugin"


@pytest.fixture
def memory_plugin(monkeypatch):
    """tests/fixtures/plugins/fugue_memory_plugin.py loaded the way every process loads
    plugins (``FUGUE_PLUGINS``, ``load_plugins``); its executors unregistered after."""
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv("FUGUE_PLUGINS", PLUGIN)
    assert "zz_pool" not in EXECUTORS and "zz_plain" not in EXECUTORS
    try:
        plugins.load_plugins()
        yield
    finally:
        for name in ("zz_pool", "zz_plain"):
            EXECUTORS.items.pop(name, None)
        plugins._loaded.discard(PLUGIN)
        plugins._versions.pop(PLUGIN, None)
        sys.modules.pop(PLUGIN, None)


def _profile(**figures) -> Profile:
    row = {"rss1_mb": "500", "rss_per_member_mb": "100", "parent_rss_mb": "400",
           "private1_mb": "150", "ray_import_mb": "40"}
    row.update({k: str(v) for k, v in figures.items()})
    return Profile(row)


def test_every_builtin_declares_its_model_with_its_name():
    for name in ("seq", "mp", "ray", "unified_model"):
        model, declared = memory_model(name)
        assert declared and model is EXECUTORS.get(name).memory_model
        assert model.summary
    assert EXECUTORS.get("seq").memory_model.concurrency == "one"
    assert {EXECUTORS.get(n).memory_model.concurrency for n in ("mp", "ray")} == {"processes"}
    assert EXECUTORS.get("unified_model").memory_model.concurrency == "shared"


def test_a_plugin_executors_own_model_is_what_the_estimate_uses(memory_plugin):
    p = _profile()
    assert predict(p, "zz_pool", 4) == (300 + 4 * 500, None,
                                        ["zz_pool: the thread stacks are not measured"])
    est = fits(p, "zz_pool", 20, Budget(ram_mb=4000, cores=1))
    # 300 + K x 500 <= 3600 -> K = 6; "shared": one process, so the single core is no bound
    assert (est.k, est.limiting, est.ram_mb) == (6, "ram", 3300)
    assert est.notes == ["zz_pool: the thread stacks are not measured"]


def test_a_plugin_executor_without_a_model_runs_one_job_at_a_time_and_says_so(memory_plugin):
    p = _profile(device_context_mb=300, device_reserved_mb='{"1": 700}')
    model, declared = memory_model("zz_plain")
    assert model is ONE_AT_A_TIME and not declared
    est = fits(p, "zz_plain", 8, Budget(ram_mb=1e6, cores=64, device_mb=1e6))
    assert (est.k, est.limiting, est.ram_mb, est.device_mb) == (1, "executor", 500, 1000)
    assert est.notes == ["executor 'zz_plain' declares no memory model: estimated as one "
                         "job at a time (docs/executors.md, \"Memory model\")"]
    # the note is the only difference from seq's model (seq declares it, so says nothing)
    seq = fits(p, "seq", 8, Budget(ram_mb=1e6, cores=64, device_mb=1e6))
    assert (seq.k, seq.ram_mb, seq.device_mb, seq.notes) == (1, 500, 1000, [])


def test_auto_resolves_a_plugin_executor_through_its_model(memory_plugin):
    """``max_parallel = "auto"`` goes through the same estimate (engine.profile.auto)."""
    from engine.profile.auto import estimate_cell
    from engine.profile.store import job_key, profile_id
    from tests.unit.engine.profile.test_profile_estimate import IDENT

    job = {"model": "mlp", "model_kwargs": {}, "dataset": "wine", "batch_size": 16,
           "optimizer": "sgd", "optimizer_kwargs": {}, "amp": False}
    key = job_key(job, "off", "cpu")
    row = {"profile_id": profile_id(key, IDENT), **IDENT, **key, "rss1_mb": "500"}
    est, ids, _ = estimate_cell([job] * 10, "zz_pool", compile_mode="off", device="cpu",
                                profiles=[Profile(row)], ident=IDENT,
                                budget=Budget(ram_mb=2000, cores=4))
    assert est is not None and (est.k, est.limiting) == (3, "ram")   # 300 + 500 K <= 1800
    assert ids == [row["profile_id"]]


def test_an_unregistered_executor_is_refused_by_name():
    with pytest.raises(ConfigError, match="unknown executor 'unifed_model'.*unified_model"):
        fits(_profile(), "unifed_model", 4, Budget(ram_mb=1000, cores=4))


def test_a_malformed_declaration_fails_when_declared():
    with pytest.raises(TypeError, match="memory_model must be an engine.profile"):
        ExecutorSpec(name="zz_bad", label="Bad", target="x:Y",
                     memory_model=lambda f, k, s: Prediction(None, None, []))
    with pytest.raises(TypeError, match="concurrency must be one of one, shared, processes"):
        MemoryModel(lambda f, k, s: Prediction(None, None, []), "threads")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="predict must be callable"):
        MemoryModel("not callable")  # type: ignore[arg-type]
