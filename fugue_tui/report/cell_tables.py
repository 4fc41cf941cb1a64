"""The report's Rich tables: one row per experiment × executor cell, one table per
provenance key (machine, GPU, stack), split into several when the columns do not fit the
width. Each cell's texts come from :func:`cell_values`; a value that was not measured is
"—", never 0. Numbers come from :mod:`engine.results.analysis`; this module formats them."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from engine.results.derived import BASELINE_EXECUTOR, parity_words
from engine.results.parity_contract import wording
from fugue_tui.format import MISSING, fmt_number, fmt_text


def _provenance_title(row: dict[str, Any], by_campaign: bool) -> str:
    gpu = row.get("gpu_name") or "no GPU"
    parts = [str(row.get("machine") or "unknown machine"), gpu,
             f"torch {row.get('torch_version') or '?'}"]
    if row.get("cuda_version"):
        parts.append(f"CUDA {row['cuda_version']}")
    if by_campaign:
        parts.append(f"campaign file {row.get('campaign_hash') or '?'}")
    return " · ".join(parts)


def cell_values(row: dict[str, Any]) -> dict[str, str]:
    """Every column's text for one cell row."""
    n = row.get("n_strategy")
    n = 0 if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)
    speedup = fmt_number(row.get("speedup"), ".3f")
    if speedup == MISSING and n:
        # a cell packed over several GPUs has a seq, but no single-GPU speedup (issue 27)
        packed = str(row.get("baseline") or "").startswith("none: packed")
        speedup = "n/a (packed)" if packed else f"n/a (no {BASELINE_EXECUTOR})"
    ci = fmt_text(row.get("ci"))
    bad = row.get("not_ok")
    precision = fmt_text(row.get("precision"))
    variant = " ".join(v for v in (fmt_text(row.get("scheduler")),
                                   fmt_text(row.get("features")),
                                   fmt_text(row.get("mp_start")),
                                   fmt_text(row.get("tune_actors")),
                                   precision if precision != "fp32" else "") if v)
    seq_acc = MISSING
    if fmt_number(row.get("seq_acc_mean"), ".3f") != MISSING:
        seq_acc = (f"{fmt_number(row.get('seq_acc_mean'), '.3f')} "
                   f"[{fmt_number(row.get('seq_acc_min'), '.3f')}"
                   f", {fmt_number(row.get('seq_acc_max'), '.3f')}]")
    return {
        "experiment": str(row["exp_id"]), "executor": str(row["executor"]),
        "K": fmt_number(row.get("K"), ".0f"),
        "compile": str(row["compile_mode"]), "ok": str(n), "variant": variant or MISSING,
        "T_group s": fmt_number(row.get("T_group_mean"), ".2f"),
        "T_group sd": fmt_number(row.get("T_group_std"), ".2f"),
        "setup s": fmt_number(row.get("setup_s_mean"), ".2f"),
        "samples/s": fmt_number(row.get("throughput_group_mean"), ",.0f"),
        "train samples/s": fmt_number(row.get("train_throughput_mean"), ",.0f"),
        "J/model": fmt_number(row.get("energy_per_model_j"), ",.1f"),
        "VRAM MiB": fmt_number(row.get("vram_peak_mb_max"), ",.0f"),
        "speedup": speedup, "95% CI": ci if ci and n else MISSING,
        # the cores behind the speedup (issue 46): mp and ray use several, seq one
        "cores": fmt_number(row.get("cores_used_mean"), ".2f") if n else MISSING,
        "baseline": fmt_text(row.get("baseline")) or MISSING,
        "val acc": fmt_number(row.get("acc_mean"), ".3f"), "seq acc [min, max]": seq_acc,
        # the verdict and, where outside, what failed (the note under the tables explains)
        "parity": (parity_words(row.get("parity"), row.get("parity_failed"),
                                row.get("parity_on")) or MISSING) if n else MISSING,
        # issue 50: n of K jobs with seq's weights (engine.results.same_weights)
        "same weights": (fmt_text(row.get("same_weights")) or MISSING) if n else MISSING,
        "not ok": str(int(bad)) if bad is not None and bad == bad else "0",
        # "bit for bit" only where every row of the cell says exact (issue 42)
        "contract": (wording(row.get("parity_contract")) or MISSING) if n else MISSING,
        "host load": _host_load(row) if n else MISSING,
    }


def _host_load(row: dict[str, Any]) -> str:
    """The highest 1-minute host load over the cell's rows with the cores (issue 46), and
    how many rows were busy: ``6.2 / 2 cores, busy 5``; "—" when no load was recorded."""
    load = fmt_number(row.get("host_load_max"), ".1f")
    if load == MISSING:
        return MISSING
    cores = fmt_number(row.get("host_cores"), "g")
    busy = row.get("busy_n")
    text = load + (f" / {cores} cores" if cores != MISSING else "")
    return text + (f", busy {int(busy)}" if busy and busy == busy else "")


