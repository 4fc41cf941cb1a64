"""A campaign's ``[options.<executor>]`` tables: each checked against its executor's
declared options (``engine.define.executor_options``) and its executor's own campaign-time
check, and the settings that run but do not do what they seem to. Torch-free; part of
:func:`engine.define.campaign.parse_campaign`."""

from __future__ import annotations

from typing import Any

from engine.define.campaign_schema import check_entries
from engine.define.executor_options import check_table
from engine.define.experiment import Experiment
from engine.errors import ConfigError, known, nearest
from engine.registry import EXECUTORS


def check_options(options: dict[str, Any], executors: list[str], exps: list[Experiment],
                  where: str) -> dict[str, dict[str, Any]]:
    """``[options.<executor>]``: each table checked against its executor's declared options,
    then each executor's own campaign-time check (ray: is the cluster reachable). Returns
    ``options`` as given.

    Raises:
        ConfigError: one line, ``"<where>: options.<executor>: key '<key>' ..."``.
    """
    for executor, table in options.items():
        check_options_table(executor, table, where)
    for executor in dict.fromkeys(executors):
        # An executor's own campaign-time check (ray: is the cluster address reachable),
        # named by its declaration so that definitions never import an executor's code.
        found = EXECUTORS.get(executor).check_options(options.get(executor, {}))
        if found:
            key, reason = found
            raise ConfigError(f"{where}: options.{executor}: key '{key}': {reason}")
    packed_hpo = [e.id for e in exps if e.type == "hpo"]
    if ("ray" in executors and packed_hpo
            and (options.get("ray") or {}).get("devices") is not None):
        # ray's packing places actor pools; Ray Tune places hpo's trials itself.
        raise ConfigError(f"{where}: options.ray: key 'devices': packs ray's actor pools, "
                          f"not the Tune trials of hpo experiment '{packed_hpo[0]}' (use mp "
                          "for it, or leave devices out)")
    return options


def check_options_table(executor: str, table: Any, where: str) -> None:
    """One ``[options.<executor>]`` table: a registered executor, a table, no option the
    executor does not run with (said in its words), then its declared options."""
    if executor not in EXECUTORS:
        raise ConfigError(f"{where}: options.{executor}: unknown executor"
                          f"{nearest(executor, EXECUTORS.names())}; {known(EXECUTORS.names())}")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: options.{executor} must be a table")
    declared = EXECUTORS.get(executor).option_fields
    if "max_parallel" in table and "max_parallel" not in declared:
        # seq's answer is always 1: "auto" (or a number) has nothing to decide there.
        raise ConfigError(f"{where}: options.{executor}: key 'max_parallel': executor "
                          f"'{executor}' runs one job at a time; max_parallel (a number "
                          "or \"auto\") applies to executors that run jobs concurrently")
    for packing_key in ("devices", "jobs_per_device"):
        if packing_key in table and packing_key not in declared:
            # Packing pins mp's worker processes to GPUs (engine.executors.packing).
            how = ("trains in the cell's one process on its one device"
                   if executor in ("seq", "unified_model")
                   else "does not pack jobs onto several GPUs (not built for it)")
            raise ConfigError(f"{where}: options.{executor}: key '{packing_key}': "
                              f"executor '{executor}' {how}; devices (packing jobs onto "
                              "several GPUs) applies to mp")
    check_table(declared, table, f"{where}: options.{executor}")
    for key, value in table.items():
        # an axis runs one cell per entry: an entry twice would run a cell twice, one key
        if isinstance(value, list) and declared[key].axis:
            check_entries(value, f"{where}: options.{executor}", key)


def axis_warnings(options: dict[str, dict[str, Any]], executors: list[str],
                   experiments: list[Any]) -> list[str]:
    """Settings that will not do what they seem to (run anyway, once, and say so)."""
    out = []
    ray_opts = options.get("ray", {})
    if "scheduler" in ray_opts:
        if "ray" not in executors:
            out.append("options.ray.scheduler is set but executor 'ray' is not in this "
                       "campaign: no scheduler runs")
        elif not any(e.type == "hpo" for e in experiments):
            out.append("options.ray.scheduler applies to hpo experiments only; none is "
                       "selected, so ray runs each experiment once without a scheduler")
    if "sweep" in options.get("unified_model", {}) and "unified_model" not in executors:
        out.append("options.unified_model.sweep is set but executor 'unified_model' is not in "
                   "this campaign")
    return out
