"""``fugue-tui --batch CAMPAIGN --dry-run``: the plan of a campaign, spending nothing.

A table of the cells (experiment, executor, variant, compile mode, precision, device,
pass, jobs, cell key) and what each would do (run, or skip with a numbered note saying
why), fitted to the console: boxed when it fits, compact when not, cell keys shortened to
their shortest unique prefix when even that is too wide. ``--json``: the plan as a
``fugue-tui/plan`` document (docs/json.md).
"""

from __future__ import annotations

import sys

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from engine.define.matrix import CellSpec
from engine.runner.supervisor import Runner


def _parallel_text(cell: CellSpec) -> str:
    """``max 3``, ``max 3 auto`` (estimated from a profile), ``max 5 all`` ("auto" without
    a profile: every job); "" when nothing limits the cell."""
    if not cell.max_parallel:
        return ""
    how = {"profile": " auto", "profile-share": " auto", "all": " all"}.get(
        cell.max_parallel_method or "", "")
    return f"max {cell.max_parallel}{how}"


def dry_run(runner: Runner, console: Console, path: str, shown: str | None = None,
            as_json: bool = False) -> int:
    """Print the cells, their keys and what would be skipped; spend nothing.

    Why a cell would be skipped is a numbered note under the table (one per distinct
    reason), so the table keeps one line per cell. When the boxed table is wider than the
    console (an 80-column terminal), a compact one is printed instead: no vertical rules,
    two spaces between columns, cell keys shortened to their shortest unique prefix (at
    least 8 hex digits; control commands and resume accept it) when that is not enough,
    and long experiment ids, compile modes and variants folded inside their column."""
    planned = runner.plan()
    if as_json:  # the plan as a fugue-tui/plan document (docs/json.md)
        from fugue_tui.jsonout import document, dump, plan_cells, plan_devices

        several = len(runner.slots) > 1  # optional keys (docs/json.md): several devices
        dump(document("plan", campaign=runner.campaign_id, source=shown or path,
                      runs_dir=str(runner.runs_dir), device=runner.device,
                      **({"devices": plan_devices(runner.slots)} if several else {}),
                      cells=plan_cells(planned, runner.slot_of, len(runner.slots))))
        for line in eager_forecast(planned):  # notes go to stderr (docs/json.md)
            print(f"fugue-tui: {line}", file=sys.stderr)
        return 0
    variants = any(p.cell.scheduler or p.cell.rung or p.cell.max_parallel for p in planned)
    # The precision column only when some cell asks for one: plans without the axis print
    # as they always did.
    precisions = any(p.cell.precision for p in planned)
    # The device column only with several devices (issue 27): where each cell is placed.
    placed = len(runner.slots) > 1
    columns = ["#", "experiment", "executor"] + (["variant"] if variants else []) + [
        "compile"] + (["precision"] if precisions else []) + (["device"] if placed else []) + [
        "pass", "jobs", "cell key", "would"]
    notes: dict[str, list[int]] = {}
    rows = []
    for p in planned:
        c = p.cell
        variant = [" ".join(v for v in (c.scheduler, f"rung {c.rung}" if c.rung else "",
                                        _parallel_text(c))
                            if v)] if variants else []
        would = "run"
        if p.skip:
            notes.setdefault(p.skip, []).append(c.index)
            would = f"skip [{list(notes).index(p.skip) + 1}]"
        precision = ([c.precision or ("amp-fp16 (amp flag)" if any(j["amp"] for j in c.jobs)
                                     else "fp32")] if precisions else [])
        device = [_device_text(runner, c)] if placed else []
        rows.append([str(c.index), c.exp_id, c.executor, *variant, c.compile_mode, *precision,
                     *device, str(c.pass_index), str(len(c.jobs)), c.key, would])
    title = f"{len(planned)} cell{'' if len(planned) == 1 else 's'} of {shown or path}"
    table = _plan_table(title, columns, rows, compact=False)
    compact = False
    if _width(_plan_table(title, columns, _widest(rows), compact)) > console.width:
        table, compact = _plan_table(title, columns, rows, compact=True), True
    if _width(_plan_table(title, columns, _widest(rows), compact),
              "minimum") > console.width:  # too wide even folded: key prefixes
        short = _short_keys([row[-2] for row in rows])
        rows = [row[:-2] + [key, row[-1]] for row, key in zip(rows, short, strict=False)]
        table = _plan_table(title, columns, rows, compact=True)
    console.print(table)
    spec = getattr(runner.campaign, "arrivals", None)
    if spec is not None:  # what the plan screen's preview says under its table
        from engine.define.arrivals import describe

        console.print(Text(describe(spec, runner.campaign.seed)))
    for i, (reason, cells) in enumerate(notes.items(), 1):
        which = f"cell {cells[0]}" if len(cells) == 1 else f"cells {_ranges(cells)}"
        console.print(Text(f"[{i}] skip {which}: {reason}"))
    for line in eager_forecast(planned):
        console.print(Text(line))
    return 0


