"""Memory figures inside a container (issue 46): "host memory available" and the budget's RAM
respect the cgroup's limit — v2 (``memory.max``) and v1 (``memory.limit_in_bytes``), read
from fixture cgroup trees laid out under a temporary root — and every caller that budgets
or reports memory (``make_budget``, ``simulate``'s "available now", the monitor's samples,
a ``MemoryError``'s line) uses them. One check reads this host's real cgroup."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

import engine.cgroup_memory as cgroup_memory
from engine.cgroup_memory import available_mib, locate, read, total_mib

MIB = 2**20
HUGE = 10**9  # MiB: a host with a petabyte available, so only the cgroup can bind

V2_MOUNTS = ("24 23 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - "
             "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n")
V1_MOUNTS = ("31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
             "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:17 - cgroup cgroup "
             "rw,memory\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def v2_tree(root: Path, limit: str, usage: int, parent_limit: str = "max",
            path: str = "/system.slice/job.scope", stat: str = "") -> Path:
    """A v2 host: this process in ``path``; the limit on its own cgroup and its parent's."""
    _write(root / "proc/self", {"cgroup": f"0::{path}\n", "mountinfo": V2_MOUNTS})
    top = root / "sys/fs/cgroup"
    _write(top, {"cgroup.controllers": "cpu memory pids\n"})  # the root has no memory.max
    leaf = top / path.lstrip("/")
    _write(leaf.parent, {"memory.max": f"{parent_limit}\n", "memory.current": f"{usage}\n"})
    _write(leaf, {"memory.max": f"{limit}\n", "memory.current": f"{usage}\n",
                  "memory.stat": stat or "anon 1000\ninactive_file 0\n"})
    return leaf


def v1_tree(root: Path, limit: int, usage: int, path: str = "/docker/abc") -> Path:
    """A v1 (hybrid) host: memory on v1, a unified hierarchy without the memory controller."""
    _write(root / "proc/self", {"cgroup": f"12:pids:{path}\n4:memory:{path}\n"
                                          "1:name=systemd:/\n0::/\n",
                                "mountinfo": V1_MOUNTS})
    _write(root / "sys/fs/cgroup/unified", {"cgroup.controllers": "\n"})
    top = root / "sys/fs/cgroup/memory"
    _write(top, {"memory.limit_in_bytes": "9223372036854771712\n",
                 "memory.usage_in_bytes": "5000000000\n"})
    leaf = top / path.lstrip("/")
    _write(leaf, {"memory.limit_in_bytes": f"{limit}\n", "memory.usage_in_bytes": f"{usage}\n",
                  "memory.stat": "cache 0\ntotal_inactive_file 0\n"})
    return leaf


def test_v2_memory_max_caps_what_is_available_and_the_total(tmp_path):
    leaf = v2_tree(tmp_path, str(512 * MIB), 100 * MIB)
    assert locate(tmp_path).version == "v2"
    assert available_mib(tmp_path, host_mib=HUGE) == pytest.approx(412)
    assert available_mib(tmp_path) <= 512  # with this host's real MemAvailable
    assert total_mib(tmp_path, host_mib=HUGE) == (512, "cgroup v2 memory.max")
    assert read(tmp_path).folder == leaf


def test_v1_limit_in_bytes_caps_what_is_available_and_the_total(tmp_path):
    v1_tree(tmp_path, 512 * MIB, 500 * MIB)
    found = read(tmp_path)
    assert (found.version, found.limit_file) == ("v1", "memory.limit_in_bytes")
    assert available_mib(tmp_path, host_mib=HUGE) == pytest.approx(12)
    assert total_mib(tmp_path, host_mib=HUGE) == (512, "cgroup v1 memory.limit_in_bytes")


def test_no_limit_leaves_the_host_figures(tmp_path):
    v2_tree(tmp_path / "v2", "max", 100 * MIB)
    v1_tree(tmp_path / "v1", 9223372036854771712, 100 * MIB)  # v1's "unlimited"
    for root in (tmp_path / "v2", tmp_path / "v1"):
        assert read(root) is None
        assert available_mib(root, host_mib=2000.0) == 2000.0
        assert total_mib(root, host_mib=4000.0) == (4000.0, "MemTotal")
    assert read(tmp_path / "nothing") is None  # no /proc, no cgroup: the host's figures
    assert available_mib(tmp_path / "nothing", host_mib=2000.0) == 2000.0


