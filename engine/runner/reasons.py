"""Why a cell's process ended, in the words of what was measured. Torch-free.

A row's ``error`` is read later by someone deciding whether to trust or rerun the cell, so it
says what is known and nothing that merely happened to be nearby: the cell's own one line
when it left one; for a process killed by a signal, the signal, Python's fatal-error line
when the fault handler wrote one (a segfault), and the monitor's memory figures (what an
outside SIGKILL, the kernel's OOM killer, is usually about: the cell's peak RSS over its
life, then the last sample, labelled, taken as it died) — never the last line of its
log, which for a cell killed from outside is whatever Ray or the monitor printed last. For
an exit status without a line of the cell's own, that last line is quoted as what it is.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from engine.event_types import MonitorSample

#: How much of the end of a cell's log is searched for Python's fatal-error report (bytes).
LOG_TAIL_BYTES = 64 * 1024

_FRAME = re.compile(r'^\s*File "[^"]*", line \d+ in \S+')


class MemoryTrail:
    """What the monitor's ``sample`` events of one attempt said about memory, kept for the
    reason of a cell that dies: the last sample, the one with the highest cell RSS and the
    one with the least memory available. The last alone misleads after an OOM kill: the
    sample taken as the cell died shows what was left (17 MiB), not what it reached before
    (1194 MiB) — what the kill was about."""

    def __init__(self) -> None:
        self.last: MonitorSample | None = None
        self.peak: MonitorSample | None = None    # highest rss_mib
        self.lowest: MonitorSample | None = None  # lowest host_mem_available_mib

    def add(self, sample: MonitorSample) -> None:
        """Take one ``sample`` event (in the order the cell wrote them)."""
        self.last = sample
        if _higher(sample.rss_mib, self.peak.rss_mib if self.peak else None):
            self.peak = sample
        lowest = self.lowest.host_mem_available_mib if self.lowest else None
        available = sample.host_mem_available_mib
        if isinstance(available, (int, float)) and (
                not isinstance(lowest, (int, float)) or available < lowest):
            self.lowest = sample


def _higher(value: object, than: object) -> bool:
    return isinstance(value, (int, float)) and (not isinstance(than, (int, float))
                                               or value > than)


def exit_reason(code: int, said: str, log_path: Path,
                memory: MemoryTrail | None = None, ended: float | None = None) -> str:
    """The error recorded for a cell that exited by itself with ``code`` (non-zero).

    ``said``: the cell's own one line (its ``failed`` event or reason file), which wins for
    an exit status; ``memory``: the monitor's samples of the attempt; ``ended``: when the
    runner saw the process end (epoch seconds; now when None).
    """
    if code < 0:
        return signal_reason(-code, log_path, memory, ended)
    if said:
        return said
    line = last_line(log_path)  # a hint, labelled as such: it may not be the cause
    return f"cell exited with status {code}" + (f" (last line of its log: {line})"
                                                   if line else "")


def signal_reason(signum: int, log_path: Path, memory: MemoryTrail | None = None,
                  ended: float | None = None) -> str:
    """``cell killed by signal 9 (SIGKILL), not sent by the runner: Fatal Python error:
    ...; peak cell RSS 1194 MiB 2.1 s before; last monitor sample 0.4 s before: cell RSS
    17 MiB, host memory available 97 MiB`` (the parts that are known)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "unknown signal"
    reason = f"cell killed by signal {signum} ({name}), not sent by the runner"
    fatal = fatal_error(log_path)
    if fatal:
        reason += f": {fatal}"
    facts = sample_facts(memory, ended)
    if facts:
        reason += f"; {facts}"
    return reason


def fatal_error(log_path: Path) -> str:
    """Python's fault-handler report at the end of the log, as one line: ``Fatal Python
    error: Segmentation fault in File "x.py", line 3 in f`` (the innermost frame of the
    thread that faulted); "" when the log has none."""
    lines = _tail(log_path).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error:")]
    if not starts:
        return ""
    found = lines[starts[-1]].strip()
    frame = next((ln.strip() for ln in lines[starts[-1] + 1:] if _FRAME.match(ln)), "")
    return f"{found} in {frame}" if frame else found


def sample_facts(memory: MemoryTrail | None, ended: float | None = None) -> str:
    """``peak cell RSS 1194 MiB 2.1 s before, lowest host memory available 80 MiB 2.1 s
    before; last monitor sample 0.4 s before: cell RSS 17 MiB, host memory available 97
    MiB``: the extremes over the attempt's life where they are not the last sample's own
    figures, then the last sample, labelled; "" without samples (or memory figures)."""
    if memory is None or memory.last is None:
        return ""
    now = ended or time.time()
    last = memory.last
    extremes = []
    if memory.peak is not None and memory.peak is not last:
        extremes.append(f"peak cell RSS {memory.peak.rss_mib:.0f} MiB"
                        f"{_before(memory.peak, now)}")
    if memory.lowest is not None and memory.lowest is not last:
        extremes.append(f"lowest host memory available "
                        f"{memory.lowest.host_mem_available_mib:.0f} MiB"
                        f"{_before(memory.lowest, now)}")
    facts = [f"{label} {value:.0f} MiB"
             for value, label in ((last.rss_mib, "cell RSS"),
                                  (last.host_mem_available_mib, "host memory available"))
             if isinstance(value, (int, float))]
    parts = [", ".join(extremes)] if extremes else []
    if facts:
        parts.append(f"last monitor sample{_before(last, now)}: {', '.join(facts)}")
    return "; ".join(parts)


def _before(sample: MonitorSample, now: float) -> str:
    """`` 0.4 s before`` (the sample's wall-clock time to ``now``); "" without one."""
    at = sample.time
    return f" {max(now - at, 0.0):.1f} s before" if isinstance(at, (int, float)) else ""


def last_line(path: Path) -> str:
    """The log's last non-empty line (500 characters at most); "" when none."""
    lines = [ln.strip() for ln in _tail(path).splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - LOG_TAIL_BYTES, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
