"""The precision axis while planning (issue 26), torch-free: the campaign key and its
``amp`` synonym, an experiment's default, the cells and their keys (the key rule: what ran
before the axis keeps its key), ``fugue-tui run --precision``, the dashboard's plan form,
and the device check (NVML's compute capability, through the fake NVML)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.define.campaign import parse_campaign
from engine.define.catalogue import load_catalogue
from engine.define.matrix import build_cells, check_plan_size
from engine.errors import ConfigError
from engine.measure.nvml import resolve_gpu
from engine.plugins import load_builtins
from engine.precision import PRECISIONS, applied, device_refusal, hashed, parse_axis
from tests.fixtures.fake_nvml import FakeDevice, FakeNVML, device_config

REPO = Path(__file__).resolve().parents[4]
MACHINE = {"host": "h", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2.14.1"}


@pytest.fixture(autouse=True)
def _builtins():
    load_builtins()


def _cells(**doc):
    return build_cells(parse_campaign({"name": "p", "experiments": "D_ens,D_reg",
                                       "executors": ["seq", "unified_model"], **doc}, "c.toml"),
                       MACHINE)


# ------------------------------------------------------------------ the campaign key

def test_axis_values_synonym_and_errors():
    assert parse_axis({}, "c") is None
    assert parse_axis({"precision": "bf16"}, "c") == ["bf16"]
    assert parse_axis({"precision": ["bf16", "fp32", "bf16"]}, "c") == ["bf16", "fp32"]
    assert parse_axis({"amp": True}, "c") == ["amp-fp16"]
    assert parse_axis({"amp": False}, "c") == ["fp32"]
    for doc, needle in (({"precision": []}, "empty list"), ({"precision": "fp8"}, "'fp8'"),
                        ({"amp": True, "precision": "fp32"}, "both set"),
                        ({"precision": "amp_bf16"}, "did you mean 'amp-bf16'")):
        with pytest.raises(ConfigError, match=needle):
            parse_axis(doc, "c.toml")


def test_a_list_runs_one_cell_per_value_in_order_named_in_slug_and_label():
    cells = _cells(precision=list(PRECISIONS))
    assert len(cells) == 2 * 2 * 5
    first = [(c.exp_id, c.executor, c.precision) for c in cells[:5]]
    assert first == [("D_ens", "seq", p) for p in PRECISIONS]
    assert cells[0].slug == "001-D_ens-seq-p1" and "fp32" not in cells[0].label
    assert cells[4].slug == "005-D_ens-seq-bf16-p1" and cells[4].label.endswith("bf16 pass 1")
    assert len({c.key for c in cells}) == len(cells)
    campaign = parse_campaign({"name": "p", "experiments": "D_ens", "executors": ["seq"],
                               "precision": list(PRECISIONS), "passes": 4}, "c.toml")
    check_plan_size(campaign)  # counts the axis: 20 cells, within the bounds


def test_the_key_rule_fp32_keeps_the_legacy_key_every_other_value_does_not():
    legacy = _cells()
    fp32 = _cells(precision="fp32")
    assert [c.key for c in fp32] == [c.key for c in legacy]
    assert [c.config_key for c in fp32] == [c.config_key for c in legacy]
    assert all(c.precision is None for c in legacy) and all(c.precision == "fp32" for c in fp32)
    for name in PRECISIONS[1:]:
        other = _cells(precision=name)
        assert not {c.key for c in other} & {c.key for c in legacy}, name
        # a seq baseline of the same workload (precision joins the analysis's baseline key)
        assert [c.workload_key for c in other] == [c.workload_key for c in legacy]
    # amp = true is precision = "amp-fp16", key for key
    assert [c.key for c in _cells(amp=True)] == [c.key for c in _cells(precision="amp-fp16")]


def test_the_legacy_amp_flag_and_an_explicit_request_are_different_cells():
    """E05 has amp = false, E01 amp = true in the catalogue: an explicit amp-fp16 request
    applies on the CPU where the legacy flag did not, so both are hashed; explicit fp32 on
    E01 is not what the legacy flag ran on CUDA, so it is hashed too."""
    assert hashed("amp-fp16", [True], None) and hashed("amp-fp16", [False], None)
    assert hashed("fp32", [True], None) and not hashed("fp32", [False], None)
    assert not hashed("bf16", [False], "bf16") and hashed("fp32", [False], "bf16")
    assert not hashed(None, [True], None)
    assert applied("amp-fp16", "cpu", explicit=False)[0] == "fp32"
    assert applied("amp-fp16", "cpu", explicit=True) == ("amp-fp16", "")


def test_an_experiment_sets_a_default_and_a_campaign_overrides_it(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('[experiments.D_ens]\nprecision = "amp-bf16"\n'
                    '[experiments.E01]\nprecision = "bf16"\n')  # over the catalogue's amp
    catalogue = load_catalogue(mine)
    assert catalogue.get("D_ens").precision == "amp-bf16"
    assert catalogue.get("E01").precision == "bf16" and catalogue.get("E01").amp is True
    assert "precision" not in load_catalogue().get("D_ens").to_dict()  # keys unchanged
    doc = {"name": "p", "experiments": "D_ens", "executors": ["seq"],
           "experiments_file": str(mine)}
    (default,) = build_cells(parse_campaign(doc, "c.toml"), MACHINE)
    assert default.precision == "amp-bf16" and default.slug == "001-D_ens-seq-amp-bf16-p1"
    cells = build_cells(parse_campaign({**doc, "precision": ["amp-bf16", "fp32"]}, "c.toml"),
                        MACHINE)
    assert [c.precision for c in cells] == ["amp-bf16", "fp32"]
    assert cells[0].key == default.key  # the default itself adds nothing to the key
    mine.write_text('[experiments.D_ens]\namp = true\nprecision = "bf16"\n')
    with pytest.raises(ConfigError, match="'amp' and 'precision' are both set"):
        load_catalogue(mine)


# ------------------------------------------------------------------ the device check

def test_nvml_reports_the_compute_capability_and_bf16_needs_ampere():
    nvml = FakeNVML([FakeDevice("GPU-t4", compute_capability=(7, 5)),
                     FakeDevice("GPU-a100", name="NVIDIA A100", compute_capability=(8, 0)),
                     FakeDevice("GPU-old", unsupported={"compute_capability"})])
    t4, a100, old = (resolve_gpu(f"cuda:{i}", {}, nvml) for i in range(3))
    assert (t4["compute_capability"], a100["compute_capability"]) == ("7.5", "8.0")
    assert old["compute_capability"] is None
    for name in ("tf32", "amp-bf16", "bf16"):
        assert f"'{name}'" in device_refusal(["fp32", name], t4)
        assert device_refusal([name], a100) is None
        assert device_refusal([name], old) is None  # NVML silent: the cell records what ran
    assert device_refusal(["fp32", "amp-fp16"], t4) is None
    assert device_refusal(["bf16"], None) is None  # the CPU


def test_an_ampere_gpu_plans_bf16(tmp_path):
    """The refusal's counterpart (the refusals are rows of test_bad_input_precision.py):
    on a fake A100 the dry run plans every precision."""
    (tmp_path / "nvml.json").write_text(json.dumps(
        [device_config(uuid="GPU-a100-plan", name="NVIDIA A100", compute_capability=[8, 0])]))
    (tmp_path / "c.toml").write_text('experiments = "D_ens"\ndevice = "cuda"\n'
                                     'precision = ["fp32", "tf32", "bf16"]\n')
    env = dict(os.environ, FAKE_NVML_CONFIG=str(tmp_path / "nvml.json"), COLUMNS="200",
               CUDA_VISIBLE_DEVICES="GPU-a100-plan",
               PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "fixtures" / "fake_nvml_site"),
                                           str(REPO)]))
    out = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "c.toml", "--dry-run"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3 cells of c.toml" in out.stdout and "precision" in out.stdout
    assert " bf16 " in out.stdout and " tf32 " in out.stdout
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ front ends

def test_run_precision_builds_the_axis(tmp_path, monkeypatch):
    import fugue_tui.console.batch
    from engine.define.campaign import load_campaign
    from fugue_tui.cli import main

    seen = []

    def capture(path, overrides, **_):
        seen.append(load_campaign(path, overrides))
        return 0

    monkeypatch.setattr(fugue_tui.console.batch, "run_batch", capture)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--exp", "D_ens", "--precision", "amp-bf16,fp32", "bf16",
                 "--dry-run"]) == 0
    assert seen[0].precision == ["amp-bf16", "fp32", "bf16"]


def test_the_dashboard_plan_form_sets_the_precision_axis(tmp_path, monkeypatch):
    from textual.widgets import DataTable, Input

    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.screens.plan import PlanScreen
    from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
    from tests.app_screen import until

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    def plan(app) -> PlanScreen:
        return next(s for s in app.screen_stack if isinstance(s, PlanScreen))

    def rows(app) -> list[list[str]]:
        table = plan(app).query_one("#preview", DataTable)
        return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=(150, 46)) as pilot:
            await until(pilot, lambda: plan(app).query_one(CatalogueTree).experiments,
                        what="catalogue")
            tree = plan(app).query_one(CatalogueTree)
            tree.focus()
            await pilot.press("j", "j", "space")  # D_ens (the cursor starts on the first line)
            await until(pilot, lambda: rows(app), what="the preview")
            legacy_key = rows(app)[0][6]
            plan(app).query_one("#f-precision", Input).value = "fp32, bf16"
            await until(pilot, lambda: len(rows(app)) == 2, what="two precisions")
            got = rows(app)
            assert [r[3] for r in got] == ["–", "bf16"]
            assert got[0][6] == legacy_key  # fp32 keeps the key the cell had
            assert plan(app).form.doc["precision"] == ["fp32", "bf16"]
            plan(app).query_one("#f-precision", Input).value = "fp8"
            await until(pilot, lambda: "fp8" in str(plan(app).query_one("#preview-summary")
                                                     .render()), what="the error")

    asyncio.run(scenario())