def eager_forecast(planned) -> list[str]:
    """One line per unified_model cell (of those that would run) with buckets of one
    member, which run eager whatever the verification says (nothing to stack): the
    ``eager_buckets`` its row will show, known before training (issue 45). Cells with the
    same forecast share a line. Whether a bucket of several members stacks is only known
    when the cell runs. A stream cell has none: its buckets depend on when its jobs arrive
    (the forecast said 1 of 3 where 10 of 10 ran eager)."""
    from engine.executors.unified.plan import planned_singles

    forecast: dict[tuple[int, int], list[int]] = {}
    for p in planned:
        if (p.skip or p.cell.executor != "unified_model" or not p.cell.jobs
                or getattr(p.cell, "stream", None)):
            continue
        singles, total = planned_singles(p.cell.jobs, p.cell.max_parallel)
        if singles:
            forecast.setdefault((singles, total), []).append(p.cell.index)
    out = []
    for (singles, total), cells in forecast.items():
        which = f"cell {cells[0]}" if len(cells) == 1 else f"cells {_ranges(cells)}"
        out.append(f"note: unified_model {which}: {singles} of {total} bucket"
                   f"{'s' if total != 1 else ''} will run eager (one member, nothing to "
                   f"stack; eager_buckets {singles}/{total})")
    return out


def _device_text(runner: Runner, cell: CellSpec) -> str:
    """``2 cuda:1``: the device a cell is placed on (its number in ``devices``, as written)."""
    slot = runner.slot_of(cell)
    return f"{slot.index + 1} {slot.gpu.get('entry') or slot.uuid}" if slot else ""


#: Columns that stay on one line in the compact plan table (the rest fold).
_PLAN_NO_WRAP = {"#", "executor", "pass", "jobs", "cell key", "would"}
#: Shorter headers for the compact plan table.
_PLAN_SHORT = {"experiment": "exp", "cell key": "key"}


def _plan_table(title: str, columns: list[str], rows: list[list[str]], compact: bool) -> Table:
    if compact:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False, collapse_padding=True, padding=(0, 1))
    else:
        table = Table(title=title, title_justify="left")
    for column in columns:
        if compact:
            header = _PLAN_SHORT.get(column, column)
            table.add_column(header, overflow="fold", no_wrap=column in _PLAN_NO_WRAP,
                             min_width=None if column in _PLAN_NO_WRAP else len(header))
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(value) for value in row))
    return table


def _short_keys(keys: list[str], least: int = 8) -> list[str]:
    """Each key cut to the shortest prefix (>= ``least`` characters) that no other key of
    the plan shares."""
    # In sorted order a key shares its longest prefix with a neighbour: O(n log n), where
    # comparing every pair took minutes on a plan of thousands of cells.
    order = sorted(set(keys))
    need = {}
    for i, key in enumerate(order):
        common = max((_common_prefix(key, order[j]) for j in (i - 1, i + 1)
                      if 0 <= j < len(order)), default=0)
        need[key] = key[:min(len(key), max(least, common + 1))]
    return [need[key] for key in keys]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _widest(rows: list[list[str]]) -> list[list[str]]:
    """The rows that decide a plan table's widths: per column, the one with the longest
    value and the one with the longest word (what a folded column cannot go below). Rich
    measures every cell of a table; on a plan of 10,000 cells that took seconds."""
    if not rows:
        return rows
    chosen: dict[int, list[str]] = {}
    for c in range(len(rows[0])):
        for size in (lambda v: cell_len(v),
                     lambda v: max((cell_len(w) for w in v.split()), default=0)):
            row = max(rows, key=lambda r: size(r[c]))
            chosen[id(row)] = row
    return list(chosen.values())


def _width(table: Table, which: str = "maximum") -> int:
    """The width ``table`` takes when nothing has to wrap (``maximum``), or folded as far as
    its columns allow (``minimum``)."""
    probe = Console(width=100_000, color_system=None)
    return getattr(Measurement.get(probe, probe.options, table), which)


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` → ``"1-3, 7, 9-10"``."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)


