"""The built-in executors' memory models: how each one's peak host RAM and device memory
add up from a profile's figures (``docs/profiles.md``, "The estimate"), declared with each
executor in ``engine.executors`` (``ExecutorSpec(memory_model=...)``) and read by
``engine.profile.estimate``. Every figure is a measurement of the profile
(:class:`~engine.profile.memory_model.Figures`); a model only says how they add up.

============== =========================================================================
executor       host RAM (MiB)                        device memory (MiB; GPU only)
============== =========================================================================
unified_model  K = 1: RSS(1); K >= 2: the stacked      context + the same for
               line base + K x per-member increment  reserved device memory
               (one process, one dataset copy)
mp             forkserver: parent + P x private      MPS server + P x (context
               memory of one forked job; spawn:      + reserved(1)): a context and a
               P x RSS(1)                            dataset copy per process
ray            P x (RSS(1) + ray import) (each       P x (context + reserved(1))
               actor is a process of its own)
seq            RSS(1): one job at a time             context + reserved(1)
============== =========================================================================

What a profile does not measure is named in the prediction's notes (the MPS server's and
the Ray runtime's own memory): the estimate's safety margin covers them.

Torch-free (the runner side reads these declarations).
"""

from __future__ import annotations

from engine.profile.memory_model import ONE_AT_A_TIME, Figures, MemoryModel, Prediction

#: seq: one job after another in the cell's process.
SEQ = ONE_AT_A_TIME


def _unified(f: Figures, k: int, mp_start: str) -> Prediction:
    return Prediction(f.stack_ram_mb(k), f.stack_device_mb(k), [])


#: unified_model: K jobs stacked in the cell's process, one dataset copy.
UNIFIED = MemoryModel(_unified, "shared",
                      "K = 1: RSS(1); K >= 2: the higher of the stacked training and set-up "
                      "lines | context + the stacked line over reserved memory")


def _mp(f: Figures, k: int, mp_start: str) -> Prediction:
    notes: list[str] = []
    ram: float | None
    if mp_start == "forkserver" and f.parent_rss_mb is not None and f.private1_mb is not None:
        ram = f.parent_rss_mb + k * f.private1_mb   # workers share the parent's pages
    else:
        ram = None if f.rss1_mb is None else k * f.rss1_mb
    per_process = f.process_device_mb
    dev = None if per_process is None else k * per_process
    if per_process is not None:
        notes.append("the MPS server's own device memory is not measured (the margin "
                     "covers it)")
    return Prediction(ram, dev, notes)


#: mp: one worker process per job (a context and a dataset copy each).
MP = MemoryModel(_mp, "processes",
                 "forkserver: parent + P x private(1); spawn: P x RSS(1) | "
                 "P x (context + reserved(1)), the MPS server aside")


def _ray(f: Figures, k: int, mp_start: str) -> Prediction:
    notes: list[str] = []
    extra = f.ray_import_mb
    if extra is None:
        notes.append("ray's import cost per actor not measured (ray not installed "
                     "where profiled)")
    ram = None if f.rss1_mb is None else k * (f.rss1_mb + (extra or 0.0))
    notes.append("the Ray runtime's own processes (raylet, GCS) are not in the profile "
                 "(the margin covers them)")
    per_process = f.process_device_mb
    return Prediction(ram, None if per_process is None else k * per_process, notes)


#: ray: one actor process per job, each carrying ray's import.
RAY = MemoryModel(_ray, "processes",
                  "P x (RSS(1) + ray import) | P x (context + reserved(1)), the Ray "
                  "runtime aside")
