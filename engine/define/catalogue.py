"""The experiment catalogue: ``experiments.toml`` merged with a user's file, and the
harness's selection syntax (``E01``, ``1``, ``E08:E10``, ``E08:``, ``:E05``, ``1,4,5``, ``all``).

An experiment is a workload declaration; ``engine.define.workloads`` expands it into jobs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from engine.define import tomlfile
from engine.define.comma import comma_parts

# Experiment is re-exported: `catalogue.Experiment` is where readers look for it.
from engine.define.experiment import (  # noqa: F401
    ALIASES,
    DEFAULTS,
    EXPERIMENT_KEYS,
    Experiment,
    check_counts,
    check_job_count,
)
from engine.define.paths import check_experiment_id
from engine.define.workloads import WORKLOADS
from engine.errors import ConfigError, known, nearest, quoted
from engine.precision import check_value
from engine.results.paths import path_text_problem, shown_path


def _catalogue_path() -> Path:
    """The built-in catalogue: inside the installed package, else at the repository root."""
    packaged = resources.files("engine").joinpath("experiments.toml")
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "experiments.toml"


def experiment_problems(table: dict[str, Any], where: str) -> list[str]:
    """Every unknown key, wrong type and a missing or unknown ``type`` of one experiment
    table, each as ``<where>: <problem>`` (all of them, not the first: the loader reports
    a file's problems at once)."""
    out = [f"{where}: {problem}"
           for _, problem in tomlfile.key_problems(table, EXPERIMENT_KEYS, ALIASES)]
    wtype = {**DEFAULTS, **table}.get("type")
    types = WORKLOADS.names()
    if wtype is None:
        out.append(f"{where}: missing key 'type' (one of {', '.join(types)})")
    elif isinstance(wtype, str) and wtype not in WORKLOADS:
        out.append(f"{where}: key 'type' must be one of {', '.join(types)}, got {wtype!r}"
                   f"{nearest(wtype, types)}")
    return out


def _name_problems(table: dict[str, Any], user_keys: frozenset[str], where: str) -> list[str]:
    """The model, dataset, task and optimizer names a user's file wrote at the top level of
    an experiment that has other problems and that no registry knows (the message of
    :func:`engine.define.validate.check_user_names`, which checks an experiment that loads;
    plugins are loaded before the catalogue, so the registries are complete)."""
    from engine.define.validate import check_user_name

    out = []
    for key in ("model", "dataset", "task", "optimizer"):
        if key in user_keys and isinstance(table.get(key), str):
            try:
                check_user_name(key, table[key], where)
            except ConfigError as exc:
                out.append(str(exc))
    return out


def _joined(problems: list[str]) -> str:
    """Several problems as one line: the file named once when they share it."""
    if len(problems) == 1:
        return problems[0]
    files = {p.split(": ", 1)[0] for p in problems}
    if len(files) == 1 and all(": " in p for p in problems):
        return (f"{files.pop()}: {len(problems)} problems: "
                + "; ".join(p.split(": ", 1)[1] for p in problems))
    return f"{len(problems)} problems: " + "; ".join(problems)


def _parse_experiment(exp_id: str, table: dict[str, Any], where: str,
                      user_keys: frozenset[str] = frozenset()) -> Experiment:
    problems = experiment_problems(table, where)
    if problems:
        raise ConfigError(problems[0])
    values = {**DEFAULTS, **table}
    wtype = values.get("type")
    if not isinstance(wtype, str) or wtype not in WORKLOADS:
        types = WORKLOADS.names()
        raise ConfigError(f"{where}: key 'type' must be one of {', '.join(types)}, "
                          f"got {wtype!r}{nearest(str(wtype), types)}")
    # Task names are checked against the task registry when availability is computed:
    # a plugin may register more (E17's language modelling), so the parser cannot know them.
    # Each workload type checks the keys that are its own (k, search_space, members).
    k, members = WORKLOADS.get(wtype).parse(values, table, where)
    # A plugin type's parse derives K its own way: bounded here before anything expands.
    check_job_count(k, where, f"it expands into {k} jobs")
    check_counts(values, where)  # every job field finite and in range (engine.bounds)
    precision = table.get("precision")
    # Both keys in the same table is an error; a user's override of a built-in amp = true
    # experiment with precision = "bf16" is not (its own keys are user_keys).
    own = user_keys or frozenset(table)
    if precision is not None:
        if "amp" in own:
            raise ConfigError(f"{where}: keys 'amp' and 'precision' are both set; keep one "
                              "('amp = true' means precision = \"amp-fp16\")")
        check_value(precision, where)
    save_models = table.get("save_models")
    if save_models is not None:
        from engine.define.save_models import parse_save_models

        save_models = parse_save_models(save_models, where)
    return Experiment(
        id=exp_id, type=wtype, k=k, model=values.get("model"), dataset=values.get("dataset"),
        task=values["task"], batch_size=values.get("batch_size"), epochs=values.get("epochs"),
        lr=float(values["lr"]) if values.get("lr") is not None else None,
        optimizer=values["optimizer"], optimizer_kwargs=dict(values["optimizer_kwargs"]),
        amp=values["amp"], model_kwargs=dict(values["model_kwargs"]),
        search_space=dict(values.get("search_space") or {}), members=tuple(members),
        family=values["family"], size=values["size"], description=values["description"],
        val_fraction=float(values["val_fraction"]), split_seed=values["split_seed"],
        precision=precision,
        source=where.split(":")[0], user_keys=user_keys, num_samples=values.get("num_samples"),
        save_models=save_models,
    )


@dataclass
class Catalogue:
    """Experiments in catalogue order (built-ins first, then a user's new ids)."""

    experiments: dict[str, Experiment]
    sources: list[Path]

    def get(self, exp_id: str) -> Experiment:
        try:
            return self.experiments[exp_id]
        except KeyError:
            raise ConfigError(f"unknown experiment {quoted(exp_id)}{nearest(exp_id, self.experiments)}; "
                              f"{known(self.experiments)}") from None

    def ids(self) -> list[str]:
        return list(self.experiments)

    def select(self, selector: str | list[str] | int, where: str = "experiments") -> list[str]:
        """Resolve the seed's selection syntax to experiment ids, in the order asked.

        ``"E01"``, ``"1"`` (→ ``E01``), inclusive ranges over catalogue order
        (``"E08:E10"``, ``"E08:"``, ``":E05"``), comma lists, ``"all"``; a list of such
        strings is the union. Duplicates drop, first occurrence wins.

        Raises:
            ConfigError: unknown id (with the nearest) or an empty range.
        """
        parts: list[str] = []
        items = selector if isinstance(selector, list) else [selector]
        for item in items:
            if not isinstance(item, (str, int)) or isinstance(item, bool):
                raise ConfigError(f"{where}: selector must be a string or a list of strings, "
                                  f"got {item!r}")
            parts.extend(comma_parts(str(item), where))
        if not parts:
            raise ConfigError(f"{where}: empty experiment selection")
        order = self.ids()
        chosen: list[str] = []
        for part in parts:
            if part == "all":
                found = order
            elif ":" in part:
                lo, hi = part.split(":", 1)
                start = order.index(self._resolve(lo, where)) if lo.strip() else 0
                stop = order.index(self._resolve(hi, where)) if hi.strip() else len(order) - 1
                found = order[start:stop + 1]
                if not found:
                    raise ConfigError(f"{where}: range {quoted(part)} selects no experiment")
            else:
                found = [self._resolve(part, where)]
            chosen.extend(e for e in found if e not in chosen)
        return chosen

    def _resolve(self, token: str, where: str) -> str:
        token = token.strip()
        # ASCII decimal only: str.isdigit() accepts "²" (int() then raises) and "١" (an
        # Arabic-Indic 1, which would silently select E01)
        if token.isascii() and token.isdigit():
            token = f"E{int(token):02d}"
        if token not in self.experiments:
            raise ConfigError(f"{where}: unknown experiment {quoted(token)}"
                              f"{nearest(token, self.experiments)}; {known(self.experiments)}")
        return token


def _read(path: Path) -> dict[str, dict[str, Any]]:
    doc = tomlfile.load(path, kind="experiments file")
    tomlfile.check_keys(doc, {"experiments": (dict,)}, str(path))
    tables = doc.get("experiments", {})
    for exp_id, table in tables.items():
        check_experiment_id(exp_id, str(path))  # it names cell folders: one safe component
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: experiments.{exp_id} must be a table")
    return tables


def user_catalogue_path(explicit: str | Path | None = None) -> Path | None:
    """The user's experiments file: ``explicit``, else ``$FUGUE_REGISTRY_DIR/experiments.toml``
    (it must exist), else the default one, ``<config dir>/experiments.toml``
    (:func:`engine.dirs.default_experiments_file`: ``$FUGUE_CONFIG_DIR``, or
    ``~/.config/fugue-tui`` on Linux) when it exists."""
    from engine.dirs import default_experiments_file

    if explicit:
        return Path(explicit)
    reg = os.environ.get("FUGUE_REGISTRY_DIR")
    if reg:
        problem = path_text_problem(reg)  # the one rule of every path a user gives
        if problem is not None:
            raise ConfigError(f"FUGUE_REGISTRY_DIR: {shown_path(reg)} {problem}")
        path = Path(reg) / "experiments.toml"
        if not os.path.exists(path):  # a FIFO, a device: tomlfile.load says what it is
            raise ConfigError(f"FUGUE_REGISTRY_DIR={reg}: no experiments.toml there")
        return path
    default = default_experiments_file()
    problem = path_text_problem(default)
    if problem is not None:
        raise ConfigError(f"the config folder {shown_path(str(default.parent))} {problem} "
                          f"(FUGUE_CONFIG_DIR, else XDG_CONFIG_HOME or HOME)")
    return default if os.path.exists(default) else None


def load_catalogue(user_file: str | Path | None = None) -> Catalogue:
    """Load the built-in catalogue and merge a user's file over it.

    A user's table with an existing id overrides that experiment key by key (the merged
    table is validated as a whole); a new id is appended in file order.

    Raises:
        ConfigError: unreadable or malformed file, unknown key, wrong type.
    """
    base_path = _catalogue_path()
    #: id -> (its table, the file it came from, the keys the user's file set)
    tables: dict[str, tuple[dict[str, Any], str, frozenset[str]]] = {
        k: (dict(v), str(base_path), frozenset()) for k, v in _read(base_path).items()}
    sources = [base_path]
    extra = user_catalogue_path(user_file)
    if extra is not None:
        sources.append(extra)
        for exp_id, table in _read(extra).items():
            merged = {**tables[exp_id][0], **table} if exp_id in tables else dict(table)
            tables[exp_id] = (merged, str(extra), frozenset(table))
    # Every experiment is checked before one is refused, so that a file's problems come
    # in one line, not one run at a time (a missing key, then after the fix the next one).
    experiments: dict[str, Experiment] = {}
    problems: list[str] = []
    for exp_id, (table, src, user_keys) in tables.items():
        where = f"{src}: experiments.{exp_id}"
        found = experiment_problems(table, where)
        if not found:
            try:
                experiments[exp_id] = _parse_experiment(exp_id, table, where, user_keys)
            except ConfigError as exc:
                found.append(str(exc))
        if found:  # with the names the user's file wrote that nothing registers
            problems.extend(found + _name_problems(table, user_keys, where))
    if problems:
        raise ConfigError(_joined(problems))
    return Catalogue(experiments, sources)
