"""``bench.gpu_publish`` on the archives the first GPU run wrote (kept in
``bench/results/gpu_check/``): the rows a part gives come from the last archive it PASSed
in, with that machine's provenance, and a file that is not an archive is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

from bench import gpu_publish
from bench.results import render_part

ROOT = Path(__file__).resolve().parents[3]
ARCHIVES = sorted((ROOT / "bench" / "results" / "gpu_check").glob("20261204-*-h200.tar.gz"))


def test_each_part_from_the_last_archive_it_passed_in():
    assert len(ARCHIVES) == 3
    rows = gpu_publish.collect([gpu_publish.Archive(p) for p in ARCHIVES])
    by = {(r["figure"], r["variant"]): r for r in rows}
    assert len({r["run_id"] for r in rows}) == 1
    # precision FAILed in the first archive (amp jobs), PASSed in the second: all five there
    amp = by[("T_group resnet18 K=4 amp-fp16", "unified_model")]
    assert amp["command"].endswith("[20261204-2-h200.tar.gz]") and amp["value"] > 0
    # profile_device PASSed only in the third, after its fix
    assert by[("reserved device memory K=8 resnet18", "predicted")]["value"] == 4340.0
    k32 = {v: by[("T_group resnet18 K=32", v)]["value"] for v in ("seq", "unified_model")}
    assert round(k32["seq"] / k32["unified_model"], 2) == 2.49
    assert by[("energy per trained model resnet18 K=32", "seq")]["unit"] == "J/model"
    first = by[("energy over 15 s of matmul load", "nvml_counter")]
    assert first["torch_version"] == "2.11.0" and first["python_version"] == "3.12.3"
    assert first["cpu_model"] == "NVIDIA H200 GPU, driver 580.159.04"
    assert "test_gpu_cells" not in {r["figure"] for r in rows}  # no numbers to publish
    text = render_part("gpu", rows)
    assert "| T_group resnet18 K=32 | unified_model | s | 1 |" in text


def test_not_an_archive_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.tar.gz"
    bad.write_text("not gzip")
    assert gpu_publish.main([str(bad), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu_publish: {bad}: not a GPU check archive") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()
