"""The process body of one ``mp`` job: a process forked from the pre-warmed parent
(``start = "forkserver"``, ``engine.executors.mp.parent``) or a fresh spawned interpreter
(``start = "spawn"``) that sets itself up like a cell, trains one job with
:func:`engine.train.loop.train_job` and sends its result back.

Kept small and importable without torch, so ``multiprocessing``'s spawn start method can
import :func:`worker_main` in the child before anything else happens there. Everything this
function does counts inside ``T_group`` (``docs/measurement.md``, mp column): what the
process still imports (everything, when spawned; nothing, when forked from the warm
parent), torch set-up, plugins, the dataset load and its device copy.

Messages on ``conn`` (a one-way ``multiprocessing`` pipe to the cell), each a tuple:
``("ready", {"pid", "setup_s", "ready_at", "prewarmed"})`` once set up (``ready_at``: its
``time.perf_counter``, a system-wide monotonic clock the cell compares with the moment it
asked for the worker; ``prewarmed``: torch was already imported when the worker's code
began), ``("progress", fields)`` from the training
loop, ``("epoch", (JobResult, spans))`` after each epoch (the result so far: what remains of
the job if its process dies later), then ``("result", (JobResult, spans))`` — ``spans`` the
``(start, end)`` ``perf_counter`` pairs of its epochs' training-step phases — or
``("error", one_line)`` when set-up failed, and ``("cpu", seconds)`` (its user + system
CPU) just before it leaves after a result: a forked worker is the parent's child, not the
cell's, so the cell's own accounting never sees it. A job that ended ok then says
``("held", None)`` and keeps its final weights, waiting for the cell's hand-back after the
group window (:func:`_hand_back`): the worker process outlives its job until then.

Under a pruning scheduler the worker sends ``("rung", epoch)`` after each epoch the cell
may judge it at (``settings["rungs"]``) and waits for ``"go"`` or ``"stop"``; stopped, it
sends no result (the cell keeps the epoch's) and holds its weights as of that epoch for
the hand-back, as a finished job does (issue 50).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Any


def _exit_on_sigterm(signum, frame):  # noqa: ARG001 - signal handler signature
    # Unwind through Python (finally blocks, CUDA context teardown at exit) instead of the
    # default immediate death: an MPS client that vanishes mid-kernel can leave the MPS
    # server unusable for the other clients. SIGKILL follows after a grace period anyway.
    raise SystemExit(128 + signum)


def _hand_back(conn: Any, job: Any, result: Any, state: Any) -> None:
    """Hold the job's final weights until the cell's hand-back after the group window
    (issue 50): say ``("held", None)``, wait for ``("hand_back", {"save", "attempt_dir",
    "result"})`` (``result``: the cell's record of the job, which a stopped trial's saved
    JSON describes; ``result`` here is the fallback), digest (and save) here, where the
    weights are, and answer ``("handed", HandBack)``.
    Any other message (``"exit"``), the cell closing its end (EOF) or the cell's death
    (``die_with_parent``) ends the wait: the worker leaves without handing back."""
    from engine.models.hand_back import hand_back_one

    conn.send(("held", None))
    try:
        message = conn.recv()
    except (EOFError, OSError):
        return
    if isinstance(message, tuple) and message[0] == "hand_back":
        ask = message[1]
        back = hand_back_one(job, ask.get("result") or result, state, "mp",
                             bool(ask.get("save")), ask.get("attempt_dir"))
        with contextlib.suppress(OSError):
            conn.send(("handed", back))


def worker_main(conn: Any, job_dict: dict[str, Any], settings: dict[str, Any], threads: int,
                env: dict[str, str], parent_pid: int) -> None:
    """Train one job (``JobSpec.to_dict()``) in this process.

    ``settings``: ``device`` (a torch device string), ``compile_mode``, ``amp_allowed``,
    ``precision`` (the cell's requested one, or None), ``compile_backend`` —
    plain data, like the job, so that nothing imports torch before ``env`` is set: the MPS
    client variables must be in the environment when the CUDA driver initialises.
    ``threads`` is the torch intra-op thread count; ``parent_pid`` is this process's parent
    (the cell, or the pre-warmed parent that forked it), whose death kills this process
    (``prctl``). Forked from the warm parent, torch is imported but CUDA is not initialised
    (the parent checks that), so ``env`` still lands before the driver reads it.
    """
    t0 = time.perf_counter()
    prewarmed = "torch" in sys.modules
    pin, initialised = settings.get("pin"), False
    if pin is not None:
        # Packing (issue 27): pinned by CUDA_VISIBLE_DEVICES, which the driver reads once,
        # when CUDA initialises; a process where that already happened cannot be re-pinned.
        from engine.executors.packing import check_repin

        torch_mod = sys.modules.get("torch")
        initialised = bool(torch_mod is not None and torch_mod.cuda.is_initialized())
        try:
            check_repin(pin, os.environ, initialised)
        except RuntimeError as exc:
            conn.send(("error", str(exc)))
            conn.close()
            sys.exit(1)
    os.environ.update(env)
    if pin is not None:
        conn.send(("pin", {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "torch_imported": prewarmed, "cuda_initialized": initialised}))
    from engine import stacks
    from engine.errors import failure_line
    from engine.processes import die_with_parent

    die_with_parent(parent_pid)()
    stacks.install("mp-worker")  # first: a hang in set-up is dumped too
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cell decides when its workers stop
    try:
        import torch

        from engine.define.workloads import JobSpec
        from engine.parts.datasets import load_dataset
        from engine.plugins import load_plugins
        from engine.train.backend import apply_backend_flags
        from engine.train.data import to_device
        from engine.train.loop import JobStopped, TrainSettings, train_job

        job = JobSpec.from_dict(job_dict)
        train_settings = TrainSettings(device=torch.device(settings["device"]),
                                       compile_mode=settings["compile_mode"],
                                       amp_allowed=settings["amp_allowed"],
                                       precision=settings.get("precision"),
                                       compile_backend=settings.get("compile_backend",
                                                                    "inductor"))
        torch.set_num_threads(threads)
        apply_backend_flags()
        # The same warm-up as the cell (engine.cell.main): torch.optim imports torch._dynamo on
        # first use; here it lands in the worker's set-up time, not in the job's
        # total_time_s, so job times compare with seq's.
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        load_plugins()
        data = to_device(load_dataset(job.dataset, where=job.job_id), train_settings.device)
    except Exception as exc:  # noqa: BLE001 - reported to the cell as the job's failure
        conn.send(("error", failure_line(exc)))
        conn.close()
        sys.exit(1)
    ready_at = time.perf_counter()
    conn.send(("ready", {"pid": os.getpid(), "setup_s": ready_at - t0, "ready_at": ready_at,
                         "prewarmed": prewarmed}))
    # The epochs' training-step spans, for the group's training wall time (the same
    # definition as ray's: docs/measurement.md).
    from engine.measure.spans import TrainSpans

    # Each epoch's result goes to the cell as it stands (pickled, so a copy): a worker
    # killed later still leaves its finished epochs, samples and validation in its row.
    spans = TrainSpans(lambda so_far, done: conn.send(("epoch", (so_far, list(done)))))
    rungs = set(settings.get("rungs") or ())

    def epoch_end(so_far) -> None:
        spans(so_far)
        if so_far.epochs_run in rungs:
            # Wait for the cell's verdict on this epoch: sha (issue 25) once every trial
            # reached the rung; asha, median, hyperband at once (each epoch they may judge
            # it at). "stop" ends the job here, after this epoch (the cell keeps the
            # epoch's result, already sent); the training loop keeps the weights as they
            # are now, held for the hand-back (issue 50).
            conn.send(("rung", so_far.epochs_run))
            if conn.recv() == "stop":
                raise JobStopped()

    kept: dict[str, Any] = {}
    result = None
    try:
        result = train_job(job, data, train_settings,
                           progress=lambda **fields: conn.send(("progress", fields)),
                           on_epoch_end=epoch_end, keep=lambda state: kept.update(state=state))
    except JobStopped:
        pass  # stopped at a verdict: no result of its own (the cell has the epoch's)
    else:
        conn.send(("result", (result, spans.spans)))
    times = os.times()
    conn.send(("cpu", times.user + times.system))
    if (result is None or result.status == "ok") and "state" in kept:
        del data  # only the weights stay while the worker waits for the hand-back
        _hand_back(conn, job, result, kept.pop("state"))
    conn.close()
    # Leave without interpreter teardown: with torch loaded it takes ~2.5 s of CPU on a
    # small host, during which the process would hold its slot and compete with the next
    # job, although its job ended at its last validation (the end of the job in
    # docs/measurement.md). No device work is in flight: train_job synchronised at its end,
    # and the driver releases the context (MPS: the server sees its client leave).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
