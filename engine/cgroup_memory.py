"""The memory this process may use: the host's, capped by its cgroup's limit. Torch-free.

``psutil.virtual_memory()`` reads ``/proc/meminfo``, the whole host's figures; inside a
container (Docker, Kubernetes, a systemd slice, a batch scheduler's job) the kernel kills
at the cgroup's limit long before the host runs short. Every figure the engine budgets with
or reports (``max_parallel = "auto"``'s RAM, ``simulate``'s "available now", the monitor's
``host_mem_available_mib``, the memory facts of an OOM-killed cell or a ``MemoryError``)
comes from here:

- **available** = min(host ``MemAvailable``, the tightest cgroup level's limit − usage +
  its inactive file cache), MiB. The inactive file cache is added back because the kernel
  reclaims it before it kills, as ``MemAvailable`` counts reclaimable cache on the host
  (Docker's and the kubelet's "working set" subtract it alike);
- **total** = min(host ``MemTotal``, the tightest cgroup limit), MiB, with a source naming
  which (``MemTotal`` or ``cgroup v2 memory.max``): a limit is fixed while the process
  lives, so it may enter a cell key as ``MemTotal`` does.

Which cgroup: ``/proc/self/cgroup`` names this process's cgroup path, per hierarchy;
``/proc/self/mountinfo`` says where that hierarchy is mounted and which of its paths the
mount shows (a container sees its own cgroup as the mount's root). cgroup v2 (the unified
hierarchy, line ``0::<path>``, files ``memory.max`` / ``memory.current``) is used when its
memory controller is enabled there, else v1 (the ``memory`` controller's hierarchy, files
``memory.limit_in_bytes`` / ``memory.usage_in_bytes``). Every level from the cgroup up to
the mount's root is read: a limit set on a parent (a systemd slice, a pod) binds its
children. ``max`` (v2) and v1's "unlimited" (2^63 rounded down to a page) are no limit.

Every path is read under ``root`` (default :data:`ROOT`, ``/``): tests lay out fixture trees
of ``proc/self/{cgroup,mountinfo}`` and ``sys/fs/cgroup/...`` in a temporary folder.

Home-made: psutil does not read cgroups, and the PyPI packages that do (cgroupspy,
cgroup-monitor, ...) manage v1 hierarchies or read one fixed path, without v2's unified
path resolution or a root to test against; the parsing here is two small files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: A limit at or above this many bytes is no limit: v1 writes 2^63 rounded down to a page
#: (9223372036854771712 with 4 KiB pages) for "unlimited"; no machine has an exbibyte.
UNLIMITED_BYTES = 2**60

#: Per version: the limit file, the usage file, and memory.stat's inactive file cache key.
FILES = {"v2": ("memory.max", "memory.current", "inactive_file"),
         "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")}

MIB = 2**20

#: Where every path is read from when no root is given: the real file system. Tests point
#: it at a fixture tree to check that each caller (budget, monitor, error lines) uses it.
ROOT = Path("/")


@dataclass(frozen=True)
class CgroupMemory:
    """The binding level of a cgroup's memory: the one with the least room left.

    ``version``: ``"v2"`` or ``"v1"``; ``folder``: that level's cgroup folder (under the
    root it was read from); ``limit_mib``, ``usage_mib``, ``reclaimable_mib`` (its inactive
    file cache; 0 where ``memory.stat`` does not say): MiB. ``tightest_limit_mib``: the
    lowest limit over all levels (the binding level's may be higher but nearer full)."""

    version: str
    folder: Path
    limit_mib: float
    usage_mib: float
    reclaimable_mib: float = 0.0
    tightest_limit_mib: float = 0.0

    @property
    def headroom_mib(self) -> float:
        """What the cgroup lets its processes add before the kernel acts, MiB (>= 0)."""
        used = max(self.usage_mib - self.reclaimable_mib, 0.0)
        return max(min(self.limit_mib - used, self.limit_mib), 0.0)

    @property
    def limit_file(self) -> str:
        """``memory.max`` or ``memory.limit_in_bytes``: the file the limit is read from."""
        return FILES[self.version][0]


@dataclass(frozen=True)
class Cgroup:
    """Where this process's memory cgroup lies: ``version`` and its ``levels``, from its
    own folder up to the mount's root (the folders whose limits bind it)."""

    version: str
    levels: tuple[Path, ...]

    def read(self) -> CgroupMemory | None:
        """The binding level now, None when no level has a limit (or none can be read)."""
        limit_name, usage_name, stat_key = FILES[self.version]
        found: list[CgroupMemory] = []
        for folder in self.levels:
            limit = _bytes(folder / limit_name)
            usage = _bytes(folder / usage_name)
            if limit is None or usage is None or limit >= UNLIMITED_BYTES:
                continue
            found.append(CgroupMemory(self.version, folder, limit / MIB, usage / MIB,
                                      _stat(folder / "memory.stat", stat_key) / MIB))
        if not found:
            return None
        binding = min(found, key=lambda level: level.headroom_mib)
        return CgroupMemory(binding.version, binding.folder, binding.limit_mib,
                            binding.usage_mib, binding.reclaimable_mib,
                            min(level.limit_mib for level in found))


def locate(root: Path | None = None) -> Cgroup | None:
    """This process's memory cgroup under ``root``: v2 where the unified hierarchy has the
    memory controller, else v1's ``memory`` hierarchy; None when neither is found (not
    Linux, no cgroup file system mounted, unreadable files)."""
    root = ROOT if root is None else root
    try:
        membership = (root / "proc/self/cgroup").read_text()
        mounts = (root / "proc/self/mountinfo").read_text()
    except OSError:
        return None
    paths: dict[str, str] = {}  # "v2" or "v1" -> the cgroup path
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["v2"] = parts[2]
        elif "memory" in parts[1].split(","):
            paths["v1"] = parts[2]
    for version in ("v2", "v1"):
        if version not in paths:
            continue
        for mount_root, point in _mounts(mounts, version):
            levels = _levels(root, mount_root, point, paths[version])
            if levels and (levels[0] / FILES[version][1]).is_file():
                return Cgroup(version, levels)
    return None


def read(root: Path | None = None) -> CgroupMemory | None:
    """:func:`locate` then :meth:`Cgroup.read`: the binding level now, or None."""
    cgroup = locate(root)
    return cgroup.read() if cgroup is not None else None


def available_mib(root: Path | None = None, host_mib: float | None = None,
                  cgroup: Cgroup | None | Literal["locate"] = "locate") -> float:
    """Memory available to this process now, MiB: min(``host_mib`` (default: psutil's
    ``MemAvailable``), the cgroup's headroom). ``cgroup``: what :func:`locate` found
    already (the monitor locates once and reads at every sample; None: no cgroup);
    ``"locate"``: located now under ``root``."""
    host = _host("available") if host_mib is None else host_mib
    found = locate(root) if isinstance(cgroup, str) else cgroup
    level = found.read() if found is not None else None
    return host if level is None else min(host, level.headroom_mib)


def total_mib(root: Path | None = None, host_mib: float | None = None) -> tuple[float, str]:
    """``(MiB, source)``: min(``host_mib`` (default: psutil's ``MemTotal``), the tightest
    cgroup limit); source ``MemTotal`` or e.g. ``cgroup v2 memory.max``."""
    host = _host("total") if host_mib is None else host_mib
    level = read(root)
    if level is None or level.tightest_limit_mib >= host:
        return host, "MemTotal"
    return level.tightest_limit_mib, f"cgroup {level.version} {level.limit_file}"


def _host(field: str) -> float:
    import psutil

    return float(getattr(psutil.virtual_memory(), field)) / MIB


def _mounts(mountinfo: str, version: str) -> list[tuple[str, str]]:
    """``(root within the hierarchy, mount point)`` of each mount of ``version``'s memory
    hierarchy (``man 5 proc``: fields 4 and 5; after `` - ``, the type and super options)."""
    found = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 3:
            continue
        if version == "v2" and after[0] == "cgroup2":
            found.append((_unescape(fields[3]), _unescape(fields[4])))
        elif version == "v1" and after[0] == "cgroup" and "memory" in after[2].split(","):
            found.append((_unescape(fields[3]), _unescape(fields[4])))
    return found


def _levels(root: Path, mount_root: str, point: str, path: str) -> tuple[Path, ...]:
    """The folders from the cgroup at ``path`` up to the mount point, under ``root``.

    The path is relative to the hierarchy's root; the mount shows the hierarchy from
    ``mount_root`` on. A path outside the mount (a container that sees the host's path
    names but mounts only its own cgroup) is the mount point itself."""
    top = root / point.lstrip("/")
    rel = Path(path).relative_to("/") if path.startswith("/") else Path(path)
    shown = Path(mount_root).relative_to("/") if mount_root.startswith("/") else Path(".")
    if str(shown) != "." and (rel == shown or shown in rel.parents):
        rel = rel.relative_to(shown)
    elif str(shown) != ".":
        rel = Path(".")
    folder = top / rel
    if not folder.is_dir():
        folder = top
    if not folder.is_dir():
        return ()
    levels = [folder]
    while levels[-1] != top and top in levels[-1].parents:
        levels.append(levels[-1].parent)
    return tuple(levels)


def _unescape(field: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash as octal escapes (``\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _bytes(path: Path) -> int | None:
    """A one-number cgroup file; ``max`` is 2^64 (no limit); None when unreadable."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return 2**64
    try:
        return int(text)
    except ValueError:
        return None


def _stat(path: Path, key: str) -> float:
    """One value of ``memory.stat`` in bytes; 0 where it is missing or unreadable."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return float(int(value))
    except (OSError, ValueError):
        pass
    return 0.0

