"""Ray as a guest in the user's environment (issue 49), end to end with a real ``ray`` CLI.

Ray 2.60's ``ray.init()`` of a new local runtime wrote ``~/.ray/auth_token``; the user's
own ``ray start --head`` then turned token authentication on, and the README's cluster
steps failed with 20 s of ``InvalidAuthToken`` lines and a traceback. Here, with ``HOME``
a temporary folder: a ``ray`` cell runs and leaves ``HOME`` empty; then the README's
cluster steps (the token, ``ray start --head`` with authentication on, on loopback) and a
cluster campaign on that head, which finds the user's token where Ray looks for it; the
same campaign without a token, or with a wrong one, is refused in one line, exit 2.

One module, one head (started after the ray cell: the order the issue found the fault
in), about 25 s here.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engine.executors.ray.runtime import kill_ours
from engine.results.read import read_rows
from tests.e2e.conftest import _env, one_job

pytestmark = pytest.mark.slow

EXPERIMENTS = one_job("XA", "mlp", "digits", k=1, batch_size=64, epochs=1, lr=0.01)
RAY = str(Path(sys.executable).with_name("ray"))
#: Publishes, every 0.2 s, what a node's agents publish to every driver of the cluster when
#: their raylet dies unexpectedly (ray._private.process_watcher.report_raylet_error_logs).
PUBLISH = """
import sys, time
import ray
from ray._private import ray_constants, utils
from ray._raylet import GcsClient
client = GcsClient(address=sys.argv[1])
while True:
    utils.publish_error_to_driver(ray_constants.RAYLET_DIED_ERROR,
        "Raylet is terminated. Termination is unexpected. Last 20 lines of the Raylet "
        "logs:\\n    [raylet] a line of its log", gcs_client=client)
    time.sleep(0.2)
"""


def _user_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home folder is ``home``: no Ray token variable."""
    env = {k: v for k, v in _env(no_data=True).items() if not k.startswith("RAY_AUTH")}
    return {**env, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", **extra}


def _campaign(tmp: Path, name: str, executors: list[str], extra: str = "") -> Path:
    (tmp / "experiments.toml").write_text(EXPERIMENTS)
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\nexperiments = ["XA"]\nexecutors = '
                    f'{json.dumps(executors)}\ndevice = "cpu"\nthreads = 1\n'
                    'experiments_file = "experiments.toml"\nruns_dir = "runs"\n' + extra)
    return path


def _batch(tmp: Path, campaign: Path, env: dict[str, str], *extra: str,
           timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", campaign.name, *extra],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _everything_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    """A ray cell run with an empty ``HOME`` (what it left there), then a head node
    started by the README's steps with token authentication on: ``(home, address,
    what the ray cell left in home, the ray cell's run)``. The head is stopped after the
    module by its processes (never ``ray stop``: it would stop every Ray of the host)."""
    tmp = tmp_path_factory.mktemp("guest")
    home = tmp / "home"
    home.mkdir()
    env = _user_env(home)
    cell = _batch(tmp, _campaign(tmp, "local-ray", ["ray"]), env)
    left = _everything_in(home)
    # The README's steps, as the user types them: the token, then the head.
    token = subprocess.run([RAY, "get-auth-token", "--generate"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert token.returncode == 0, token.stderr
    temp_dir = tempfile.mkdtemp(prefix="fr-guest-", dir="/tmp")
    port = _free_port()
    head = subprocess.run(
        [RAY, "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
         "--num-cpus", "1", "--include-dashboard", "false", "--temp-dir", temp_dir],
        env={**env, "RAY_AUTH_MODE": "token"}, capture_output=True, text=True, timeout=120)
    try:
        assert head.returncode == 0, head.stderr[-3000:]
        yield home, f"127.0.0.1:{port}", left, cell
    finally:
        kill_ours(temp_dir, None, grace_s=1.0)
        subprocess.run(["rm", "-rf", temp_dir], check=False)


def test_a_ray_cell_leaves_the_users_home_alone(guest):
    """The ray cell's private runtime had a token of its own, in its temporary folder:
    nothing in ``HOME`` (Ray 2.60 wrote ``.ray/auth_token`` there)."""
    _, _, left, cell = guest
    assert cell.returncode == 0, cell.stderr[-3000:]
    assert left == []


def test_a_campaign_on_a_token_cluster_started_after_a_ray_cell_runs(guest, tmp_path):
    """The README's cluster steps after a ray cell ran: the campaign finds the user's token
    (``~/.ray/auth_token``), its cell runs on the head, and Ray's own lines stay out of
    ``--batch``'s output."""
    home, address, _, _ = guest
    campaign = _campaign(tmp_path, "cl", ["seq"], f'cluster = "{address}"\ncpus_per_cell = 1\n')
    # What a node's agents publish to every driver when its raylet dies, as they do
    publisher = subprocess.Popen([sys.executable, "-c", PUBLISH, address],
                                 env=_user_env(home, RAY_AUTH_MODE="token"),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = _batch(tmp_path, campaign, _user_env(home))
    finally:
        publisher.kill()
        publisher.wait()
    assert run.returncode == 0, run.stderr[-3000:]
    rows = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [r["status"] for r in rows] == ["ok"] and rows[0]["node"]
    for noise in ("InvalidAuthToken", "Traceback", "Raylet is terminated",
                  "Token authentication is"):
        assert noise not in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
    assert _everything_in(home) == [".ray", ".ray/auth_token"]  # the user's token only
    # the runner heard it, and kept it in the run folder
    assert "Raylet is terminated" in (tmp_path / "runs" / "cl" / "ray-driver.log").read_text()


@pytest.mark.parametrize("token, needles", [
    (None, ("requires an authentication token and none was found",)),
    ("not-the-clusters-token", ("refused the authentication token from RAY_AUTH_TOKEN",)),
], ids=["missing", "invalid"])
def test_a_missing_or_wrong_token_is_one_line(guest, tmp_path, token, needles):
    """Without the cluster's token (another user's empty home) or with a wrong one: one
    line naming the key, the address and ``ray get-auth-token``, exit 2, nothing written
    (it was ~20 lines of InvalidAuthToken and a 69-line traceback, exit 1)."""
    _, address, _, _ = guest
    home = tmp_path / "empty-home"
    home.mkdir()
    campaign = _campaign(tmp_path, "cl", ["seq"], f'cluster = "{address}"\ncpus_per_cell = 1\n')
    env = _user_env(home, **({"RAY_AUTH_TOKEN": token} if token else {}))
    run = _batch(tmp_path, campaign, env, "--dry-run", timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr[-3000:]
    for needle in ("cl.toml", "key 'cluster'", address, "`ray get-auth-token`", *needles):
        assert needle in lines[0], lines[0]
    assert not (tmp_path / "runs").exists()
    assert _everything_in(home) == []
