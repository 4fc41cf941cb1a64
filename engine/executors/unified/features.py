"""The unified model's features: what was requested, what runs, and why they differ.

One function, :func:`effective_features`, decides the effective configuration from
(requested features, device type, compile mode, compile probe result). It is the only
place this is decided: the executor records its result in the group's ``features`` /
``features_reason`` columns, the tests check every row against it.

Flags (``vf:{0|1},s:{0|1},fl:{0|1}``, docs/fugue-compat.md):

* ``vf`` vectorised forward: 1 only if every bucket that trained ran the vectorised route
  (``eager``: a single-member bucket, or one the checks sent eager, makes it 0 and is
  named in the reason; ``eager_buckets`` counts them);
* ``s`` one CUDA stream per bucket: 0 on any device but CUDA (there are no streams), and 0
  under a compile mode that captures CUDA graphs (``reduce-overhead``, ``max-autotune``)
  when compilation actually ran (graph capture does not tolerate side streams); a failed
  compile probe trains eagerly, so streams stay;
* ``fl`` fused loss: 0 without the vectorised forward (there is no stack to fuse over),
  and 0 when a bucket trained eagerly (it ran without one).

A flag is 1 only if it held in every bucket: the ``eager_buckets`` column says how many
buckets trained eagerly and why the first did.

Compile is not a flag of this column (its mode is ``compile_mode``), but a failed compile
probe is named in the reason, since it changes what ran.

Torch-free.
"""

from __future__ import annotations

from engine.define.axes import DEFAULT_FEATURES  # declared there (the option's default)

#: The baseline switch (rung A): every extension off.
BASELINE_FEATURES = "vf:0,s:0,fl:0"
#: torch.compile modes that capture CUDA graphs (mode "max-autotune-no-cudagraphs" does not).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
FLAGS = ("vf", "s", "fl")


def requested_features(text: str | None) -> dict[str, int]:
    """Every flag a features string asks for: ``"vf:1,fl:1"`` → ``{"vf": 1, "s": 1,
    "fl": 1}`` (missing flags take :data:`DEFAULT_FEATURES`' values; the syntax is
    :func:`engine.define.axes.parse_features`', which returns only the flags written).

    Raises:
        ValueError: a malformed string, naming the bad part.
    """
    from engine.define.axes import parse_features

    return {**parse_features(DEFAULT_FEATURES), **parse_features(text or "")}


def features_string(features: dict[str, int]) -> str:
    return f"vf:{features['vf']},s:{features['s']},fl:{features['fl']}"


def effective_features(requested: str | dict[str, int] | None, device_type: str,
                       compile_mode: str = "off",
                       compile_ok: bool | None = None,
                       eager: tuple[int, int, str] | None = None,
                       ) -> tuple[dict[str, int], str | None]:
    """The features that run, and why they differ from ``requested`` (``None`` if they
    do not).

    Args:
        requested: a features string (or parsed dict); missing flags take the defaults.
        device_type: ``"cuda"``, ``"cpu"``, ``"mps"``, ...
        compile_mode: the compile mode asked for (``"off"`` or a torch.compile mode).
        compile_ok: the compile probe's result: True when compiled code runs, False when
            it fell back to eager, None when compile was not asked for (or not probed yet).
        eager: after training, ``(n, m, first reason)``: n of the m buckets that trained
            ran the eager route (:func:`eager_buckets`); ``vf`` (and with it ``fl``) is 1
            only when n is 0. None: not known yet (before training).

    Raises:
        ValueError: a malformed features string.
    """
    want = requested_features(requested) if not isinstance(requested, dict) else \
        {**requested_features(None), **requested}
    have = dict(want)
    reasons: list[str] = []
    if want["s"]:
        if device_type != "cuda":
            have["s"] = 0
            reasons.append(f"s: no CUDA streams on a {device_type} device")
        elif compile_mode in CUDA_GRAPH_MODES and compile_ok:
            have["s"] = 0
            reasons.append(f"s: compile mode {compile_mode} captures CUDA graphs, which do "
                           "not tolerate side streams")
    if compile_mode != "off" and compile_ok is False:
        reasons.append(f"compile {compile_mode}: the probe failed, trained eagerly (why: "
                       "executor_info)")
    if want["vf"] and eager is not None and eager[0]:
        n, m, first = eager
        have["vf"] = 0
        reasons.append(f"vf: {n} of {m} bucket{'s' if m != 1 else ''} trained eagerly "
                       f"({first}; eager_buckets)")
        if want["fl"]:
            have["fl"] = 0
            reasons.append("fl: the fused loss did not run in the eager buckets")
    if want["fl"] and not want["vf"]:
        have["fl"] = 0
        reasons.append("fl: a fused loss needs the vectorised forward (vf:0)")
    return have, "; ".join(reasons) or None


def eager_buckets(buckets: list[tuple[str, str]]) -> tuple[int, int, str]:
    """``(n, m, first reason)`` over the buckets that trained, each ``(route, reason)``:
    n of the m ran ``eager``; the first eager one's reason (its first line, at most 160
    characters), "" when none."""
    eager = [reason for route, reason in buckets if route == "eager"]
    first = (eager[0].splitlines() or [""])[0][:160] if eager else ""
    return len(eager), len(buckets), first


def eager_buckets_text(counts: tuple[int, int, str]) -> str:
    """The ``eager_buckets`` column: ``"n/m: <first reason>"``, or ``"0/m"`` when every
    bucket ran vectorised (it still says how many buckets there were)."""
    n, m, first = counts
    return f"{n}/{m}: {first}" if n else f"0/{m}"
