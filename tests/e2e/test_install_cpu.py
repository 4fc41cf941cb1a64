"""``scripts/ensure-env --cpu`` (issue 49): PyTorch's CPU wheels, never silently a CUDA build.

PyTorch's CPU index is not reachable from the project's machines, so the guard is tried
against a local index on loopback holding stand-in wheels built here (a few hundred bytes
each): a ``torch`` whose ``torch.version.cuda`` is None, and on extra indexes — configured
through ``PIP_EXTRA_INDEX_URL`` and through a pip.conf named by ``PIP_CONFIG_FILE`` — a CUDA
stand-in of a higher version (``+cu130`` sorts above ``+cpu``), which plain pip takes (the
control in the first test shows it). The script runs from a copy of ``scripts/`` in a
stand-in project (a pyproject whose in-tree build backend needs nothing from an index, and
the real torch pins), so no real torch is installed and the real ``.venv`` is never touched.
"""

from __future__ import annotations

import functools
import http.server
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
PINS = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.startswith(("torch==", "torchvision==")))


def write_wheel(folder, name, version, files, requires=()):
    """A minimal wheel of ``name`` ``version`` holding ``files`` ({path: text}); its file name."""
    import base64
    import hashlib
    import os
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    meta = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
                   + [f"Requires-Dist: {r}\n" for r in requires])
    files = {**files, f"{dist}.dist-info/METADATA": meta,
             f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
                                        "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    filename = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(folder, filename), "w") as whl:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            whl.writestr(path, data)
        record.append(f"{dist}.dist-info/RECORD,,")
        whl.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return filename


#: The stand-in project's PEP 517/660 backend: in the tree, requiring nothing, so that pip's
#: isolated build of the editable install needs no index.
BACKEND = inspect.getsource(write_wheel) + '''

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return write_wheel(wheel_directory, "standin-project", "0", {},
                       ["torch", 'torchvision; extra == "vision"'])


build_editable = build_wheel
'''


def torch_standin(folder: Path, version: str, cuda: str | None) -> None:
    (folder / "torch").mkdir(parents=True, exist_ok=True)
    write_wheel(folder / "torch", "torch", version, {
        "torch/__init__.py": "from . import version\n__version__ = version.__version__\n",
        "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\n"})


def torchvision_standin(folder: Path, version: str) -> None:
    (folder / "torchvision").mkdir(parents=True, exist_ok=True)
    write_wheel(folder / "torchvision", "torchvision", version, {"torchvision/__init__.py": ""})


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # pip's requests are not the test's output
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """``http://127.0.0.1:PORT`` serving the stand-in indexes (directory listings, which pip
    reads as PEP 503 pages): ``cpu`` (the CPU torch at the pin), ``cuda`` (the CUDA torch at
    the pin, higher), ``extra-env`` and ``extra-conf`` (copies of ``cuda``, one for each way
    of configuring an extra index), ``old`` (a CPU torch at another version only), ``empty``
    (the stand-in for PyPI: nothing)."""
    root = tmp_path_factory.mktemp("index")
    torch, vision = PINS["torch"].split("+")[0], PINS["torchvision"].split("+")[0]
    torch_standin(root / "cpu", f"{torch}+cpu", None)
    torchvision_standin(root / "cpu", f"{vision}+cpu")
    for name in ("cuda", "extra-env", "extra-conf"):
        torch_standin(root / name, f"{torch}+cu130", "13.0")
        torchvision_standin(root / name, f"{vision}+cu130")
    torch_standin(root / "old", "2.0.0+cpu", None)
    torchvision_standin(root / "old", f"{vision}+cpu")
    (root / "empty").mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _project(tmp_path: Path) -> Path:
    """A stand-in project with the real scripts, the real torch pins and an old ``.venv``."""
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "scripts", proj / "scripts")
    (proj / "backend.py").write_text(BACKEND)
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "standin-project"\nversion = "0"\nrequires-python = ">=3.11"\n')
    (proj / "constraints.txt").write_text(
        "".join(f"{name}=={version}\n" for name, version in PINS.items()) + "nvidia-nccl-cu13==2.30.7\n")
    old = proj / ".venv"
    (old / "bin").mkdir(parents=True)
    (old / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.1\n")
    (old / "bin" / "python").write_text("#!/bin/sh\nexit 3\n")
    (old / "bin" / "python").chmod(0o755)
    return proj


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _env(tmp_path: Path, index: str, cpu_index: str) -> dict[str, str]:
    """The user's pip configuration, this machine's replaced: an extra index with the CUDA
    stand-in through the variable, through a pip.conf named by PIP_CONFIG_FILE and through a
    global pip.conf (XDG_CONFIG_DIRS: one that ``--isolated`` still reads); PyPI's place taken
    by the empty index (no network)."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nextra-index-url = {index}/extra-conf/\n")
    for xdg in ("xdg-global", "xdg-user"):
        (tmp_path / xdg / "pip").mkdir(parents=True, exist_ok=True)
        (tmp_path / xdg / "pip" / "pip.conf").write_text(conf.read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "FUGUE_CPU"))}
    env.pop("PYTHONPATH", None)
    return {**env, "PYTHON": sys.executable, "FUGUE_CPU_INDEX_URL": f"{cpu_index}/",
            "PIP_EXTRA_INDEX_URL": f"{index}/extra-env/", "PIP_CONFIG_FILE": str(conf),
            "XDG_CONFIG_DIRS": str(tmp_path / "xdg-global"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-user"),
            "PIP_INDEX_URL": f"{index}/empty/", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}


def _run(proj: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(proj / "scripts" / "ensure-env"), *args], env=env,
                          capture_output=True, text=True, timeout=300)


def _refused_in_one_line(out: subprocess.CompletedProcess, proj: Path, old: dict, *words: str):
    assert out.returncode == 1, out
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("ensure-env: ") and ".venv unchanged" in out.stderr
    assert all(w in out.stderr for w in words), out.stderr
    assert _tree(proj / ".venv") == old  # the old environment, whole
    assert not (proj / ".venv.previous").exists()


def test_cpu_takes_the_cpu_wheel_over_a_higher_cuda_one_on_extra_indexes(tmp_path, index):
    proj = _project(tmp_path)
    env = _env(tmp_path, index, f"{index}/cpu")
    out = _run(proj, env, "--cpu")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    python = proj / ".venv" / "bin" / "python"
    probe = "import json, torch, torchvision; print(json.dumps([torch.__version__, torch.version.cuda]))"
    got = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(got.stdout) == [f"{PINS['torch'].split('+')[0]}+cpu", None]
    assert not (proj / ".venv.previous").exists() and not list(tmp_path.glob("ensure-env-cpu-*"))
    # The plain script's fast path takes the CPU environment as it is; --cpu's too.
    for args in ((), ("--cpu",)):
        again = _run(proj, {**env, "PYTHON": "/nonexistent", "FUGUE_CPU_INDEX_URL": "http://127.0.0.1:9/"}, *args)
        assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    # A plain refresh of a CPU-only .venv goes the --cpu way (here to an index that is down:
    # refused, the CPU environment kept), never an in-place install that could bring CUDA.
    with (proj / "constraints.txt").open("a") as pins:
        pins.write("# changed\n")
    kept = _tree(proj / ".venv")
    refresh = _run(proj, {**env, "FUGUE_CPU_INDEX_URL": "http://127.0.0.1:9/"})
    assert refresh.returncode == 1 and "rebuilding it CPU-only" in refresh.stderr
    assert refresh.stderr.splitlines()[-1].startswith("ensure-env: the CPU index http://127.0.0.1:9/")
    assert _tree(proj / ".venv") == kept
    # The control: pip with --index-url of the CPU index, in the same environment, takes the
    # CUDA stand-in from each way of configuring an extra index, --isolated or not.
    by_variable = {**env, "PIP_CONFIG_FILE": os.devnull}
    by_conf = {k: v for k, v in env.items() if k != "PIP_EXTRA_INDEX_URL"}
    by_global = {k: v for k, v in by_conf.items() if k != "PIP_CONFIG_FILE"}
    for leak, isolated in ((by_variable, []), (by_conf, []), (by_global, ["--isolated"])):
        report = subprocess.run(
            [str(python), "-m", "pip", *isolated, "install", "--dry-run", "--ignore-installed",
             "--no-deps", "--report", "-", "--quiet", "--index-url", f"{index}/cpu/",
             f"torch=={PINS['torch'].split('+')[0]}"],
            env=leak, capture_output=True, text=True, check=True)
        assert json.loads(report.stdout)["install"][0]["metadata"]["version"].endswith("+cu130")


def test_cpu_refuses_a_cuda_build_in_one_line_and_keeps_the_old_venv(tmp_path, index):
    proj = _project(tmp_path)
    old = _tree(proj / ".venv")
    out = _run(proj, _env(tmp_path, index, f"{index}/cuda"), "--cpu")
    _refused_in_one_line(out, proj, old, "CUDA build", "torch.version.cuda = 13.0")
    assert "installing the rest" not in out.stdout  # refused before any NVIDIA download


def test_cpu_refuses_when_only_an_extra_index_offers_the_pinned_torch(tmp_path, index):
    proj = _project(tmp_path)
    old = _tree(proj / ".venv")
    out = _run(proj, _env(tmp_path, index, f"{index}/old"), "--cpu")
    _refused_in_one_line(out, proj, old, "No matching distribution", "pip's log")


def test_cpu_with_an_unreachable_index_says_so_in_one_line(tmp_path, index):
    proj = _project(tmp_path)
    old = _tree(proj / ".venv")
    with socket.socket() as sock:  # a loopback port with nothing listening
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/cpu"
    out = _run(proj, _env(tmp_path, index, closed), "--cpu")
    _refused_in_one_line(out, proj, old, "not reachable", closed)
    out = _run(proj, _env(tmp_path, index, f"{index}/empty"), "--cpu")  # no torch there at all
    _refused_in_one_line(out, proj, old, "HTTP 404")
    (proj / ".venv.previous").mkdir()  # left by a run killed mid-build: never overwritten
    out = _run(proj, _env(tmp_path, index, f"{index}/cpu"), "--cpu")
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "ensure-env: .venv.previous is left from an interrupted --cpu run: move it back "
        "(rm -rf .venv && mv .venv.previous .venv) or remove it"]
    assert _tree(proj / ".venv") == old


def test_cpu_interrupted_brings_the_old_venv_back(tmp_path, index):
    proj = _project(tmp_path)
    old = _tree(proj / ".venv")
    run = subprocess.Popen([str(proj / "scripts" / "ensure-env"), "--cpu"], text=True,
                           env=_env(tmp_path, index, f"{index}/cpu"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdout.readline().startswith("ensure-env: building a CPU-only .venv")
    deadline = time.monotonic() + 60
    while not (proj / ".venv.previous").exists():  # the old one moved aside: the build began
        assert run.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    run.terminate()  # while the new environment is being made (seconds: venv, then pip)
    out, err = run.communicate(timeout=120)
    assert (run.returncode, err) == (143, "ensure-env: interrupted; .venv unchanged\n")
    assert _tree(proj / ".venv") == old and not (proj / ".venv.previous").exists()


def test_a_venv_of_an_older_python_is_named_in_one_line(tmp_path, index):
    proj = _project(tmp_path)
    (proj / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.12\n")
    old = _tree(proj / ".venv")
    out = _run(proj, _env(tmp_path, index, f"{index}/cpu"))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "ensure-env: .venv was made by Python 3.10.12; fugue-tui needs Python >= 3.11: remove "
        ".venv and run again with one (rm -rf .venv && PYTHON=python3.11 scripts/ensure-env)"]
    assert _tree(proj / ".venv") == old
    bad = _run(proj, _env(tmp_path, index, f"{index}/cpu"), "--gpu")
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1) and "--gpu" in bad.stderr


def test_the_classifiers_name_the_pythons_requires_python_allows():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lowest = project["requires-python"].removeprefix(">=")
    minors = sorted(int(c.rsplit(".", 1)[1]) for c in project.get("classifiers", [])
                    if c.startswith("Programming Language :: Python :: 3."))
    assert minors and f"3.{minors[0]}" == lowest, minors
    assert minors == list(range(minors[0], minors[-1] + 1))  # no gap
    assert sys.version_info[:2] <= (3, minors[-1])  # the Python this runs on is listed
    assert "Programming Language :: Python :: 3 :: Only" in project["classifiers"]
