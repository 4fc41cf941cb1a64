"""``scripts/ensure-env --cpu``: build ``.venv`` with PyTorch's CPU wheels, refusing a CUDA build.

Run by ``scripts/ensure-env --cpu`` from the repository root, under the Python that makes the
environment (``$PYTHON``, Python >= 3.11 checked there)::

    python scripts/ensure_env_cpu.py STAMP

STAMP is what ``scripts/ensure-env`` writes to ``.venv/.fugue-env-stamp`` (a hash of
pyproject.toml and constraints.txt), so that its fast path then returns at once.

Why torch gets its own pip step with pip's configuration switched off: where pip has an extra
index configured (``extra-index-url`` in a pip.conf, ``PIP_EXTRA_INDEX_URL``: common in
companies), ``--index-url`` of the CPU wheels does not disable it; pip takes the best version
from all indexes, a CUDA wheel there (``2.14.1+cu130`` sorts above ``2.14.1+cpu``) wins and pip
reports success. So the torch step runs pip with ``--isolated`` (no ``PIP_*`` variables, no
user configuration) *and* ``PIP_CONFIG_FILE=/dev/null`` (pip then reads no configuration file
at all: ``--isolated`` alone still reads the global, the site and ``PIP_CONFIG_FILE``'s
files). The rest of the project installs with the user's pip configuration as usual: torch is
then already installed and satisfies the pins, and the check after it catches a swap.

The check: ``torch.version.cuda is None``, read once from the installed ``torch/version.py``
right after the torch step (torch itself cannot import before its dependencies are there,
and a CUDA build refused there costs no NVIDIA downloads), and once by importing torch in
the finished environment. Any failure is one line on stderr and exit 1; the old ``.venv``
is moved aside (a rename) while the new one is built and moved back unchanged on failure
(a venv cannot be built elsewhere and moved: its scripts name their interpreter's path).

``FUGUE_CPU_INDEX_URL`` overrides PyTorch's CPU index (a mirror; the tests' local index).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

DEFAULT_INDEX = "https://download.pytorch.org/whl/cpu"
VENV, ASIDE = Path(".venv"), Path(".venv.previous")
STAMP, MARKER = VENV / ".fugue-env-stamp", VENV / ".fugue-env-cpu"

#: Reads (torch.__version__, torch.version.cuda) in the new environment: ``file`` from
#: torch/version.py without importing torch (its dependencies are not installed yet),
#: ``import`` from torch itself. Run with -I: no PYTHONPATH, no user site, no cwd.
PROBE = r"""
import json, sys
if sys.argv[1] == "import":
    import torch
    found = {"__version__": torch.__version__, "cuda": torch.version.cuda}
else:
    import importlib.util, os, runpy
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no torch package installed")
    found = runpy.run_path(os.path.join(spec.submodule_search_locations[0], "version.py"))
