"""Ad-hoc experiments: ``fugue-tui run --model M --dataset D ...`` described on the command
line, turned into an experiments-file table that merges over the catalogue exactly like a
user's file (the campaign's ``experiments_file``), so every check is the catalogue's own:
unknown keys, search-space keys that are not job fields (with the nearest name), counts,
types. Torch-free.

::

    table = adhoc_table(models=["mlp"], datasets=["wine"], type="cv", k=3, epochs=1)
    doc = experiments_document("adhoc", table, user_file=None)   # {"experiments": {...}}

Defaults where a flag is absent: type ``ensemble`` (``hpo`` when a search space is given,
``multi_model`` when several models or datasets are), ``k`` 5, ``batch_size`` 64,
``epochs`` 10, ``lr`` 0.001 and the catalogue's own defaults for the rest (optimizer adamw,
the dataset's task). ``multi_model`` pairs ``models[i]`` with ``datasets[i]``; a single
model or dataset is paired with every entry of the other list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.define import tomlfile
from engine.define.catalogue import user_catalogue_path
from engine.define.paths import NAME_RULE, is_safe_name
from engine.errors import ConfigError

#: Hyperparameters an ad-hoc experiment gets when the command line gives none (the search
#: space may still sweep them).
ADHOC_DEFAULTS: dict[str, Any] = {"k": 5, "batch_size": 64, "epochs": 10, "lr": 0.001}
DEFAULT_NAME = "adhoc"


def parse_value(text: str) -> int | float | bool | str:
    """``"64"`` → 64, ``"0.1"``/``"1e-3"`` → float, ``"true"``/``"false"`` → bool, else the
    string itself (a model, dataset or optimizer name)."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(text.strip())
        except ValueError:
            pass
    return text.strip()


def parse_search_space(items: list[str], flag: str = "--search-space") -> dict[str, Any]:
    """``["lr=loguniform:1e-4:1e-1", "batch_size=64,128"]`` → ``{"lr": {"loguniform":
    [1e-4, 1e-1]}, "batch_size": [64, 128]}``, keys in the order given: ``KEY=V1,V2,...`` is
    a grid axis, ``KEY=DIST:ARGS`` a sampled one (``loguniform:LO:HI``, ``uniform:LO:HI``,
    ``randint:LO:HI``, ``choice:V1,V2,...``), the experiments file's table form. Whether a
    key is a job field, and the distribution's bounds, are the catalogue's checks.

    Raises:
        ConfigError: an item without ``key=values``, an empty value, a key given twice, an
            unknown distribution (with the nearest), a range without two bounds.
    """
    from engine.define.search_space import DISTRIBUTIONS
    from engine.errors import nearest

    space: dict[str, Any] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag}: expected KEY=V1,V2,... or KEY=DIST:ARGS (e.g. "
                              f"lr=0.1,0.01 or lr=loguniform:1e-4:1e-1), got {item!r}")
        dist, colon, args = values.partition(":")
        sampled = bool(colon) and dist.strip().isidentifier()
        if key in space:
            grid_then = not isinstance(space[key], dict)
            both = (": it is both gridded and sampled; keep one axis" if grid_then == sampled
                    else "")
            raise ConfigError(f"{flag}: key '{key}' given twice{both}")
        if sampled:
            dist = dist.strip()
            if dist not in DISTRIBUTIONS:
                raise ConfigError(f"{flag}: '{key}': unknown distribution '{dist}'"
                                  f"{nearest(dist, DISTRIBUTIONS)}; known: "
                                  f"{', '.join(DISTRIBUTIONS)}")
            parts = args.split(",") if dist == "choice" else args.split(":")
            if any(not p.strip() for p in parts) or (dist != "choice" and len(parts) != 2):
                example = "choice:V1,V2" if dist == "choice" else f"{dist}:LO:HI"
                raise ConfigError(f"{flag}: '{key}': expected {example}, got {item!r}")
            space[key] = {dist: [parse_value(p) for p in parts]}
            continue
        parts = [v for v in values.split(",")]
        if not values.strip() or any(not v.strip() for v in parts):
            raise ConfigError(f"{flag}: '{key}' needs comma-separated values, got {item!r}")
        space[key] = [parse_value(v) for v in parts]
    return space


