"""SIGTERM stops ``fugue-tui profile`` as Ctrl-C does (fresh-user finding 3): ``timeout 10
fugue-tui profile D_cv`` left the probe and the child it forks per K running and its
``/tmp/fugue-profile-*`` folder behind. On the real CLI: a probe of a tiny model made long
(many epochs), SIGTERM once it has forked, then no probe process and no temp folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.fugue_tui.commands.test_profile_cli import REPO, TINY


def _probes(marker: str) -> list[int]:
    """Pids whose command line names the probe and ``marker`` (our temp folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "engine.cell.profile_probe" in cmd and marker in cmd:
            found.append(int(entry.name))
    return found


def test_sigterm_ends_the_probe_group_and_removes_its_temp_folder(tmp_path):
    (tmp_path / "exp.toml").write_text(TINY.replace("epochs = 1", "epochs = 100000"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "FUGUE_PLAIN": "1", "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "fugue_tui", "profile", "P_tiny",
                             "--experiments-file", "exp.toml", "--ks", "1,2,3", "--threads",
                             "1", "--device", "cpu"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        # the probe forks a child per K: wait until that child exists (the case that leaked)
        while len(_probes(str(tmp))) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the probe never forked"
            time.sleep(0.2)
        assert list(tmp.glob("fugue-profile-*"))
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err
    assert took < 10  # SIGTERM, 2 s grace, SIGKILL: not the 20 s and more of the report
    assert _probes(str(tmp)) == []  # the probe and its forked child are gone
    assert list(tmp.iterdir()) == []  # spec.json and out.json's folder removed
