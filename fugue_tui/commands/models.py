"""``fugue-tui models RUN_FOLDER [--json]``: the trained models a run folder (or one cell's
attempt) kept (issue 50, ``save_models``), read from the JSON beside each weights file
(:mod:`engine.models.listing`) without importing torch."""

from __future__ import annotations

import argparse
from typing import Any

#: How many hex digits of a digest the table shows (``--json`` has all 64).
SHORT_DIGEST = 12


def add_parser(sub) -> None:
    models = sub.add_parser(
        "models", help="list the trained models a run folder kept (save_models)",
        description="The trained models a campaign kept (save_models = true or \"best\"): "
                    "per saved job its cell, job id, executor, metric, weights digest "
                    "(sha256, shortened) and file size, read from the JSON beside each "
                    "weights file. RUN_FOLDER is runs/<campaign>, one of its cell folders or "
                    "one attempt folder. Load one in Python with engine.models.load(PATH). "
                    "Exit 0 (also when none were kept: one line says so, naming the cells "
                    "that ran without saving); 2 when the folder is none of these.")
    from fugue_tui.commands.arguments import path_text

    models.add_argument("folder", metavar="RUN_FOLDER", type=path_text,
                        help="runs/<campaign>, a cell folder or an attempt folder")
    models.add_argument("--json", action="store_true", dest="json_sub",
                        help="the listing as JSON (schema fugue-tui/models, docs/json.md)")


def _row(model: Any) -> dict[str, Any]:
    metric = model.metric
    return {"cell": model.cell, "attempt": model.attempt, "job_id": model.job_id,
            "executor": model.executor, "model": model.meta.get("model"),
            "metric": metric[0] if metric else None, "value": metric[1] if metric else None,
            "weights_sha256": model.digest, "size_bytes": model.size,
            "path": str(model.weights), "meta": model.meta}


def run(args: argparse.Namespace) -> int:
    """List the models (exit 0), or say in one line that there are none (exit 0)."""
    from engine.models.listing import cells_without_models, human_size, scan

    cells = scan(args.folder)  # ConfigError: exit 2
    models = [m for c in cells for m in c.models]
    without = cells_without_models(cells)
    problems = [p for c in cells for p in c.problems]
    if args.json_sub:
        from fugue_tui.jsonout import document, dump

        dump(document("models", folder=str(args.folder), models=[_row(m) for m in models],
                      cells_without_models=without, problems=problems))
        return 0
    if not models:
        named = f": {', '.join(without)}" if without else ""
        print(f"no saved models in {args.folder}; {len(without)} "
              f"cell{'s' if len(without) != 1 else ''} ran without saving{named} "
              "(save_models = true or \"best\", or run --save-models, keeps them)")
        for line in problems:
            print(line)
        return 0
    rows = [(m.cell, m.attempt, [m.job_id, m.executor or "—",
                                 f"{m.metric[0]} {m.metric[1]:.4f}" if m.metric else "—",
                                 (m.digest or "—")[:SHORT_DIGEST], human_size(m.size)])
            for m in models]
    header = ["job", "executor", "metric", "digest", "size"]
    widths = [max(len(r[i]) for r in [header, *(row for _, _, row in rows)])
              for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    print(line(header))
    shown = None
    for cell, attempt, row in rows:
        # one heading per cell (and attempt, when it was retried): its folder's name
        if (cell, attempt) != shown:
            shown = (cell, attempt)
            print(cell + (f" (attempt {attempt})" if attempt > 1 else ""))
        print(line(row))
    if without:
        print(f"{len(without)} cell{'s' if len(without) != 1 else ''} without saved models: "
              f"{', '.join(without)}")
    for text in problems:
        print(text)
    return 0
