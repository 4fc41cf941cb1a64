"""Pure maths over monitor samples: interpolation at a window's ends, trapezoidal
integrals, counter differences (with wrap-around), GPU energy and its method, and the row
columns of a window (:func:`summarise`). No I/O; torch-free.

Energy is the counter's difference interpolated at the window's ends where the device has a
counter (``energy_method = nvml_energy_counter``), otherwise the trapezoidal time integral
of sampled power with the ends interpolated (``power_integral``), otherwise missing
(``none``) — never 0 J for an unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _series(samples: Iterable[Mapping[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(s["t"], s[key]) for s in samples if s.get(key) is not None]


def _interp(points: list[tuple[float, float]], t: float) -> float | None:
    """Linear interpolation of ``points`` (sorted by time) at ``t``; None outside them."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (ta, va), (tb, vb) in zip(points, points[1:], strict=False):
        if ta <= t <= tb:
            return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    return points[-1][1] if t == points[-1][0] else None


def integrate(points: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Trapezoidal integral of ``points`` over ``[t0, t1]`` with the ends interpolated;
    None when the points do not cover the window."""
    a, b = _interp(points, t0), _interp(points, t1)
    if a is None or b is None or t1 < t0:
        return None
    inner = [(t, v) for t, v in points if t0 < t < t1]
    pts = [(t0, a)] + inner + [(t1, b)]
    return sum((tb - ta) * (va + vb) / 2 for (ta, va), (tb, vb) in zip(pts, pts[1:], strict=False))


def counter_delta(points: list[tuple[float, float]], t0: float, t1: float,
                  wrap: float | None = None) -> float | None:
    """Growth of a cumulative counter over ``[t0, t1]`` (interpolated at the ends); a
    decrease between neighbouring samples counts as one wrap of ``wrap`` when given."""
    if wrap:
        unwrapped, offset = [], 0.0
        for i, (t, v) in enumerate(points):
            if i and v < points[i - 1][1]:
                offset += wrap
            unwrapped.append((t, v + offset))
        points = unwrapped
    a, b = _interp(points, t0), _interp(points, t1)
    if a is None or b is None:
        return None
    return b - a


def energy_over(samples: list[dict[str, Any]], t0: float, t1: float) -> tuple[float | None, str]:
    """GPU energy (J) over ``[t0, t1]`` and its method: ``nvml_energy_counter``,
    ``power_integral``, or ``none`` (then the energy is None — unknown, not 0)."""
    delta = counter_delta(_series(samples, "energy_mj"), t0, t1)
    if delta is not None:
        return delta / 1000.0, "nvml_energy_counter"
    joules = integrate(_series(samples, "power_w"), t0, t1)
    if joules is not None:
        return joules, "power_integral"
    return None, "none"


def summarise(samples: list[dict[str, Any]], t0: float, t1: float,
              rapl_wrap: float | None = None) -> dict[str, Any]:
    """Row columns over the window ``[t0, t1]`` (monotonic seconds).

    Means and maxima use the samples inside the window (the nearest sample when the window
    is shorter than one interval); energy interpolates the window's ends (see
    :func:`energy_over`). A metric no sample has stays ``None``.
    """
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    if not inside and samples:
        mid = (t0 + t1) / 2
        inside = [min(samples, key=lambda s: abs(s["t"] - mid))]

    def values(key: str) -> list[float]:
        got = [s[key] for s in inside if s.get(key) is not None]
        if got or key != "cpu_pct":
            return got
        # CPU % is a rate over the interval since the previous reading, and a reading
        # under 50 ms after the last reports none (engine.measure.host): a short window
        # whose samples are its two marks had none (cpu_util empty on a fast ray cell).
        # The first reading after the window opened covers part of it: that one.
        after = [s for s in samples if s["t"] >= t0 and s.get(key) is not None]
        return [min(after, key=lambda s: s["t"])[key]] if after else []

    def mean(key: str) -> float | None:
        v = values(key)
        return sum(v) / len(v) if v else None

    def peak(key: str, fn=max) -> float | None:
        v = values(key)
        return fn(v) if v else None

    energy, method = energy_over(samples, t0, t1)
    cpu_energy = counter_delta(_series(samples, "cpu_energy_uj"), t0, t1, rapl_wrap)
    return {
        "gpu_util_mean": mean("gpu_util_pct"), "gpu_util_max": peak("gpu_util_pct"),
        "vram_peak_mb": peak("mem_used_mib"), "energy": energy, "energy_method": method,
        "gpu_power_mean_w": mean("power_w"), "gpu_sm_clock_mean_mhz": mean("sm_clock_mhz"),
        "gpu_temp_max_c": peak("temp_c"), "cpu_util_mean": mean("cpu_pct"),
        "cpu_util_max": peak("cpu_pct"), "rss_peak_mb": peak("rss_mib"),
        "host_mem_available_min_mb": peak("host_mem_available_mib", min),
        "cpu_energy_j": cpu_energy / 1e6 if cpu_energy is not None else None,
        "cpu_energy_method": "rapl" if cpu_energy is not None else "none",
        "monitor_samples": len([s for s in samples if t0 <= s["t"] <= t1]),
        "monitor_cpu_share": _share(counter_delta(_series(samples, "monitor_cpu_s"), t0, t1),
                                    t1 - t0),
    }


def _share(cpu_s: float | None, seconds: float) -> float | None:
    return cpu_s / seconds if cpu_s is not None and seconds > 0 else None
