"""The report's "same weights as seq" count (issue 50): per cell, how many of a group's K
jobs ended with the same ``weights_sha256`` as the same job (by job id) in the cell's seq
baseline — ``n of K``, the lowest over the cell's ok groups (the worst pass) — beside the
parity verdict, which judges accuracies and losses only. Torch-free, pure.

``n/a`` where it cannot be judged: the seq cells themselves (the baseline), a cell without
a seq baseline, rows without digests (older rows), and hpo cells under an
early-stopping scheduler whose decisions differ from seq's under the same scheduler (a
trial pruned on one side and finished on the other has other weights by design; the
pairing is time to best's, ``ttb_baseline``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The count where it cannot be judged.
SAME_NA = "n/a"


def _digests(jobs: pd.DataFrame, groups: pd.Series) -> dict[str, set[str]]:
    """job id → the digests seq's jobs in ``groups`` ended with (empty ones left out)."""
    rows = jobs[jobs["group_id"].isin(set(groups)) & (jobs["status"] == "ok")]
    out: dict[str, set[str]] = {}
    for job_id, digest in zip(rows["job_id"], rows["weights_sha256"], strict=True):
        if isinstance(digest, str) and digest:
            out.setdefault(str(job_id), set()).add(digest)
    return out


def _count(jobs: pd.DataFrame, group_ids: list[str], seq: dict[str, set[str]]) -> str:
    """``n of K``: the lowest count of the cell's groups (K: each group's job rows)."""
    worst: tuple[int, int] | None = None
    for gid in group_ids:
        rows = jobs[jobs["group_id"] == gid]
        if not len(rows):
            continue
        digests = [d if isinstance(d, str) else "" for d in rows["weights_sha256"]]
        if not any(digests):
            return SAME_NA  # this group recorded no digest: nothing to judge
        same = sum(1 for job_id, d in zip(rows["job_id"], digests, strict=True)
                   if d and d in seq.get(str(job_id), ()))
        if worst is None or same < worst[0]:
            worst = (same, len(rows))
    return SAME_NA if worst is None else f"{worst[0]} of {worst[1]}"


def same_weights(cells: pd.DataFrame, ok: pd.DataFrame, seq_rows: pd.DataFrame,
                 all_seq: pd.DataFrame, seq_key: list[str], jobs: pd.DataFrame,
                 baseline_executor: str = "seq") -> list[str]:
    """Each cell's count (see the module doc). ``cells``: the speedup table (``cell``,
    ``base``, ``executor``, ``mode``, ``sched``, ``ttb_baseline``); ``ok``: the ok group rows
    with their ``cell``; ``seq_rows``: seq fifo rows with ``base``; ``all_seq``: every seq
    row (hpo pairing by ``seq_key``, time to best's baseline columns)."""
    if not len(jobs) or "weights_sha256" not in jobs.columns or not len(cells):
        return [SAME_NA] * len(cells)
    by_cell = ok.groupby("cell", sort=False)["group_id"].agg(list)
    out = []
    for _, cell in cells.iterrows():
        value = SAME_NA
        groups = by_cell.get(cell["cell"], [])
        if cell["executor"] != baseline_executor and groups:
            base = None
            if cell.get("mode") == "hpo" and cell.get("sched") not in (None, "fifo"):
                # pruning: only against seq under the same scheduler, same decisions
                if cell.get("ttb_baseline") == f"{baseline_executor} {cell['sched']}":
                    key = tuple(cell[c] for c in seq_key)
                    mask = np.ones(len(all_seq), dtype=bool)
                    for c, v in zip(seq_key, key, strict=True):
                        mask &= (all_seq[c] == v).to_numpy()
                    base = all_seq.loc[mask, "group_id"]
            elif "base" in cell and cell["base"] == cell["base"]:  # not NaN
                base = seq_rows.loc[seq_rows["base"] == cell["base"], "group_id"]
            if base is not None and len(base):
                seq = _digests(jobs, base)
                if seq:
                    value = _count(jobs, groups, seq)
        out.append(value)
    return out
