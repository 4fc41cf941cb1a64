"""The run screen's host bar: one line, visible while the campaign's runner lives, with the host's CPU and memory and
each GPU's utilisation and memory — what the follow worker's
:class:`~fugue_tui.app.models.series.HostPoller` sampled last (the same sampler as the idle
charts; :attr:`fugue_tui.app.models.run.RunModel.host_now`). A part the host cannot measure
is left out (no GPU: no GPU part), never shown as 0. A finished or replayed campaign has no
bar (the host now is not the campaign's).

The line is fitted to the bar's width as the header is (:data:`LEVELS` forms, each shorter,
the first that fits): at 80 columns with two GPUs it still fits in one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.widget import Widget

#: How many forms :func:`host_line` has (0: the longest).
LEVELS = 4


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f}"


def _pct(part: float | None, whole: float | None) -> str:
    return f"{100 * part / whole:.0f}%" if part is not None and whole else ""


def host_line(sample: Mapping[str, Any], level: int = 0) -> str:
    """The bar's text for the host ``sample`` (:meth:`HostPoller.sample`: ``cpu_pct`` % of
    one core, ``cores``, ``rss_mib`` memory in use and ``mem_total_mib``, ``devices`` NVML
    readings) in its ``level``-th form (0 to :data:`LEVELS` - 1): 0 ``host CPU 21% · mem
    3.2/15.6 GiB · GPU0 87% 10.2/80.0 GiB``; 1 without ``host`` and units; 2 memory as %;
    3 the bare figures. "" before the first sample."""
    if not sample:
        return ""
    cores = sample.get("cores") or 1
    cpu = sample.get("cpu_pct")
    used, total = sample.get("rss_mib"), sample.get("mem_total_mib")
    parts = []
    if isinstance(cpu, (int, float)):
        parts.append(("CPU " if level < 3 else "C") + f"{cpu / cores:.0f}%")
    if isinstance(used, (int, float)):
        if level < 2 and total:
            parts.append(f"mem {_gib(used)}/{_gib(total)}" + (" GiB" if level == 0 else "G"))
        else:
            parts.append(("mem " if level < 3 else "M") + (_pct(used, total) or _gib(used)))
    for dev in sample.get("devices") or ():
        util = f"{dev.util_pct:.0f}%" if dev.util_pct is not None else ""
        if dev.mem_used_mib is None:
            memory = ""
        elif level < 2 and dev.mem_total_mib:
            memory = f"{_gib(dev.mem_used_mib)}/{_gib(dev.mem_total_mib)}" + \
                (" GiB" if level == 0 else "G")
        else:
            memory = "m" + (_pct(dev.mem_used_mib, dev.mem_total_mib)
                            or _gib(dev.mem_used_mib) + "G")
        figures = " ".join(p for p in (util, memory) if p)
        if figures:
            parts.append(("GPU" if level < 3 else "G") + f"{dev.index} {figures}")
    line = (" · " if level < 3 else " ").join(parts)
    return ("host " + line) if level == 0 and line else line


class HostBar(Widget):
    """The one-line bar (see the module); :meth:`show` takes each new sample. A plain
    widget that renders its line, not a ``Static``: ``Static.update`` lays the whole
    screen out again, once a second here (0.2 % of a core on the run screen)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sample: Mapping[str, Any] = {}
        self._text = ""
        self.display = False  # until a sample: no empty line

    def show(self, sample: Mapping[str, Any]) -> None:
        """Draw ``sample`` (repaints only when the line changed)."""
        self.sample = sample
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def render(self) -> Text:
        return Text(self._text, no_wrap=True, overflow="ellipsis")

    def _fit(self) -> None:
        width = max(self.content_size.width, 1)
        text = ""
        for level in range(LEVELS):
            text = host_line(self.sample, level)
            if len(text) <= width:
                break
        if text != self._text:
            self._text = text
            if self.display != bool(text):
                self.display = bool(text)  # nothing sampled (a replay): no empty line
            self.refresh()  # the same one line: no layout
