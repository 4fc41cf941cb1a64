"""The parity contract (engine.executors.unified.contract): the table docs/fidelity.md
carries is the module's, its rounding bound is the documented formula within the ceiling
the contract set, the tests it names exist, and the kernel-dispatch matrix picks its
setting by vendor and ISA and judges its runs as documented."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

from engine.executors.unified import contract

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT / "scripts"))
import parity_matrix  # noqa: E402


def test_the_docs_table_is_the_contract():
    text = (ROOT / "docs" / "fidelity.md").read_text()
    block = re.search(r"<!-- parity-contract:begin -->\n(.*?)\n<!-- parity-contract:end -->",
                      text, re.S)
    assert block, "docs/fidelity.md lost its parity-contract block"
    assert block.group(1) == contract.render_table()


def test_the_rounding_bound_is_the_documented_formula():
    u = 2.0 ** -24
    assert contract.rounding_bound(1, 1) == pytest.approx(3 * u)
    assert contract.rounding_bound(10, 128) == pytest.approx(3 * math.sqrt(1280) * u)
    assert contract.rounding_bound(1, 4, "float64") == pytest.approx(6 * 2.0 ** -53)
    # grows with the steps and the reduction, like the number of rounding terms
    assert contract.rounding_bound(2, 1) > contract.rounding_bound(1, 1)
    assert contract.rounding_bound(1, 2) > contract.rounding_bound(1, 1)
    assert contract.layer_reduction(64, 32, 16) == 64 and contract.layer_reduction(6, 4, 32) == 32
    # not looser than the ceiling for fp32 after 10 steps on the tests' MLPs (three Linear
    # layers 64 -> 32 -> 32 -> 4 at batch 32, or two BatchNorm layers more)
    mlp = 64 + 32 + 32
    assert contract.rounding_bound(10, mlp) <= contract.FP32_CEILING_10_STEPS
    assert contract.rounding_bound(10, mlp + 2 * 32) <= contract.FP32_CEILING_10_STEPS
    for bad in ((0, 1), (1, 0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            contract.rounding_bound(*bad)
    with pytest.raises(ValueError, match="float16"):
        contract.rounding_bound(1, 1, "float16")


def test_the_pass_bound_is_twice_gamma_n_per_layer():
    u = 2.0 ** -24
    assert contract.pass_bound(1) == pytest.approx(2 * u / (1 - u))
    assert contract.pass_bound(64) == pytest.approx(2 * 64 * u / (1 - 64 * u))
    assert contract.pass_bound(32, layers=2) == pytest.approx(2 * contract.pass_bound(32))
    assert contract.pass_bound(64, dtype="float64") < contract.pass_bound(64) * 1e-8
    with pytest.raises(ValueError, match="must be >= 1"):
        contract.pass_bound(0)
    with pytest.raises(ValueError, match="too long"):
        contract.pass_bound(2 ** 24)


def test_the_adam_bound_is_twice_the_largest_step_per_step():
    # default betas: (1 - 0.9) / sqrt(1 - 0.999) = 3.16 > 1
    assert contract.adam_bound(10, 1e-3) == pytest.approx(2 * 10 * 1e-3 * 0.1 / math.sqrt(1e-3))
    # (1 - 0.5) / sqrt(1 - 0.5) < 1: the step is at most lr
    assert contract.adam_bound(3, 0.1, (0.5, 0.5)) == pytest.approx(2 * 3 * 0.1)
    for bad in ((0, 1e-3, (0.9, 0.999)), (1, 0.0, (0.9, 0.999)), (1, 1e-3, (1.0, 0.999))):
        with pytest.raises(ValueError, match="need steps"):
            contract.adam_bound(*bad)


def test_every_path_is_classified_and_names_tests_that_exist():
    names = [p.name for p in contract.PATHS]
    assert len(names) == len(set(names))
    for p in contract.PATHS:
        assert p.holds in ("construction", "bound", "statistical"), p.name
        assert bool(p.bound) == (p.holds != "construction"), p.name
        for module in re.findall(r"test_\w+", p.tests):
            found = list((ROOT / "tests").rglob(f"{module}.py"))
            assert found, f"{p.name}: names {module}, which does not exist"
    assert contract.path('unified_model, kernels = "exact"').holds == "construction"
    with pytest.raises(KeyError, match="no parity path"):
        contract.path("nonsense")


@pytest.mark.parametrize("vendor,isa,want", [
    ("GenuineIntel", "AVX512", {"MKL_CBWR": "AVX2"}),
    ("AuthenticAMD", "AVX512", {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    ("AuthenticAMD", "AVX2", {"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": "default"}),
    ("GenuineIntel", "AVX2", {"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": "default"}),
    ("", "DEFAULT", {"ATEN_CPU_CAPABILITY": "default"}),
])
def test_the_matrix_picks_its_second_setting_by_vendor_and_isa(vendor, isa, want):
    setting, why = parity_matrix.host_setting(vendor, isa)
    assert setting == want and why


def test_the_matrix_counts_probes_that_differ_and_the_margin():
    default = {"a": {"digest": "1"}, "b": {"digest": "2", "diff": 1e-7, "bound": 1e-6,
                                           "kind": "rounding"},
               "c": {"digest": "3", "diff": 0.5, "bound": 1.0, "kind": "half"}}
    other = {"a": {"digest": "1"}, "b": {"digest": "9", "diff": 3e-7, "bound": 1e-6,
                                         "kind": "rounding"},
             "d": {"digest": "4"}}
    n, total, keys = parity_matrix.compare(default, other)
    assert (n, total, keys) == (1, 2, ["b"])  # only probes present in both count
    # a table bound (half precision) is not the contract's rounding bound
    assert parity_matrix.worst_margin(default) == (pytest.approx(0.1), "b")
    assert parity_matrix.worst_margin(other) == (pytest.approx(0.3), "b")


def test_the_matrix_fails_when_compatible_changes_nothing(tmp_path, monkeypatch, capsys):
    """Three runs that record the same digests: the matrix would test nothing, so it
    fails; one differing digest under COMPATIBLE makes it pass; a failing run fails it."""
    monkeypatch.setattr(parity_matrix, "_torch_facts",
                        lambda python: {"torch": "x", "isa": "AVX512", "mkl": True})
    outcome = {"code": 0, "compat_digest": "same"}

    def fake_run(python, setting, record, extra):
        digest = outcome["compat_digest"] if setting.get("MKL_CBWR") == "COMPATIBLE" else "same"
        record.write_text(json.dumps({"t::p": {"key": "t::p", "digest": digest}}))
        return outcome["code"], "1 passed, 9 deselected in 1.0s", 1.0

    monkeypatch.setattr(parity_matrix, "run_setting", fake_run)
    assert parity_matrix.main(["--keep", str(tmp_path / "a")]) == 1
    assert "COMPATIBLE changed no probed result" in capsys.readouterr().out
    outcome["compat_digest"] = "other"
    assert parity_matrix.main(["--keep", str(tmp_path / "b")]) == 0
    assert "1 of 1" in capsys.readouterr().out
    outcome["code"] = 1
    assert parity_matrix.main(["--keep", str(tmp_path / "c")]) == 1
    assert "a parity test fails" in capsys.readouterr().out
    outcome["code"] = 5  # pytest: nothing collected
    assert parity_matrix.main(["--keep", str(tmp_path / "d")]) == 1
    assert "no parity test selected" in capsys.readouterr().out
    outcome["code"] = 4  # pytest: a path that does not exist
    assert parity_matrix.main(["--keep", str(tmp_path / "e"), "nowhere.py"]) == 2
    assert "could not run" in capsys.readouterr().out


def test_the_matrix_passes_pytest_options_through(tmp_path, monkeypatch):
    monkeypatch.setattr(parity_matrix, "_torch_facts",
                        lambda python: {"torch": "x", "isa": "AVX512", "mkl": True})
    seen = []

    def fake_run(python, setting, record, extra):
        seen.append(list(extra))
        record.write_text(json.dumps({"t::p": {"key": "t::p", "digest": str(len(seen))}}))
        return 0, "1 passed in 1.0s", 1.0

    monkeypatch.setattr(parity_matrix, "run_setting", fake_run)
    assert parity_matrix.main(["--keep", str(tmp_path), "tests/unit", "-k", "layout"]) == 0
    assert seen == [["-k", "layout", "tests/unit"]] * 3


def test_the_matrix_skips_without_mkl(monkeypatch, capsys):
    monkeypatch.setattr(parity_matrix, "_torch_facts",
                        lambda python: {"torch": "x", "isa": "DEFAULT", "mkl": False})
    monkeypatch.setattr(parity_matrix, "run_setting",
                        lambda *a: pytest.fail("no run without MKL"))
    assert parity_matrix.main([]) == 0
    assert "no MKL" in capsys.readouterr().out


def test_probes_record_what_they_compare_and_fail_honestly():
    torch = pytest.importorskip("torch")
    from tests.parity import Parity, digest, relative_diff, scale_of

    records: list = []
    p = Parity("t", records)
    a = torch.tensor([1.0, 2.0, 4.0])
    p.same("x", a, a.clone())
    with pytest.raises(AssertionError, match="not bit for bit"):
        p.same("x", a, a + torch.tensor([0.0, 0.0, 1e-6]))
    assert p.within("y", a * (1 + 1e-7), a, 1e-6) == pytest.approx(1e-7, rel=0.2)
    with pytest.raises(AssertionError, match="above its bound"):
        p.within("y", a * (1 + 1e-5), a, 1e-6)
    with pytest.raises(AssertionError, match="above its bound"):
        p.within("nan", a * float("nan"), a, 1.0)
    assert [r["key"] for r in records] == ["t::x", "t::x#1", "t::y", "t::y#1", "t::nan"]
    assert records[2]["kind"] == "rounding" and records[2]["bound"] == 1e-6
    # the digest sees one bit, the dtype and the shape
    b = a.clone()
    b[1] = torch.nextafter(b[1], torch.tensor(3.0))
    assert digest(a) != digest(b) and digest(a) == digest(a.clone())
    assert digest(a) != digest(a.double()) and digest(a) != digest(a.view(3, 1))
    assert digest(torch.ones(2, dtype=torch.bfloat16)) != digest(torch.ones(2))
    # normwise over a model: a gradient that is all rounding is judged at the model's scale
    assert relative_diff(torch.tensor([2e-9]), torch.tensor([1e-9])) == pytest.approx(1.0)
    assert relative_diff(torch.tensor([2e-9]), torch.tensor([1e-9]),
                         scale_of([torch.tensor([1.0])])) == pytest.approx(1e-9)