def adhoc_table(*, models: list[str], datasets: list[str], type: str | None = None,
                k: int | None = None, task: str | None = None, epochs: int | None = None,
                batch_size: int | None = None, lr: float | None = None,
                optimizer: str | None = None, search_space: dict[str, Any] | None = None,
                num_samples: int | None = None, description: str = "") -> dict[str, Any]:
    """An experiments-file table for one ad-hoc experiment (see the module docstring).

    Raises:
        ConfigError: no model or dataset, several of them outside multi_model, lists of
            different lengths, ``k`` with multi_model or hpo. (Everything else — names,
            types, counts, search-space keys — is checked by the catalogue when the table
            is merged.)
    """
    if not models or not datasets:
        missing = "--model" if not models else "--dataset"
        raise ConfigError(f"an ad-hoc experiment needs {missing} (give --model M --dataset D, "
                          f"or --exp SELECTOR for catalogue experiments)")
    if type is None:
        type = ("multi_model" if len(models) > 1 or len(datasets) > 1
                else "hpo" if search_space else "ensemble")
    table: dict[str, Any] = {"type": type, "family": "adhoc",
                             "description": description or "ad-hoc experiment (fugue-tui run)"}
    common = {"task": task, "optimizer": optimizer,
              "batch_size": batch_size if batch_size is not None else ADHOC_DEFAULTS["batch_size"],
              "epochs": epochs if epochs is not None else ADHOC_DEFAULTS["epochs"],
              "lr": lr if lr is not None else ADHOC_DEFAULTS["lr"]}
    if type == "multi_model":
        if k is not None:
            raise ConfigError("--k does not apply to --type multi_model (K is the number of "
                              "--model/--dataset pairs)")
        if search_space or num_samples is not None:
            raise ConfigError("--search-space and --num-samples only apply to --type hpo")
        if len(models) != len(datasets) and 1 not in (len(models), len(datasets)):
            raise ConfigError(f"--type multi_model pairs --model and --dataset by position: got "
                              f"{len(models)} models and {len(datasets)} datasets")
        n = max(len(models), len(datasets))
        pairs = zip(models * n if len(models) == 1 else models,
                    datasets * n if len(datasets) == 1 else datasets, strict=False)
        table["members"] = [{"model": m, "dataset": d} for m, d in pairs]
    else:
        for flag, values in (("--model", models), ("--dataset", datasets)):
            if len(values) > 1:
                raise ConfigError(f"several {flag} values only apply to --type multi_model "
                                  f"(got {type}: {' '.join(values)})")
        table["model"], table["dataset"] = models[0], datasets[0]
        if type == "hpo":
            if k is not None:
                raise ConfigError("--k does not apply to --type hpo (K is the size of the "
                                  "--search-space grid)")
            if not search_space:
                raise ConfigError("--type hpo needs --search-space KEY=V1,V2 ... "
                                  "(e.g. lr=0.1,0.01 batch_size=64,128)")
            table["search_space"] = dict(search_space)
            if num_samples is not None:
                table["num_samples"] = num_samples
            for key in search_space:  # a swept field needs no fixed value
                if key in common and {"batch_size": batch_size, "epochs": epochs,
                                      "lr": lr}.get(key) is None:
                    common[key] = None
        else:
            if search_space or num_samples is not None:
                raise ConfigError("--search-space and --num-samples only apply to --type hpo")
            table["k"] = k if k is not None else ADHOC_DEFAULTS["k"]
    table.update({key: value for key, value in common.items() if value is not None})
    return table


def check_name(name: str, taken: list[str]) -> None:
    """An ad-hoc id is a safe name (:data:`engine.define.paths.NAME_RULE`, as every
    experiment id) that no catalogue experiment uses.

    Raises:
        ConfigError: bad characters, or an id the catalogue (or the user's file) holds: an
            experiments file with that id would override the catalogue's experiment key by key.
    """
    if not is_safe_name(name):  # the rule of every experiment id: it names cell folders
        raise ConfigError(f"--name must be {NAME_RULE} (it names the cells' folders), "
                          f"got {name!r}")
    if name in taken:
        raise ConfigError(f"--name '{name}' is a catalogue experiment; pick another name for an "
                          f"ad-hoc one (or run it with --exp {name})")


def experiments_document(exp_id: str, table: dict[str, Any],
                         user_file: str | Path | None = None) -> dict[str, Any]:
    """The experiments file to merge over the built-in catalogue: the user's own file's
    tables (``user_file``, else ``$FUGUE_REGISTRY_DIR/experiments.toml``), since a campaign
    names one experiments file, then the ad-hoc table under ``exp_id``.

    Raises:
        ConfigError: the user's file cannot be read or is malformed.
    """
    tables: dict[str, Any] = {}
    path = user_catalogue_path(user_file)
    if path is not None:
        doc = tomlfile.load(path, kind="experiments file")
        tomlfile.check_keys(doc, {"experiments": (dict,)}, str(path))
        tables.update(doc.get("experiments", {}))
    tables[exp_id] = table
    return {"experiments": tables}