def test_a_parents_limit_binds_and_inactive_file_cache_counts_as_free(tmp_path):
    # The job's own cgroup is unlimited; its slice allows 1 GiB and is 900 MiB full.
    v2_tree(tmp_path, "max", 900 * MIB, parent_limit=str(1024 * MIB))
    assert available_mib(tmp_path, host_mib=HUGE) == pytest.approx(124)
    assert total_mib(tmp_path, host_mib=HUGE)[0] == 1024
    # Reclaimable page cache is available, as MemAvailable counts it on the host.
    stat = f"anon {200 * MIB}\ninactive_file {300 * MIB}\n"
    v2_tree(tmp_path / "cache", str(512 * MIB), 500 * MIB, stat=stat)
    assert available_mib(tmp_path / "cache", host_mib=HUGE) == pytest.approx(312)


def test_a_container_that_mounts_only_its_own_cgroup(tmp_path):
    # Docker without a cgroup namespace: /proc/self/cgroup names the host's path, the
    # mount shows that cgroup as its root (mountinfo's 4th field).
    _write(tmp_path / "proc/self", {
        "cgroup": "0::/docker/abc\n",
        "mountinfo": "24 23 0:22 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"})
    _write(tmp_path / "sys/fs/cgroup", {"memory.max": f"{256 * MIB}\n",
                                        "memory.current": f"{56 * MIB}\n"})
    assert available_mib(tmp_path, host_mib=HUGE) == pytest.approx(200)


def test_every_caller_that_budgets_or_reports_memory_uses_the_cgroup(tmp_path, monkeypatch):
    """make_budget's RAM (auto's budget and simulate's), simulate's "available now", the
    monitor's sample and a MemoryError's line, all inside a 512 MiB v2 container."""
    from engine.errors import failure_line
    from engine.measure.monitor import Sampler
    from engine.profile.budget import host_available_mb, make_budget

    v2_tree(tmp_path, str(512 * MIB), 100 * MIB)
    monkeypatch.setattr(cgroup_memory, "ROOT", tmp_path)
    budget = make_budget(cores=1)
    assert (budget.ram_mb, budget.source("ram")) == (512, "cgroup v2 memory.max")
    assert host_available_mb() <= 412
    assert Sampler(os.getpid(), None).sample()["host_mem_available_mib"] <= 412
    line = failure_line(MemoryError())
    available = float(line.split("host memory available ")[1].split()[0])
    assert available <= 412, line


def _real_memory_hierarchy() -> str:
    """``v2``, ``v1`` or "" : where this host's memory controller is mounted (the same
    question :func:`locate` answers, asked here of mountinfo's fields directly)."""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            head, _, tail = line.partition(" - ")
            point = Path(head.split()[4])
            if tail.startswith("cgroup2 ") and "memory" in (
                    point / "cgroup.controllers").read_text().split():
                return "v2"
        if any(line.split(":")[1] == "memory"
               for line in Path("/proc/self/cgroup").read_text().splitlines()):
            return "v1"
    except (OSError, IndexError):
        pass
    return ""


REAL = _real_memory_hierarchy()


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_this_hosts_real_cgroup_is_found_and_read(version):
    if REAL != version:
        pytest.skip(f"this host's memory controller is not on cgroup {version} "
                    f"({REAL or 'no cgroup memory controller'})")
    found = locate()
    assert found is not None and found.version == version, found
    usage_file = cgroup_memory.FILES[version][1]
    assert int((found.levels[0] / usage_file).read_text()) > 0  # it holds this process
    assert found.levels[-1] in found.levels[0].parents or len(found.levels) == 1
    level = found.read()
    host = psutil.virtual_memory().available / MIB
    assert available_mib() <= host + 64  # never above the host's (it moves between reads)
    if level is not None:  # a real limit: the figure is the file's
        limit = (level.folder / level.limit_file).read_text()
        assert level.limit_mib == pytest.approx(int(limit) / MIB)


def test_the_dashboards_memory_in_use_is_the_containers(tmp_path):
    """The dashboard's host bar showed the whole host's memory in use inside a container
    (here 100 MiB used of a 512 MiB limit, on a host with GiBs in use)."""
    from fugue_tui.app.models.series import HostPoller

    v2_tree(tmp_path, str(512 * MIB), 100 * MIB)
    assert HostPoller(root=tmp_path).sample()["rss_mib"] <= 100
    assert HostPoller(root=tmp_path / "none").sample()["rss_mib"] > 100  # the host's figure
