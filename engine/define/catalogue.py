"""The experiment catalogue: ``experiments.toml`` merged with a user's file, and the
harness's selection syntax (``E01``, ``1``, ``E08:E10``, ``E08:``, ``:E05``, ``1,4,5``, ``all``).

An experiment is a workload declaration; ``engine.define.workloads`` expands it into jobs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from engine.define import tomlfile
from engine.errors import ConfigError, known, nearest

WORKLOAD_TYPES = ("ensemble", "cv", "hpo", "multi_model")

#: Per-job hyperparameters: what an hpo search space and a multi_model member may set.
JOB_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,), "dataset": (str,), "task": (str,), "batch_size": (int,),
    "epochs": (int,), "lr": (float,), "optimizer": (str,), "optimizer_kwargs": (dict,),
    "amp": (bool,), "model_kwargs": (dict,),
}
#: Optimizer keyword arguments that an hpo search space may sweep directly (``momentum = [...]``).
OPTIMIZER_KWARGS: dict[str, tuple[type, ...]] = {
    "momentum": (float,), "weight_decay": (float,), "dampening": (float,), "eps": (float,),
    "betas": (list,), "nesterov": (bool,), "amsgrad": (bool,),
}
_EXPERIMENT_KEYS: dict[str, tuple[type, ...]] = {
    **JOB_FIELDS, "type": (str,), "family": (str,), "k": (int,), "size": (str,),
    "search_space": (dict,), "members": (list,), "description": (str,),
    "val_fraction": (float,), "split_seed": (int,),
}
#: Other spellings of job fields, suggested for an unknown key (difflib finds none of these).
_ALIASES: dict[str, str] = {
    "learning_rate": "lr", "learningrate": "lr", "learning-rate": "lr", "batch": "batch_size",
    "batchsize": "batch_size", "bs": "batch_size", "epoch": "epochs", "num_epochs": "epochs",
    "n_epochs": "epochs", "optim": "optimizer", "folds": "k", "n_jobs": "k",
}
_DEFAULTS: dict[str, Any] = {
    "task": None, "optimizer": "adamw", "optimizer_kwargs": {}, "amp": False,
    "model_kwargs": {}, "family": "", "size": "", "description": "",
    "val_fraction": 0.2, "split_seed": 0,
}


@dataclass(frozen=True)
class Experiment:
    """One catalogue entry.

    ``k`` is the number of jobs: members of an ensemble, folds of a cv, points of an hpo
    grid (derived) or entries of a multi_model (derived). ``search_space`` keeps the order
    written in the file: hpo points are the Cartesian product in that key order.
    ``split_seed`` draws validation holdouts and cv folds, independent of job seeds.
    """

    id: str
    type: str
    k: int
    model: str | None = None
    dataset: str | None = None
    task: str | None = None
    batch_size: int | None = None
    epochs: int | None = None
    lr: float | None = None
    optimizer: str = "adamw"
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    amp: bool = False
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    search_space: dict[str, list[Any]] = field(default_factory=dict)
    members: tuple[dict[str, Any], ...] = ()
    family: str = ""
    size: str = ""
    description: str = ""
    val_fraction: float = 0.2
    split_seed: int = 0
    source: str = ""

    def models(self) -> list[str]:
        return [m["model"] for m in self.members] if self.members else [str(self.model)]

    def datasets(self) -> list[str]:
        return [m["dataset"] for m in self.members] if self.members else [str(self.dataset)]

    def to_dict(self) -> dict[str, Any]:
        """The resolved definition (JSON-able), as written into cell specs and hashed into keys."""
        out = {k: v for k, v in self.__dict__.items() if k != "source"}
        out["members"] = [dict(m) for m in self.members]
        return out


def _catalogue_path() -> Path:
    """The built-in catalogue: inside the installed package, else at the repository root."""
    packaged = resources.files("engine").joinpath("experiments.toml")
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "experiments.toml"


def _parse_experiment(exp_id: str, table: dict[str, Any], where: str) -> Experiment:
    tomlfile.check_keys(table, _EXPERIMENT_KEYS, where, _ALIASES)
    values = {**_DEFAULTS, **table}
    wtype = values.get("type")
    from engine.define.workloads import WORKLOADS  # the registry: built-ins and plugins' types

    if wtype not in WORKLOADS:
        types = WORKLOADS.names()
        raise ConfigError(f"{where}: key 'type' must be one of {', '.join(types)}, "
                          f"got {wtype!r}{nearest(str(wtype), types)}")
    # Task names are checked against the task registry when availability is computed:
    # a plugin may register more (E17's language modelling), so the parser cannot know them.
    members: list[dict[str, Any]] = []
    if wtype == "multi_model":
        if not values.get("members"):
            raise ConfigError(f"{where}: a multi_model experiment needs a non-empty 'members' list")
        for i, member in enumerate(values["members"]):
            mwhere = f"{where}.members[{i}]"
            if not isinstance(member, dict):
                raise ConfigError(f"{mwhere}: must be a table")
            tomlfile.check_keys(member, JOB_FIELDS, mwhere, _ALIASES)
            merged = {key: values.get(key) for key in JOB_FIELDS} | member
            for need in ("model", "dataset", "batch_size", "epochs", "lr"):
                if merged.get(need) is None:
                    raise ConfigError(f"{mwhere}: missing key '{need}'")
            _check_counts(merged, mwhere)
            members.append(merged)
        k = len(members)
        # A top-level job field is the members' default; when every member sets its own it
        # would be silently ignored (a user's "[experiments.D_mm] epochs = 2" did nothing).
        for key in JOB_FIELDS:
            if key in table and all(isinstance(m, dict) and key in m for m in values["members"]):
                raise ConfigError(f"{where}: key '{key}' has no effect: every member of this "
                                  f"multi_model experiment sets its own {key} (set it in "
                                  f"members[i] instead, or remove it there)")
        if "k" in table:
            raise ConfigError(f"{where}: key 'k' does not apply to multi_model (K is the number "
                              f"of members)")
    else:
        for need in ("model", "dataset"):
            if not values.get(need):
                raise ConfigError(f"{where}: missing key '{need}'")
        space = values.get("search_space") or {}
        if wtype == "hpo":
            if not space:
                raise ConfigError(f"{where}: an hpo experiment needs a non-empty 'search_space'")
            if "k" in table:
                raise ConfigError(f"{where}: key 'k' does not apply to hpo (K is the size of "
                                  f"the search_space grid)")
            k = 1
            for key, options in space.items():
                if key not in JOB_FIELDS and key not in OPTIMIZER_KWARGS:
                    valid = list(JOB_FIELDS) + list(OPTIMIZER_KWARGS)
                    raise ConfigError(f"{where}.search_space: '{key}' is not a job field"
                                      f"{tomlfile.suggest(key, valid, _ALIASES)}; {known(valid)}")
                if not isinstance(options, list) or not options:
                    raise ConfigError(f"{where}.search_space: '{key}' must be a non-empty list")
                types = JOB_FIELDS.get(key) or OPTIMIZER_KWARGS[key]
                for option in options:
                    if not tomlfile.type_ok(option, types):
                        raise ConfigError(f"{where}.search_space: '{key}' has a value of the "
                                          f"wrong type: {option!r}")
                    _check_counts({key: option}, f"{where}.search_space")
                k *= len(options)
        else:
            if space:
                raise ConfigError(f"{where}: 'search_space' only applies to hpo experiments")
            k = values.get("k")
            if k is None:
                raise ConfigError(f"{where}: missing key 'k' (the number of jobs: members of an "
                                  f"ensemble, folds of a cv; e.g. k = 5)")
            if not isinstance(k, int) or k < 1:
                raise ConfigError(f"{where}: key 'k' must be an integer >= 1, got {k!r}")
            if wtype == "cv" and k < 2:
                raise ConfigError(f"{where}: a cv experiment needs k >= 2 folds, got {k}")
        for need in ("batch_size", "epochs", "lr"):
            if values.get(need) is None and need not in space:
                raise ConfigError(f"{where}: missing key '{need}'")
    _check_counts(values, where)
    if not 0.0 < float(values["val_fraction"]) < 1.0:
        raise ConfigError(f"{where}: key 'val_fraction' must be between 0 and 1, "
                          f"got {values['val_fraction']}")
    return Experiment(
        id=exp_id, type=wtype, k=k, model=values.get("model"), dataset=values.get("dataset"),
        task=values["task"], batch_size=values.get("batch_size"), epochs=values.get("epochs"),
        lr=float(values["lr"]) if values.get("lr") is not None else None,
        optimizer=values["optimizer"], optimizer_kwargs=dict(values["optimizer_kwargs"]),
        amp=values["amp"], model_kwargs=dict(values["model_kwargs"]),
        search_space=dict(values.get("search_space") or {}), members=tuple(members),
        family=values["family"], size=values["size"], description=values["description"],
        val_fraction=float(values["val_fraction"]), split_seed=values["split_seed"],
        source=where.split(":")[0],
    )


def _check_counts(values: dict[str, Any], where: str) -> None:
    """``batch_size`` and ``epochs`` (top level, a member or a search-space point) are >= 1,
    and ``lr`` is positive."""
    for key in ("batch_size", "epochs"):
        value = values.get(key)
        if value is not None and value < 1:
            raise ConfigError(f"{where}: key '{key}' must be >= 1, got {value}")
    lr = values.get("lr")
    if lr is not None and not lr > 0:
        raise ConfigError(f"{where}: key 'lr' must be > 0, got {lr}")


@dataclass
class Catalogue:
    """Experiments in catalogue order (built-ins first, then a user's new ids)."""

    experiments: dict[str, Experiment]
    sources: list[Path]

    def get(self, exp_id: str) -> Experiment:
        try:
            return self.experiments[exp_id]
        except KeyError:
            raise ConfigError(f"unknown experiment '{exp_id}'{nearest(exp_id, self.experiments)}; "
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
            parts.extend(p.strip() for p in str(item).split(",") if p.strip())
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
                    raise ConfigError(f"{where}: range '{part}' selects no experiment")
            else:
                found = [self._resolve(part, where)]
            chosen.extend(e for e in found if e not in chosen)
        return chosen

    def _resolve(self, token: str, where: str) -> str:
        token = token.strip()
        if token.isdigit():
            token = f"E{int(token):02d}"
        if token not in self.experiments:
            raise ConfigError(f"{where}: unknown experiment '{token}'"
                              f"{nearest(token, self.experiments)}; {known(self.experiments)}")
        return token


def _read(path: Path) -> dict[str, dict[str, Any]]:
    doc = tomlfile.load(path)
    tomlfile.check_keys(doc, {"experiments": (dict,)}, str(path))
    tables = doc.get("experiments", {})
    for exp_id, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: experiments.{exp_id} must be a table")
    return tables


def user_catalogue_path(explicit: str | Path | None = None) -> Path | None:
    """The user's experiments file: ``explicit``, else ``$FUGUE_REGISTRY_DIR/experiments.toml``."""
    if explicit:
        return Path(explicit)
    reg = os.environ.get("FUGUE_REGISTRY_DIR")
    if reg:
        path = Path(reg) / "experiments.toml"
        if not path.is_file():
            raise ConfigError(f"FUGUE_REGISTRY_DIR={reg}: no experiments.toml there")
        return path
    return None


def load_catalogue(user_file: str | Path | None = None) -> Catalogue:
    """Load the built-in catalogue and merge a user's file over it.

    A user's table with an existing id overrides that experiment key by key (the merged
    table is validated as a whole); a new id is appended in file order.

    Raises:
        ConfigError: unreadable or malformed file, unknown key, wrong type.
    """
    base_path = _catalogue_path()
    tables = {k: (dict(v), str(base_path)) for k, v in _read(base_path).items()}
    sources = [base_path]
    extra = user_catalogue_path(user_file)
    if extra is not None:
        sources.append(extra)
        for exp_id, table in _read(extra).items():
            merged = {**tables[exp_id][0], **table} if exp_id in tables else dict(table)
            tables[exp_id] = (merged, str(extra))
    experiments = {exp_id: _parse_experiment(exp_id, table, f"{src}: experiments.{exp_id}")
                   for exp_id, (table, src) in tables.items()}
    return Catalogue(experiments, sources)
