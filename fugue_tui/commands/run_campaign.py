"""The campaign ``fugue-tui run`` generates: its content-derived name, writing it (and an
ad-hoc experiment's experiments file) atomically, validating it, and rewriting validation
errors that name the generated files into the flags the user typed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError


def campaign_name(selection: list[str], doc: dict[str, Any],
                   experiments_doc: dict[str, Any] | None,
                   adhoc_dir: Path) -> tuple[str, dict[str, Any]]:
    """The generated campaign's name and document (``doc`` with ``name`` and, for an ad-hoc
    experiment, ``experiments_file``).

    The name is ``run-<selection>-<digest>``: a safe campaign name
    (:data:`engine.define.paths.NAME_RULE`; ``E08:E10`` → ``run-E08-E10-...``), at most 73
    characters (97 with the longest digest); ``digest`` is the first 8 hex digits of a hash
    of everything the generated campaign and experiments file say. The same flags give the
    same name, so a
    run continues its folder (``--resume``) as a campaign file does; any other definition
    gets a run folder and generated files of its own, so an earlier run's files, the
    provenance of its rows, are never overwritten (should ``adhoc_dir`` hold other text
    under the 8-digit name, more digits are used)."""
    import hashlib
    import json

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(s.replace(",", "_") for s in selection))
    slug = slug.strip("-_") or "run"
    if len(slug) > 60:
        digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
        slug = f"{slug[:50]}-{digest}"
    definition = json.dumps({"campaign": doc, "experiments": experiments_doc},
                            sort_keys=True, default=str)
    digest = hashlib.sha256(definition.encode()).hexdigest()
    for length in (8, 16, 32):  # 32 hex digits (128 bits) keep the name within 128 chars
        name = f"run-{slug}-{digest[:length]}"
        named = {"name": name, **doc}
        if experiments_doc is not None:
            named["experiments_file"] = f"{name}.experiments.toml"
        texts = _texts(name, named, experiments_doc)
        if all(_text_or_none(adhoc_dir / file) in (None, text) for file, text in texts.items()):
            break
    return name, named


def _text_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _texts(name: str, doc: dict[str, Any],
           experiments_doc: dict[str, Any] | None) -> dict[str, str]:
    """The generated files by name: the campaign and, for an ad-hoc experiment, its
    experiments file."""
    import tomli_w

    texts = {f"{name}.toml": tomli_w.dumps(doc)}
    if experiments_doc is not None:
        texts[f"{name}.experiments.toml"] = tomli_w.dumps(experiments_doc)
    return texts


def write_campaign(folder: Path, name: str, doc: dict[str, Any],
           experiments_doc: dict[str, Any] | None) -> Path:
    """Write the campaign (and the ad-hoc experiments file next to it) atomically."""
    texts = _texts(name, doc, experiments_doc)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for file in sorted(texts, key=lambda f: f == f"{name}.toml"):  # the campaign last
            _atomic(folder / file, texts[file])
    except OSError as exc:
        from engine.errors import OutputError

        raise OutputError(f"cannot write the generated campaign under {folder}: "
                          f"{exc.strerror or exc}") from None
    return folder / f"{name}.toml"


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def check_campaign(path: Path, exp_name: str) -> None:
    from engine.define.campaign import load_campaign

    rewrite_errors(lambda: load_campaign(path), path, exp_name)


def rewrite_errors(call: Callable[[], Any], path: Path, exp_name: str) -> Any:
    """Run ``call``; a ConfigError naming the generated files is re-raised naming what the
    user typed instead (``run``, ``ad-hoc experiment 'adhoc'``)."""
    try:
        return call()
    except ConfigError as exc:
        raise ConfigError(user_words(str(exc), path, exp_name)) from None


def user_words(message: str, path: Path, exp_name: str) -> str:
    """``message`` (an error or a warning about the generated campaign at ``path``) in the
    words the user typed: the flags of ``fugue-tui run`` instead of the files' keys and
    their temporary paths."""
    exp_file = str(path.with_name(f"{path.stem}.experiments.toml"))
    message = message.replace(f"{exp_file}: experiments.{exp_name}",
                              f"ad-hoc experiment '{exp_name}'")
    message = message.replace(exp_file, "ad-hoc experiments").replace(str(path), "run")
    # campaign keys back to the flags that set them
    message = message.replace("run: experiments:", "--exp:")
    message = re.sub(r"\brun: (unknown executor|executor ')", r"--exec: \1", message)
    message = re.sub(r"\brun: options\.", "--option ", message)
    message = re.sub(r"\boptions\.(\w+)\.(\w+) is set", r"--option \1.\2 is set", message)
    message = re.sub(r"\brun: key '(experiments|executors)'",
                     lambda m: {"experiments": "--exp", "executors": "--exec"}[m.group(1)],
                     message)
    message = re.sub(r"\brun: key '(\w+)'",
                     lambda m: "--" + m.group(1).replace("_", "-"), message)
    return message
