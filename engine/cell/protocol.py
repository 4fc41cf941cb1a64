"""The contract between the runner and a cell, torch-free: the spec's schema, the exit
statuses, the pre-allocated reason file, and what counts as "the output cannot be written".

The runner (``engine.runner``) imports this module, never the cell's entry module
(:mod:`engine.cell.main`, which brings the executors' machinery).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import math
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.bounds import CAMPAIGN, DEFAULT_SEED, JOB, MAX_JOBS, Bound
from engine.define.matrix import CellSpec
from engine.errors import ConfigError, OutputError

SPEC_SCHEMA = 1
#: Exit status of a cell that could not write its output (rows, events): the runner
#: stops the campaign (each later cell would fail the same way).
EXIT_OUTPUT = 4
#: errno values that mean "this output cannot be written here", not a bug.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
#: Size of the spec's ``reason_file``, which the runner fills with spaces before the cell
#: starts: the cell's one-line reason overwrites those bytes in place, which needs no free
#: block even on a full disk (events and log may be unwritable by then).
REASON_BYTES = 1024


def output_failure(exc: BaseException, where: str | os.PathLike[str] | None = None
                   ) -> str | None:
    """The one-line reason when ``exc`` means the cell's output cannot be written: an
    :class:`OutputError` (its message names the file), or an ``OSError`` with an errno of
    :data:`OUTPUT_ERRNOS` anywhere in its chain (``<file>: <strerror>``; a write through a
    file object names no file: then ``where``, the folder written to); else None."""
    if isinstance(exc, OutputError):
        return str(exc)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in OUTPUT_ERRNOS:
            name = seen.filename if seen.filename is not None else where
            reason = seen.strerror or os.strerror(seen.errno)
            return f"{name}: {reason}" if name is not None else reason
        seen = seen.__cause__ or seen.__context__
    return None


def write_reason(spec: CellRunSpec, line: str) -> None:
    """Overwrite the runner's pre-allocated ``reason_file`` with ``line`` (never extends
    it: no new block is needed). Best effort; absent in specs of older runners."""
    path = spec.reason_file
    if not path:
        return
    data = line.replace("\n", " ").encode("utf-8", "replace")[:REASON_BYTES - 1] + b"\n"
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # no O_CREAT, no O_TRUNC
        try:
            if os.fstat(fd).st_size >= REASON_BYTES:
                os.pwrite(fd, data.ljust(REASON_BYTES, b" "), 0)
        finally:
            os.close(fd)


def read_reason(path: str | Path) -> str:
    """The line a cell left in its ``reason_file`` ("" when none)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(REASON_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return ""


#: The runner's concurrency record in the attempt folder of a multi-device campaign's cell
#: (issue 27): ``{"max": cells at once on this host, "mig_shared": [MIG slices' UUIDs of the
#: same physical GPU that ran meanwhile]}``, written by engine.runner.concurrent while cells
#: overlap, read by the cell when it writes its rows (engine.cell.concurrency).
HOST_CELLS = "host_cells.json"


def write_host_cells(attempt_dir: str | Path, most: int, mig_shared: list[str]) -> None:
    """Replace the record atomically (a temporary file renamed over it: the cell reads a
    whole record or the previous one). Raises OSError (the runner tries again next poll)."""
    tmp = Path(attempt_dir) / (HOST_CELLS + ".tmp")
    tmp.write_text(json.dumps({"max": most, "mig_shared": list(mig_shared)}))
    tmp.replace(Path(attempt_dir) / HOST_CELLS)


def read_host_cells(attempt_dir: str | Path) -> dict[str, Any] | None:
    """The record, or None (a one-device campaign has none; unreadable counts as none)."""
    try:
        doc = json.loads((Path(attempt_dir) / HOST_CELLS).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


#: The runner's record of the time the cell's processes spent stopped (SIGSTOP, a
#: debugger, job control), in the attempt folder: ``{"stopped_s": seconds}``, written by
#: :mod:`engine.runner.stopped` while the cell runs, read by the cell for its group row.
STOPPED = "stopped.json"


def write_stopped(attempt_dir: str | Path, seconds: float) -> None:
    """Replace the record atomically (temporary file, rename). Raises OSError."""
    tmp = Path(attempt_dir) / (STOPPED + ".tmp")
    tmp.write_text(json.dumps({"stopped_s": round(seconds, 3)}))
    tmp.replace(Path(attempt_dir) / STOPPED)


def read_stopped(attempt_dir: str | Path) -> float | None:
    """The seconds recorded, or None (no record: the cell was not run by a runner that
    tracks it; unreadable counts as none)."""
    try:
        value = json.loads((Path(attempt_dir) / STOPPED).read_text()).get("stopped_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def safe_name(name: str) -> str:
    """``name`` as one file-name component: characters other than letters, digits and
    ``._-`` become ``_`` (a job id in a samples path)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _optional() -> Any:
    """An optional key: None by default, and left out of the document while None."""
    return dataclasses.field(default=None, metadata={"optional": True})


@dataclass(frozen=True)
class CellRunSpec:
    """What one attempt of one cell is started with: ``python -m engine.cell SPEC.json`` reads
    it (schema :data:`SPEC_SCHEMA`). Built by the runner
    (:meth:`engine.runner.supervisor.Runner.cell_spec`), or by a tool that runs one cell by
    hand (bench) from that with :func:`dataclasses.replace`.

    Paths are absolute strings (the cell may run in another working folder). ``device`` is
    what the cell uses (``cuda:0`` when the runner pinned the device under test with
    ``CUDA_VISIBLE_DEVICES``), ``device_requested`` what the campaign asked; ``threads`` is
    already resolved (>= 1); ``cell`` is the :class:`engine.define.matrix.CellSpec` (in the
    document: ``dataclasses.asdict`` of it; a dict given here is taken as that document).
    ``group_id``: the group the attempt runs as; the runner draws one per attempt
    (:class:`engine.runner.attempt.Attempt`), so the row it writes for a cell that it killed
    or that died names the cell's samples file; unset (a tool's spec, an older runner's),
    the cell draws its own. ``cell_start``: how the attempt's process began (``spawn``,
    ``zygote``: the rows' ``cell_start``), set in memory by whoever knows it (the cell, the
    runner after starting it) with :func:`dataclasses.replace`. ``job_env`` (extra
    environment for worker processes) is for tools. Optional keys left unset are not
    written. Keys older runners did not write are optional, with the defaults the cell has
    always applied.

    Immutable: a changed spec is a new one (``dataclasses.replace(spec, group_id=...)``).
    """

    campaign_id: str
    campaign_hash: str
    runs_dir: str
    events: str
    attempt: int
    # Keys that specs of older runners may lack: the cell has always read them with a
    # default, and so must a runner reading a predecessor's spec (written when not None).
    reason_file: str | None = _optional()
    seed: int = DEFAULT_SEED
    passes: int = 1
    device: str = "cpu"
    device_requested: str | None = _optional()
    gpu_uuid: str | None = None
    monitor: bool = True
    monitor_interval_s: float | None = _optional()
    threads: int | None = _optional()
    # (required, by keyword: it follows fields with defaults in the document's order)
    cell: CellSpec = dataclasses.field(kw_only=True)
    schema: int = SPEC_SCHEMA
    job_env: dict[str, str] | None = _optional()
    group_id: str | None = _optional()
    #: Provenance the runner knows (issue 29): the loaded plugins' versions and the hash of
    #: the campaign's user experiments file; rows the runner writes for the attempt carry
    #: them too.
    plugin_versions: dict[str, str | None] | None = _optional()
    experiments_file_hash: str | None = _optional()
    #: A cell of a multi-device campaign (issue 27; engine.runner.placement): which device
    #: of the campaign it was placed on (the ``placement`` column) and the host cores it
    #: is pinned to (``os.sched_setaffinity`` before anything else; ``cpu_affinity``).
    placement: str | None = _optional()
    cpus: list[int] | None = _optional()
    #: A cell of a campaign on a Ray cluster (issue 28; engine.cluster): the node it runs
    #: on, ``<host name> <hash of its address>`` (the ``node`` column).
    node: str | None = _optional()
    #: How the attempt's process began (see the class); the runner's spec.json never holds
    #: it (left out while None, as every optional key).
    cell_start: str | None = _optional()

    def __post_init__(self) -> None:
        # The cell's matrix point as its JSON document (the form runners built specs
        # with, ``cell=asdict(cell)``): typed here, so every reader gets a CellSpec.
        if isinstance(self.cell, Mapping):
            object.__setattr__(self, "cell", CellSpec(**self.cell))

    @property
    def attempt_dir(self) -> Path:
        return Path(self.events).parent

    def to_dict(self) -> dict[str, Any]:
        """The JSON document, keys in the order schema 1 has always had them (``cell``:
        ``dataclasses.asdict`` of the CellSpec, its fields' order)."""
        doc: dict[str, Any] = {"schema": self.schema}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "cell":
                value = dataclasses.asdict(value)
            if f.name != "schema" and not (f.metadata.get("optional") and value is None):
                doc[f.name] = value
        # Runners have always drawn the group after building the rest and appended it:
        # the key stays last, so spec.json is byte for byte what they wrote.
        # (cell_start, which no runner's file holds, stays after it.)
        for late in ("group_id", "cell_start"):
            if late in doc:
                doc[late] = doc.pop(late)
        return doc

    def to_json(self) -> str:
        """The text of ``spec.json``."""
        return json.dumps(self.to_dict(), indent=1)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def from_dict(cls, doc: dict[str, Any], where: str = "cell spec") -> CellRunSpec:
        """Validate a spec document, down to every job (:func:`check_values`).

        Raises:
            ConfigError: another schema, a missing or an unknown key, a value of the wrong
                type or out of its bounds (one line naming it: ``cell.jobs[0].epochs``).
        """
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: a cell spec is a JSON object, got {type(doc).__name__}")
        if "schema" not in doc:
            raise ConfigError(f"{where}: missing key 'schema' in the cell spec (expected "
                              f"{SPEC_SCHEMA})")
        if doc["schema"] != SPEC_SCHEMA:
            raise ConfigError(f"{where}: cell spec schema {doc['schema']!r}, expected {SPEC_SCHEMA}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} in the cell spec")
        required = ("campaign_id", "campaign_hash", "runs_dir", "events", "attempt", "seed",
                    "passes", "device", "cell")
        missing = [n for n in required if n not in doc]
        if missing:  # every one at once: a hand-written spec is fixed in one go
            listed = ", ".join(repr(n) for n in missing)
            raise ConfigError(f"{where}: missing key{'s' if len(missing) > 1 else ''} {listed} "
                              "in the cell spec")
        if not isinstance(doc["cell"], dict):
            raise ConfigError(f"{where}: key 'cell' must be an object (the cell's matrix "
                              f"point), got {type(doc['cell']).__name__}")
        check_values(doc, where)
        return cls(**{**doc, "cell": CellSpec(**doc["cell"])})

    @classmethod
    def read(cls, path: str | Path) -> CellRunSpec:
        """Read and validate ``spec.json``.

        Raises:
            ConfigError: unreadable, not JSON, or not a schema-1 spec (one line).
        """
        try:
            text = Path(path).read_text()
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            raise ConfigError(f"{path}: cannot read the cell spec: {exc}") from None
        return cls.from_json(text, str(path))

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "cell spec") -> CellRunSpec:
        """Validate the text of a spec (:meth:`to_json`'s, a ``spec.json``'s).

        Raises:
            ConfigError: not JSON, or not a schema-1 spec (one line naming ``where``).
        """
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{where}: cannot read the cell spec: {exc}") from None
        return cls.from_dict(doc, where)


# -- the values of a spec ---------------------------------------------------------------------
# A cell trusted its spec below the top level: ``jobs = []`` wrote an ok row, ``max_parallel
# = 0`` and 100000 threads were accepted. Keys and types come from the dataclasses a spec is
# made of (CellRunSpec, engine.define.matrix.CellSpec, engine.define.workloads.JobSpec and
# SplitSpec), so a field added there is checked here too; the ranges from engine.bounds.

#: The most jobs a stream cell serves (engine.define.arrivals.MAX_COUNT).
_MAX_STREAM = 10_000
_DEVICE = re.compile(r"^(cpu|cuda|cuda:\d+)$")
_AT_LEAST_1 = Bound(1, None, integer=True)
_AT_LEAST_0 = Bound(0, None, integer=True)
#: Ranges of the spec's own keys, of the cell's and of each job's (others: type only).
_SPEC_BOUNDS: dict[str, Bound] = {
    "attempt": _AT_LEAST_1, "seed": CAMPAIGN["seed"], "passes": CAMPAIGN["passes"],
    "monitor_interval_s": Bound(0.05, 60)}
_CELL_BOUNDS: dict[str, Bound] = {"index": _AT_LEAST_1, "pass_index": _AT_LEAST_1,
                                  "max_parallel": _AT_LEAST_1}
_JOB_BOUNDS: dict[str, Bound] = {**JOB, "seed": CAMPAIGN["seed"], "index": _AT_LEAST_0}
_SPLIT_BOUNDS: dict[str, Bound] = {"split_seed": JOB["split_seed"],
                                   "val_fraction": JOB["val_fraction"], "fold": _AT_LEAST_0,
                                   "folds": Bound(2, MAX_JOBS, integer=True)}
_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "an object"}


def check_values(doc: dict[str, Any], where: str) -> None:
    """Check a spec document's values (its keys are known and present): types, the cell's
    keys and fields, and every job's, each number inside its bounds (``engine.bounds``).

    Raises:
        ConfigError: one line, ``"<where>: key 'cell.jobs[0].epochs' must be >= 1, got
            0"``.
    """
    from engine.define.validate import check_optimizer_values
    from engine.define.workloads import JobSpec, SplitSpec

    # A runner writes the cores of its machine for threads = 0 ("all cores"), which may be
    # more than a campaign may ask for.
    threads = Bound(0, max(CAMPAIGN["threads"].high or 0, os.cpu_count() or 1), integer=True)
    _check_fields(doc, CellRunSpec, "", {**_SPEC_BOUNDS, "threads": threads}, where,
                  skip=("cell",))
    if not _DEVICE.match(doc["device"]):
        raise ConfigError(f"{where}: key 'device' must be cpu, cuda or cuda:N, got "
                          f"{doc['device']!r}")
    cell = doc["cell"]
    _check_keys(cell, CellSpec, "cell.", where)
    _check_fields(cell, CellSpec, "cell.", _CELL_BOUNDS, where, skip=("jobs",))
    jobs = cell["jobs"]
    if not isinstance(jobs, list) or not jobs:
        raise ConfigError(f"{where}: key 'cell.jobs' must be a non-empty list of jobs, got "
                          f"{jobs!r}"[:300])
    arrivals = cell.get("arrivals")
    # a stream cell (issue 51) serves up to engine.define.arrivals.MAX_COUNT jobs
    most = MAX_JOBS if arrivals is None else max(MAX_JOBS, _MAX_STREAM)
    if len(jobs) > most:
        raise ConfigError(f"{where}: key 'cell.jobs' holds {len(jobs)} jobs: at most "
                          f"{most}")
    if arrivals is not None and (len(arrivals) != len(jobs) or not all(
            isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
            and t >= 0 for t in arrivals) or list(arrivals) != sorted(arrivals)):
        raise ConfigError(f"{where}: key 'cell.arrivals' must be one finite time >= 0 per "
                          "job, non-decreasing"[:300])
    for i, job in enumerate(jobs):
        name = f"cell.jobs[{i}]"
        if not isinstance(job, dict):
            raise ConfigError(f"{where}: key '{name}' must be an object, got {job!r}"[:300])
        _check_keys(job, JobSpec, f"{name}.", where)
        _check_fields(job, JobSpec, f"{name}.", _JOB_BOUNDS, where, skip=("split",))
        split = job["split"]
        if not isinstance(split, dict):
            raise ConfigError(f"{where}: key '{name}.split' must be an object, got {split!r}")
        _check_keys(split, SplitSpec, f"{name}.split.", where)
        _check_fields(split, SplitSpec, f"{name}.split.", _SPLIT_BOUNDS, where)
        if split["kind"] not in ("test", "holdout", "fold") or (split["kind"] == "fold" and not (
                split.get("fold") is not None and split.get("folds") is not None
                and split["fold"] < split["folds"])):
            raise ConfigError(f"{where}: key '{name}.split' must be a test or holdout split, "
                              f"or a fold with 0 <= fold < folds, got {split!r}")
        check_optimizer_values(job["optimizer"], job.get("optimizer_kwargs") or {},
                               f"{where}: key '{name}'")


@functools.cache
def _schema(cls: type) -> tuple[dict[str, tuple[type, ...]], frozenset[str]]:
    """A dataclass's fields as JSON types (:func:`_json_types`), and those a document must
    hold: the fields without a default, and ``split`` (``JobSpec.from_dict`` reads it).
    Cached: a cell of 4096 jobs checks each of them."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    required = frozenset(f.name for f in fields if f.name == "split" or (
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))
    return {f.name: _json_types(hints[f.name]) for f in fields}, required


def _check_keys(doc: dict[str, Any], cls: type, prefix: str, where: str) -> None:
    """Unknown keys, and the required fields that are missing (one line each)."""
    types_of, required = _schema(cls)
    unknown = sorted(set(doc) - set(types_of))
    if unknown:
        raise ConfigError(f"{where}: unknown key '{prefix}{unknown[0]}' in the cell spec")
    missing = [name for name in types_of if name in required and name not in doc]
    if missing:
        raise ConfigError(f"{where}: missing key '{prefix}{missing[0]}' in the cell spec")


def _check_fields(doc: dict[str, Any], cls: type, prefix: str, bounds: dict[str, Bound],
                  where: str, skip: tuple[str, ...] = ()) -> None:
    """Each present value of the declared type (None where the field allows it, a JSON
    object for a dict or a nested dataclass), numbers inside ``bounds``."""
    types_of, _ = _schema(cls)
    for name, value in doc.items():
        if name in skip or name not in types_of:
            continue
        allowed = types_of[name]
        if value is None and type(None) in allowed:
            continue
        key = f"key '{prefix}{name}'"
        if name in bounds:
            bounds[name].check(value, where, key)
            continue
        if isinstance(value, bool):  # JSON's true is no integer here
            ok = bool in allowed
        else:
            ok = isinstance(value, allowed) or (isinstance(value, int) and float in allowed)
        if not ok:
            wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in allowed
                                 if t is not type(None))
            raise ConfigError(f"{where}: {key} must be {wanted}, got {value!r}"[:300])


def _json_types(hint: Any) -> tuple[type, ...]:
    """``int | None`` → ``(int, NoneType)``; ``dict[str, Any]`` and dataclasses → ``dict``."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    out: list[type] = []
    for arg in typing.get_args(hint) if union else (hint,):
        arg = typing.get_origin(arg) or arg
        out.append(dict if dataclasses.is_dataclass(arg) or arg is Any else arg)
    return tuple(out)


# -- the zygote's wire ---------------------------------------------------------------------
#: ``python -m engine.cell --zygote FD``: the pre-warmed cell parent (:mod:`engine.cell.zygote`),
#: talking to its runner (:mod:`engine.runner.zygote`) over the UNIX socket FD.
ZYGOTE_FLAG = "--zygote"
#: Room the zygote's command line keeps (an argument of spaces after FD) for each forked
#: cell to show its own, ``python -m engine.cell SPEC``, in ps and /proc/PID/cmdline.
TITLE_ROOM = 4096
#: The largest message either side sends (a cell's environment is the biggest part).
MESSAGE_BYTES = 1 << 20


def send_message(sock, doc: dict[str, Any], fds: tuple[int, ...] | list[int] = ()) -> None:
    """One JSON document as one datagram of a ``SOCK_SEQPACKET`` socket, with ``fds``
    passed along (``SCM_RIGHTS``: the receiver gets its own descriptors of the same files).

    Raises:
        OSError: the peer is gone (``BrokenPipeError``, ``ConnectionResetError``) or the
            message is larger than :data:`MESSAGE_BYTES`.
    """
    import socket

    data = json.dumps(doc).encode()
    if len(data) > MESSAGE_BYTES:
        raise OSError(errno.EMSGSIZE, f"zygote message of {len(data)} bytes")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def receive_message(sock) -> tuple[dict[str, Any] | None, list[int]]:
    """The next document and the descriptors that came with it; ``(None, [])`` when the
    peer closed its end (the runner or the zygote is gone).

    Raises:
        OSError: a message cut short (larger than :data:`MESSAGE_BYTES`) or not a JSON
            object; a timeout set on ``sock`` (``TimeoutError``).
    """
    import socket

    data, fds, flags, _ = socket.recv_fds(sock, MESSAGE_BYTES, 8)
    if not data and not fds:
        return None, []
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise OSError(errno.EMSGSIZE, "zygote message cut short")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise OSError(errno.EPROTO, f"zygote message is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise OSError(errno.EPROTO, "zygote message is not a JSON object")
    return doc, fds
