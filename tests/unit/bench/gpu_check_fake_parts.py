"""Parts for tests/unit/bench/test_gpu_check.py only (loaded through GPU_CHECK_EXTRA_PARTS): each
exercises one way a part can end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.gpu_check import Failed, part


@part("fake_pass", budget_s=20, default=False)
def fake_pass(run):
    """Passes with a number."""
    return "answer 42", {"answer": 42}


@part("fake_fail", budget_s=20, default=False)
def fake_fail(run):
    """Finds a failure."""
    raise Failed("wrong answer 41", {"answer": 41})


@part("fake_crash", budget_s=20, default=False)
def fake_crash(run):
    """Its process dies without a result."""
    print("about to crash", flush=True)
    os._exit(3)


@part("fake_slow", budget_s=3, default=False)
def fake_slow(run):
    """Outlives its budget, with a grandchild in its process group."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    (run.dir / "grandchild.pid").write_text(str(child.pid))
    time.sleep(120)
    return "never", {}


@part("fake_needs", budget_s=20, needs=("no_such_module_here",), default=False)
def fake_needs(run):
    """Needs a module nobody has."""
    return "never", {}