print(json.dumps([str(found.get("__version__")), found.get("cuda")]))
"""


class Refused(Exception):
    """One line saying why the new environment was refused (printed as is)."""


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C; ``code`` is the exit status."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _stop(signum: int, frame: object) -> None:
    raise Stopped(128 + signum)


def pins(constraints: Path) -> tuple[str, str]:
    """The ``torch`` and ``torchvision`` versions pinned in ``constraints``.

    Raises Refused naming the file when one is missing."""
    found = dict(re.findall(r"(?m)^(torch|torchvision)==(\S+)\s*$", constraints.read_text()))
    missing = [name for name in ("torch", "torchvision") if name not in found]
    if missing:
        raise Refused(f"{constraints} pins no {' and no '.join(missing)} version")
    return found["torch"], found["torchvision"]


def check_reachable(index: str, timeout_s: float = 30.0) -> None:
    """Raise Refused in one line unless ``index`` answers for its ``torch/`` project page
    (a PEP 503 simple index; ``file://`` folders too). Checked before anything is moved, and
    because pip, given an unreachable index, retries for seconds and then only says that no
    version matched."""
    page = index.rstrip("/") + "/torch/"
    try:
        if urllib.parse.urlsplit(page).scheme == "file":
            folder = urllib.request.url2pathname(urllib.parse.urlsplit(page).path)
            if not os.path.isdir(folder):
                raise OSError(f"no folder {folder}")
        else:
            urllib.request.urlopen(page, timeout=timeout_s).close()
    except urllib.error.HTTPError as exc:
        raise Refused(f"the CPU index {index} answers HTTP {exc.code} for torch/") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise Refused(f"the CPU index {index} is not reachable ({reason})") from None


def isolated_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` for the torch step: every ``PIP_*`` variable removed, and
    ``PIP_CONFIG_FILE=/dev/null``, with which pip reads no configuration file at all
    (``--isolated`` alone drops the variables and the user's pip.conf but still reads the
    global ones, ``/etc/pip.conf`` and ``$XDG_CONFIG_DIRS/pip/pip.conf``, the venv's and the
    one ``PIP_CONFIG_FILE`` names; pip pinned here, 23.2, and today's alike). The command
    line's ``--isolated`` ignores the variables too: belt and braces."""
    env = {key: value for key, value in environ.items() if not key.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def torch_step(python: Path, index: str, torch: str, torchvision: str) -> list[str]:
    """The pip command line installing only torch and torchvision, from ``index`` only."""
    return [str(python), "-m", "pip", "--isolated", "--disable-pip-version-check", "install",
            "--no-deps", "--only-binary", ":all:", "--index-url", index,
            f"torch=={torch}", f"torchvision=={torchvision}"]


def torch_build(python: Path, how: str) -> tuple[str, str | None]:
    """``(torch.__version__, torch.version.cuda)`` in the environment of ``python``; ``how``
    is ``file`` (torch/version.py, before torch's dependencies are installed) or ``import``.
    Raises Refused with the probe's last line when torch is missing or does not import."""
    out = subprocess.run([str(python), "-I", "-c", PROBE, how], capture_output=True, text=True)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise Refused(f"torch does not {'import' if how == 'import' else 'read'} in the new "
                      f"environment ({last})")
    version, cuda = json.loads(out.stdout.strip().splitlines()[-1])
    return version, cuda


def guard(python: Path, how: str, index: str) -> None:
    """Raise Refused in one line unless the new environment's torch has ``version.cuda``
    None."""
    version, cuda = torch_build(python, how)
    if cuda is not None:
        raise Refused(f"torch {version} from {index} is a CUDA build (torch.version.cuda = "
                      f"{cuda}), not a CPU wheel")


def _pip(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        errors = [line[len("ERROR: "):] for line in log.read_text().splitlines()
                  if line.startswith("ERROR: ")]
        raise Refused(f"{what} failed ({errors[-1] if errors else f'pip exit {done.returncode}'})")


def build(stamp: str, index: str, torch: str, torchvision: str, log: Path) -> None:
    """Build the CPU-only ``.venv`` in place (the old one is already aside) with the pinned
    ``torch`` and ``torchvision`` from ``index``; raises Refused in one line."""
    made = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
    if made.returncode != 0:
        raise Refused(f"{sys.executable} -m venv failed "
                      f"({(made.stderr.strip().splitlines() or ['no output'])[-1]})")
    python = VENV / "bin" / "python"
    _pip(torch_step(python, index, torch, torchvision), log,
         f"installing torch {torch} and torchvision {torchvision} from {index}",
         env=isolated_env(dict(os.environ)))
    guard(python, "file", index)
    print(f"ensure-env: torch {torch} from {index} is a CPU build; installing the rest of "
          "fugue-tui's pinned dependencies (a few minutes)", flush=True)
    _pip([str(python), "-m", "pip", "install", "--quiet", "-c", "constraints.txt",
          "-e", ".[vision,test]"], log, "installing fugue-tui and its pinned dependencies")
    guard(python, "import", index)
    MARKER.write_text(index + "\n")
    STAMP.write_text(stamp + "\n")


def main(argv: list[str]) -> int:
    """Build, swap, or restore: progress on stdout; on failure one line on stderr and exit 1
    (2 for a leftover of an interrupted run, 128 + the signal when interrupted)."""
    stamp = argv[0]
    for sig in (signal.SIGTERM, signal.SIGHUP):  # as Ctrl-C: unwind, so the old .venv returns
        signal.signal(sig, _stop)
    index = os.environ.get("FUGUE_CPU_INDEX_URL") or DEFAULT_INDEX
    if ASIDE.exists() or ASIDE.is_symlink():
        print(f"ensure-env: {ASIDE} is left from an interrupted --cpu run: move it back "
              f"(rm -rf {VENV} && mv {ASIDE} {VENV}) or remove it", file=sys.stderr)
        return 2
    had_venv = VENV.exists() or VENV.is_symlink()
    fd, name = tempfile.mkstemp(prefix="ensure-env-cpu-", suffix=".log")
    os.close(fd)
    log = Path(name)
    ok = False
    try:
        torch, torchvision = pins(Path("constraints.txt"))
        check_reachable(index)
        # Progress on stdout: on failure stderr holds the one line that says why.
        print(f"ensure-env: building a CPU-only {VENV} with torch from {index}", flush=True)
        if had_venv:
            VENV.rename(ASIDE)
        build(stamp, index, torch, torchvision, log)
        ok = True
    except Refused as exc:
        where = f" (pip's log: {log})" if log.stat().st_size else ""
        print(f"ensure-env: {exc}; {VENV} unchanged{where}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Stopped) as exc:
        print(f"ensure-env: interrupted; {VENV} unchanged", file=sys.stderr)
        return exc.code if isinstance(exc, Stopped) else 130
    finally:  # also when interrupted: the old environment comes back whole
        moved = ASIDE.exists() or ASIDE.is_symlink()  # it was not there when this began
        if ok and moved:
            if ASIDE.is_symlink():
                ASIDE.unlink()
            else:
                shutil.rmtree(ASIDE, ignore_errors=True)
        elif not ok and (moved or not had_venv):  # the new one goes, the old one returns
            shutil.rmtree(VENV, ignore_errors=True)
            if moved:
                ASIDE.rename(VENV)
        if ok or not log.stat().st_size:
            log.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
