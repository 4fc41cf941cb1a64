"""The memory estimate of each built-in executor, pinned to the figure (issue 40, item 5).

The per-executor memory models moved from an if-chain in ``engine.profile.estimate`` to a
declaration beside each executor (``ExecutorSpec.memory_model``); this pins what every
built-in predicted before the move, bit for bit: ``predict`` over several K, precisions
(``member_scale``) and mp start methods, and ``fits`` over several budgets, on profiles
that exercise every branch (CPU, GPU, the two stacked lines, figures missing, negative
slopes). ``tests/fixtures/estimate_pins.json`` was written by :func:`compute` on the code
before the move (``python -m tests.unit.engine.profile.test_estimate_pins --write``); a change of model is
a deliberate re-pin, said in its commit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.profile.budget import Budget
from engine.profile.estimate import fits, predict
from engine.profile.store import Profile

PINS = Path(__file__).resolve().parents[3] / "fixtures" / "estimate_pins.json"
EXECUTORS = ("seq", "mp", "ray", "unified_model")

#: Profiles, as the profiles file's text columns: each exercises some branch of a model.
PROFILES: dict[str, dict[str, str]] = {
    "cpu_plain": {"rss1_mb": "500", "rss_per_member_mb": "100", "parent_rss_mb": "400",
                  "private1_mb": "150", "ray_import_mb": "40"},
    "cpu_two_lines": {"rss1_mb": "880.3", "rss_stack_base_mb": "840.7",
                      "rss_per_member_mb": "321.6", "rss_setup_base_mb": "3270.1",
                      "rss_setup_per_member_mb": "61.6", "parent_rss_mb": "611.9",
                      "private1_mb": "233.3", "ray_import_mb": "97.1"},
    "gpu": {"rss1_mb": "2100.5", "rss_stack_base_mb": "1950", "rss_per_member_mb": "77.7",
            "parent_rss_mb": "1800", "private1_mb": "410.2", "ray_import_mb": "120.4",
            "device_context_mb": "512.3", "device_reserved_mb": '{"1": 1003.1, "2": 1620.7, '
            '"4": 2890.3}', "device_per_member_mb": "633.1", "device_stack_base_mb": "360.9"},
    "gpu_no_base": {"rss1_mb": "700", "rss_per_member_mb": "90.9",
                    "device_reserved_mb": '{"1": 999.9}', "device_per_member_mb": "611.1"},
    "sparse": {"rss1_mb": "640.25"},
    "negative_slopes": {"rss1_mb": "900", "rss_per_member_mb": "-12.5",
                        "rss_stack_base_mb": "950", "rss_setup_base_mb": "1000",
                        "rss_setup_per_member_mb": "-3", "private1_mb": "100",
                        "parent_rss_mb": "800", "device_context_mb": "300",
                        "device_reserved_mb": '{"1": 800, "2": 900}',
                        "device_per_member_mb": "-40", "device_stack_base_mb": "700"},
    "empty": {},
}
KS = (1, 2, 3, 8, 33)
SCALES = (1.0, 0.5, 0.7)
STARTS = ("forkserver", "spawn")  # mp's start methods (the others take none)
#: (name, ram MiB, cores, device MiB or None)
BUDGETS = (("roomy", 64000.0, 64, 80000.0), ("tight_ram", 3000.0, 64, None),
           ("tight_device", 1e6, 64, 5000.0), ("few_cores", 1e6, 3, None),
           ("tiny", 100.0, 1, 10.0))
N_JOBS = (1, 5, 40)


def compute() -> dict[str, list]:
    """Every prediction and fit of the grid above, in a fixed order, as JSON-able lists
    (each list of notes as the indices of its lines in ``notes``: the file stays small)."""
    predicted: list[list] = []
    fitted: list[list] = []
    lines: dict[str, int] = {}

    def ids(notes: list[str]) -> list[int]:
        return [lines.setdefault(n, len(lines)) for n in notes]

    for pname, row in PROFILES.items():
        profile = Profile(dict(row))
        for executor in EXECUTORS:
            for scale in SCALES:
                for start in (STARTS if executor == "mp" else STARTS[:1]):
                    for k in KS:
                        ram, dev, notes = predict(profile, executor, k, mp_start=start,
                                                  member_scale=scale)
                        predicted.append([pname, executor, scale, start, k, ram, dev, ids(notes)])
                    for bname, ram_mb, cores, dev_mb in BUDGETS:
                        budget = Budget(ram_mb=ram_mb, cores=cores, device_mb=dev_mb)
                        for n in N_JOBS:
                            est = fits(profile, executor, n, budget, mp_start=start,
                                       member_scale=scale)
                            fitted.append([pname, executor, scale, start, bname, n,
                                           est.executor, est.k, est.n_jobs, est.limiting,
                                           est.ram_mb, est.device_mb, ids(est.notes)])
    return {"notes": list(lines), "predict": predicted, "fits": fitted}


@pytest.fixture(scope="module")
def pins() -> dict[str, list]:
    return json.loads(PINS.read_text())


@pytest.mark.parametrize("part", ["notes", "predict", "fits"])
def test_every_builtin_estimate_is_what_it_was(pins, part):
    now = json.loads(json.dumps(compute()))  # the same float round trip as the pins
    assert len(now[part]) == len(pins[part])
    for got, want in zip(now[part], pins[part], strict=True):
        assert got == want, (f"{want[:5]}: predicted {got[5:]} (pinned {want[5:]})"
                             if part != "notes" else f"note {got!r} (pinned {want!r})")


def test_the_pins_cover_every_limit_and_both_memories(pins):
    """The grid is worth pinning: every limiting resource occurs, and so do device
    predictions, missing predictions and notes."""
    limits = {row[9] for row in pins["fits"]}
    assert limits == {"jobs", "ram", "device", "cores", "executor"}
    assert any(row[6] is not None for row in pins["predict"])
    assert any(row[5] is None for row in pins["predict"])
    assert any(row[7] for row in pins["predict"]) and len(pins["notes"]) >= 3


if __name__ == "__main__":  # re-pin: python -m tests.unit.engine.profile.test_estimate_pins --write
    from engine.plugins import load_builtins

    load_builtins()
    if "--write" in sys.argv:
        PINS.write_text(json.dumps(compute(), indent=None) + "\n")