#: The columns every table starts with; K beside the executor when the rows form a K
#: sweep (issue 23: its cells share one experiment id), see :func:`_key_columns`.
_KEY = ("experiment", "executor", "compile", "ok")
_KEY_SWEPT = ("experiment", "executor", "K", "compile", "ok")
_RIGHT = {"ok", "K", "T_group s", "T_group sd", "setup s", "samples/s", "train samples/s",
          "J/model", "VRAM MiB", "speedup", "cores", "95% CI", "val acc"}
#: Every column after _KEY, in order: the speedup columns first, so that a narrow console
#: (several tables) still shows them together in the first one.
_COLUMNS = ("T_group s", "speedup", "cores", "95% CI", "baseline", "variant", "setup s", "T_group sd",
            "samples/s", "train samples/s", "J/model", "VRAM MiB", "val acc",
            "seq acc [min, max]", "parity", "same weights", "not ok", "contract", "host load")
#: Headers on two lines, so that a column is no wider than its numbers.
_HEADERS = {"T_group s": "T_group\ns", "T_group sd": "T_group\nsd", "setup s": "setup\ns",
            "samples/s": "samples\n/s",
            "train samples/s": "train\nsamples/s", "J/model": "J/\nmodel",
            "VRAM MiB": "VRAM\nMiB", "val acc": "val\nacc", "seq acc [min, max]":
            "seq acc\n[min, max]", "not ok": "not\nok", "experiment": "exp",
            "contract": "parity\ncontract", "host load": "host\nload",
            "same weights": "same weights\nas seq",
            "cores": "cores\nused"}


def _natural_width(table: Table) -> int:
    """The width ``table`` takes when nothing has to wrap."""
    console = Console(width=100_000, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def build_tables(speedup_df, status_df=None, by_campaign: bool = False,
                 title_prefix: str = "", width: int | None = None) -> list[Table]:
    """Tables of ``speedup_df`` (:func:`engine.results.analysis.speedups`), per provenance key, rows
    in its order: one table with every column when it fits in ``width`` (None: always);
    else as many tables as needed, each starting with experiment, executor, compile and
    ok (and K, when the rows form a K sweep), the speedup columns in the first. ``status_df``
    (:func:`engine.results.analysis.cell_status`) adds the "not ok" counts and the cells without
    any ok row. Columns with nothing to show (no variant, no energy measured, ...) are left
    out, except T_group, speedup, interval and baseline.
    """
    from engine.results.analysis import cell_columns, provenance_columns

    prov = provenance_columns(by_campaign)
    keys = cell_columns(by_campaign)
    frame = speedup_df
    if status_df is not None and len(status_df):
        frame = frame.merge(status_df, on=keys, how="left", sort=False)
        extra = status_df.merge(speedup_df[keys], on=keys, how="left", indicator=True)
        extra = extra[extra["_merge"] == "left_only"].drop(columns="_merge")
        if len(extra):
            frame = extra if not len(frame) else pd.concat([frame, extra], ignore_index=True)
    rows = [(row, cell_values(row)) for row in frame.to_dict("records")]
    swept = "K" in frame.columns and len(frame) and bool(
        (frame.groupby(prov + ["exp_id"], sort=False, dropna=False)["K"].nunique() > 1).any())
    key_columns = _KEY_SWEPT if swept else _KEY
    always = {"T_group s", "speedup", "95% CI", "baseline"}
    empty = {name for name in _COLUMNS
             if name not in always and all(v[name] in (MISSING, "n/a") for _, v in rows)}
    if all(v["not ok"] == "0" for _, v in rows):
        empty.add("not ok")
    shown = [c for c in _COLUMNS if c not in empty]
    tables = []
    order = list(dict.fromkeys(tuple(str(r.get(k, "")) for k in prov) for r, _ in rows))
    for key in order:
        part = [v for r, v in rows if tuple(str(r.get(k, "")) for k in prov) == key]
        first = next(r for r, _ in rows if tuple(str(r.get(k, "")) for k in prov) == key)
        title = title_prefix + _provenance_title(first, by_campaign)
        # Greedy: as many columns per table as fit in ``width`` (each table repeats _KEY).
        groups: list[list[str]] = [[]]
        for column in shown:
            trial = groups[-1] + [column]
            if width is None or not groups[-1] or _natural_width(
                    _table("", trial, part, key_columns)) <= width:
                groups[-1] = trial
            else:
                groups.append([column])
        for i, columns in enumerate(groups, start=1):
            suffix = f" ({i}/{len(groups)})" if len(groups) > 1 else ""
            tables.append(_table(title + suffix, columns, part, key_columns))
    return tables


def _table(title: str, columns: list[str], rows: list[dict[str, str]],
           key_columns: tuple[str, ...] = _KEY) -> Table:
    names = list(key_columns) + columns
    table = Table(title=title or None, title_justify="left")
    for name in names:
        table.add_column(Text(_HEADERS.get(name, name)),
                         justify="right" if name in _RIGHT else "left",
                         no_wrap=name != "variant" and name != "baseline", overflow="fold")
    for values in rows:
        table.add_row(*(Text(values[c]) for c in names))
    return table
