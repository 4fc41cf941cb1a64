"""The GPU machine's environment, rebuilt here: a virtual environment that sees only the
distributions a lent GPU machine has (``bench.gpu_check.GPU_MACHINE_PACKAGES``) and what
they need themselves, linked from an existing environment instead of downloaded.

    .venv/bin/python -m bench.gpu_env .venv-gpu      # then: .venv-gpu/bin/python ...

CI builds it and runs the GPU check's dry run in it (``.ci/run``), so an import of
anything else (Textual, Ray, plotext, tomli-w, matplotlib, pytest ...) on the check's path
fails CI here instead of the check on the GPU machine. Building takes about a second:
``python -m venv --without-pip``, then one symbolic link per top-level file or folder of
each allowed distribution (from its ``RECORD``); a folder shared with a distribution that
is not allowed (a namespace package) is recreated and linked one level down. The
environment's Python is the source environment's base interpreter. Run it with the
source environment's Python (it reads requirement markers with ``packaging``, which pip
and pytest bring).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path

MARKER = ".fugue-gpu-env"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str):
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pip always vendors it
        from pip._vendor.packaging.requirements import Requirement
    return Requirement(text)


def closure(packages: list[str] | tuple[str, ...], path: list[str] | None = None
            ) -> dict[str, md.Distribution]:
    """Normalised name → distribution for ``packages`` and everything they require (their
    requested extras included, markers evaluated for this interpreter), found on ``path``.

    Raises:
        LookupError: a required distribution is not installed there (names which).
    """
    found = {_norm(d.metadata["Name"]): d for d in md.distributions(path=path)}
    done: dict[str, set[str]] = {}
    todo = [(_norm(p), frozenset()) for p in packages]
    while todo:
        name, extras = todo.pop()
        if name in done and extras <= done[name]:
            continue
        if name not in found:
            raise LookupError(f"{name} is not installed in {path or sys.path}")
        done[name] = done.get(name, set()) | set(extras)
        for text in found[name].requires or []:
            req = _requirement(text)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in ("", *done[name]))
            if wanted:
                todo.append((_norm(req.name), frozenset(req.extras)))
    return {name: found[name] for name in done}


def build(target: Path, packages: list[str] | tuple[str, ...],
          site: Path | None = None) -> dict[str, str]:
    """Create (or recreate) the environment at ``target``; returns name → version of every
    distribution linked. ``site`` is the site-packages to link from (default: this
    interpreter's)."""
    site = Path(site or sysconfig.get_paths()["purelib"]).resolve()
    target = Path(target)
    if target.exists():
        if not (target / MARKER).exists():
            raise SystemExit(f"gpu_env: {target} exists and was not made by bench.gpu_env; "
                             "not touching it")
        shutil.rmtree(target)
    allowed = closure(packages, [str(site)])
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(target)], check=True)
    (target / MARKER).write_text("made by python -m bench.gpu_env\n")
    dest = Path(subprocess.run(
        [str(target / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    # Who owns each path (every prefix of every file) among all distributions there.
    owners: dict[tuple[str, ...], set[str]] = defaultdict(set)
    children: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for dist in md.distributions(path=[str(site)]):
        name = _norm(dist.metadata["Name"])
        for f in dist.files or []:
            parts = Path(f).parts
            if not parts or parts[0] == "..":  # scripts in bin/: not needed
                continue
            for i in range(1, len(parts) + 1):
                owners[parts[:i]].add(name)
                if i > 1:
                    children[parts[:i - 1]].add(parts[i - 1])
    missing_record = [n for n, d in allowed.items() if not d.files]
    if missing_record:
        raise SystemExit(f"gpu_env: no RECORD for {', '.join(missing_record)}: cannot link")

    def place(rel: tuple[str, ...]) -> None:
        src, dst = site.joinpath(*rel), dest.joinpath(*rel)
        if not (src.exists() or src.is_symlink()):
            return
        if owners[rel] <= allowed.keys() or not children[rel]:
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                os.symlink(src, dst)
            return
        dst.mkdir(parents=True, exist_ok=True)  # shared with a distribution not allowed
        for child in sorted(children[rel]):
            if owners[rel + (child,)] & allowed.keys():
                place(rel + (child,))

    for top in sorted({rel[0] for rel, who in owners.items() if who & allowed.keys()}):
        place((top,))
    return {n: d.version for n, d in sorted(allowed.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_env", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="folder of the environment to (re)create")
    parser.add_argument("--site", help="site-packages to link from (default: this Python's)")
    args = parser.parse_args(argv)
    from bench.gpu_check import GPU_MACHINE_PACKAGES

    try:
        linked = build(Path(args.target), GPU_MACHINE_PACKAGES, args.site and Path(args.site))
    except LookupError as exc:
        print(f"gpu_env: {exc}", file=sys.stderr)
        return 2
    print(f"gpu_env: {args.target}: {len(linked)} distributions "
          f"({', '.join(GPU_MACHINE_PACKAGES)} and their requirements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
