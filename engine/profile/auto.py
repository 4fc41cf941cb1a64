"""How many jobs of a cell run at once: ``max_parallel`` resolved at plan time.

``max_parallel`` of mp, ray and unified_model is a number the user wrote (method
``user``), ``"auto"`` — the estimate (:mod:`engine.profile.estimate`) from this machine's
profiles (:mod:`engine.profile.store`) and the campaign's budget, method ``profile`` — or
absent: all jobs of the cell at once, method ``all``. ``"auto"`` without a profile for
every job of the cell is ``all`` too, with one warning line (the fugue harness's
behaviour: there is nothing to divide memory by; it may fit, or run out of memory).

The resolved number is what the cell runs and what its key hashes, exactly as if the user
had written it (``docs/measurement.md``, "Cell keys", rule 3): a cell never hashes the word
``"auto"``, and an estimate of 3 shares its key with a hand-set 3 (the same thing runs).

Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.profile.budget import Budget
from engine.profile.estimate import Estimate, fits
from engine.profile.store import Profile, job_key, key_text, lookup

AUTO = "auto"
#: ``profile-share``: ``"auto"`` estimated in a multi-device campaign with one cell's share of
#: the host's cores (``engine.define.matrix.HostShare``), set by the plan, not here.
METHODS = ("user", "profile", "all", "profile-share")


@dataclass
class Resolution:
    """``k``: the number (None: all jobs, written as K by the cell row); ``method``:
    user | profile | all; ``profiles``: ids of the profiles used; ``notes``: one line each
    (the missing profile, another machine's profile ignored); ``estimate``: the estimate
    when one was made."""

    k: int | None
    method: str
    profiles: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    estimate: Estimate | None = None


def estimate_cell(jobs: list[dict[str, Any]], executor: str, *, compile_mode: str,
                  device: str, profiles: list[Profile], ident: dict[str, str],
                  budget: Budget, mp_start: str = "forkserver", precision: str | None = None
                  ) -> tuple[Estimate | None, list[str], list[str]]:
    """The estimate for one cell's jobs under ``executor``, the profile ids used and the
    notes. None when a job's profile key has no profile on this machine (the ids are
    then that key, in words). A cell of several keys (multi_model, an hpo grid over batch
    sizes) is estimated with its largest profile (largest RSS(1), then per-member
    increment) for every job: conservative, and said in a note.

    ``precision``: the cell's requested precision (None: the jobs' legacy amp flag). The
    profile of the precision that runs on ``device`` is used when measured; else the fp32
    profile of the same key, scaled as :mod:`engine.profile.precision_model` models it
    (a note says which profile and how)."""
    from engine.profile.precision_model import WHY, effective, scale

    keys: dict[str, dict[str, str]] = {}
    for job in jobs:
        ran = effective(precision, device, bool(job.get("amp")))
        key = job_key(job, compile_mode, device, ran)
        keys.setdefault(str(sorted(key.items())), key)
    found: list[Profile] = []
    notes: list[str] = []
    factor = 1.0
    for key in keys.values():
        profile, note = lookup(profiles, key, ident)
        if profile is None and key["precision"] != "fp32":
            # no profile of this precision: the fp32 one, scaled (precision_model)
            base = {**key, "precision": "fp32"}
            profile, note = lookup(profiles, base, ident)
            if profile is not None:
                factor = min(factor, scale(key["precision"]))
                notes.append(f"no {key['precision']} profile of {key_text(base)}: estimated "
                             f"from the fp32 profile {profile.id} ({WHY.get(key['precision'], '')}"
                             f"; docs/profiles.md \"Precision\")")
        if note:
            notes.append(note)
        if profile is None:
            return None, [key_text(key)], notes
        found.append(profile)
    worst = max(found, key=lambda p: (p.num("rss1_mb") or 0.0,
                                      p.num("rss_per_member_mb") or 0.0))
    if len(found) > 1:
        notes.append(f"{len(found)} profile keys in the cell: estimated with the largest "
                     f"({worst.id}) for every job")
    estimate = fits(worst, executor, len(jobs), budget, mp_start=mp_start,
                    member_scale=factor)
    return estimate, [p.id for p in found], notes


def resolve(value: Any, jobs: list[dict[str, Any]], executor: str, *, compile_mode: str,
            device: str, profiles: list[Profile], ident: dict[str, str], budget: Budget,
            mp_start: str = "forkserver", precision: str | None = None) -> Resolution:
    """``max_parallel`` of one cell: ``value`` is the option as written (a number,
    ``"auto"`` or None); ``mp_start`` the cell's one start method, ``precision`` its
    requested precision (:func:`estimate_cell`)."""
    if value is None:
        return Resolution(None, "all")
    if value != AUTO:
        return Resolution(int(value), "user")
    estimate, ids, notes = estimate_cell(jobs, executor, compile_mode=compile_mode,
                                         device=device, profiles=profiles, ident=ident,
                                         budget=budget, mp_start=mp_start,
                                         precision=precision)
    if estimate is None:
        exp = jobs[0].get("exp_id", "") if jobs else ""
        notes.append(f"max_parallel = \"auto\" ({exp} under {executor}): no profile of "
                     f"{ids[0]} on this machine, so all {len(jobs)} jobs run at once and may "
                     f"run out of memory (measure it: fugue-tui profile {exp})")
        return Resolution(len(jobs), "all", [], notes)
    # A budget too small for even one job is worth a warning; the other notes (what the
    # profile leaves to the margin) are simulate's.
    notes += [n for n in estimate.notes if n.startswith("even one job")]
    return Resolution(estimate.k, "profile", ids, notes, estimate)
