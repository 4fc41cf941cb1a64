"""``engine.executors.ray.runtime`` and the Ray executor's pure parts: no Ray runtime is started here
(the runtime itself is exercised in tests/e2e/test_ray.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine.errors import FugueError
from engine.executors.ray import options as ray_options
from engine.executors.ray import runtime as raytools

ROOT = Path(__file__).resolve().parents[5]


def test_module_is_runner_safe():
    """The runner imports the cleanup handler's module: it must not load ray or torch."""
    code = ("import sys, json, engine.executors.ray.runtime\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('ray', 'torch'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == []


def test_short_temp_dir_fits_the_socket_limit():
    path = raytools.short_temp_dir()
    try:
        assert path.name.startswith("fr-") and path.is_dir()
        longest = str(path) + "/session_2026-11-30_07-26-21_217957_4194304/sockets/plasma_store"
        assert len(longest.encode()) < raytools.SOCKET_LIMIT
    finally:
        path.rmdir()


def test_short_temp_dir_refuses_a_deep_base(tmp_path):
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    with pytest.raises(FugueError, match="short enough") as info:
        raytools.short_temp_dir(str(deep))
    assert "\n" not in str(info.value)
    assert list(deep.iterdir()) == []  # the attempt was removed


def test_share_fits_ray_precision():
    assert raytools.share(2, 3) == 0.6666 and 3 * raytools.share(2, 3) <= 2
    assert raytools.share(1, 3) == 0.3333
    assert raytools.share(16, 3) == 5.0  # quantities above 1 must be whole
    assert raytools.share(2, 2) == 1.0 and raytools.share(2, 1) == 2.0


def test_unschedulable_fractional_request_fails_at_once():
    t0 = time.monotonic()
    with pytest.raises(FugueError) as info:
        raytools.check_schedulable({"CPU": 0.5, "GPU": 0.5}, 2, [{"CPU": 2.0}])
    message = str(info.value)
    assert "\n" not in message and time.monotonic() - t0 < 1
    assert "GPU 0.5" in message and "only 0 fit" in message and "GPU 0" in message
    with pytest.raises(FugueError, match="only 1 fit"):
        raytools.check_schedulable({"CPU": 0.6666}, 2, [{"CPU": 1.0}])
    raytools.check_schedulable({"CPU": 0.6666, "GPU": 0.0}, 3, [{"CPU": 2.0}])
    raytools.check_schedulable({"CPU": 1.0, "GPU": 0.5}, 2, [{"CPU": 2.0, "GPU": 1.0}])


def test_check_resources_local_exact_cluster_at_least():
    local = raytools.Runtime("local", "x:1", "/tmp/fr-x", "fr-x", 2, 0, {"CPU": 4.0})
    with pytest.raises(FugueError, match=r"CPU 4 \(expected 2\)"):
        raytools.check_resources(local, {"CPU": 2, "GPU": 0})
    raytools.check_resources(raytools.Runtime("local", "x:1", None, "t", 2, 1,
                                              {"CPU": 2.0, "GPU": 1.0}), {"CPU": 2, "GPU": 1})
    cluster = raytools.Runtime("address", "x:1", None, "t", None, None, {"CPU": 8.0})
    raytools.check_resources(cluster, {"CPU": 2, "GPU": 0})
    with pytest.raises(FugueError, match="GPU 0 \\(expected at least 1\\)"):
        raytools.check_resources(cluster, {"CPU": 2, "GPU": 1})


def test_unreachable_address_is_one_line_and_fast():
    with socket_closed_port() as port:
        t0 = time.monotonic()
        reason = raytools.check_address(f"127.0.0.1:{port}", timeout=2)
    assert reason and "\n" not in reason and "no Ray cluster reachable" in reason
    assert time.monotonic() - t0 < 3
    for bad in ("localhost", "host:port", "ray://:10001", "h:70000"):
        with pytest.raises(FugueError, match="host:port"):
            raytools.check_address(bad)


def test_start_runtime_refuses_an_unreachable_address_before_ray(tmp_path):
    with socket_closed_port() as port:
        with pytest.raises(FugueError, match="no Ray cluster reachable"):
            raytools.start_runtime(attempt_dir=tmp_path, address=f"127.0.0.1:{port}")
    assert not (tmp_path / "cleanup").exists()


class socket_closed_port:
    """A local TCP port with nothing listening (bound, then released)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc):
        return False


def _sleeper(env_tag: str | None, argv_tag: str = "", child: bool = False) -> subprocess.Popen:
    code = ("import subprocess, sys, time\n"
            + ("subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
               if child else "")
            + "time.sleep(60)\n")
    env = dict(os.environ)
    env.pop(raytools.TAG_ENV, None)
    if env_tag:
        env[raytools.TAG_ENV] = env_tag
    return subprocess.Popen([sys.executable, "-c", code, argv_tag], env=env,
                            start_new_session=True)


def test_cleanup_handler_stops_only_our_processes_and_keeps_logs(tmp_path):
    temp_dir = raytools.short_temp_dir()
    logs = temp_dir / "session_x" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("raylet log\n")
    (temp_dir / "session_latest").symlink_to(temp_dir / "session_x")
    attempt = tmp_path / "attempt-1"
    attempt.mkdir()
    raytools.link_logs(temp_dir, attempt)
    assert (attempt / "ray-logs" / "raylet.out").read_text() == "raylet log\n"
    tag = temp_dir.name
    ours_env = _sleeper(tag, child=True)           # tag in its environment, and a child
    ours_argv = _sleeper(None, f"--temp-dir={temp_dir}")  # a core process: on its command line
    other_tag = _sleeper("fr-someone-else")
    lookalike = _sleeper(None, f"--temp-dir={temp_dir}0")  # another folder, same prefix
    procs = [ours_env, ours_argv, other_tag, lookalike]
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not psutil.Process(ours_env.pid).children():
            time.sleep(0.05)
        child = psutil.Process(ours_env.pid).children()[0]
        from engine import cleanup

        cleanup.record(attempt, raytools.CLEANUP_NAME, raytools.CLEANUP_HANDLER,
                       temp_dir=str(temp_dir), tag=tag, attempt_folder=str(attempt))
        messages = cleanup.run_recorded(attempt)
        assert messages == [f"ray: stopped 3 Ray process(es) of {tag}"]
        for p in (ours_env, ours_argv):
            assert p.wait(timeout=5) is not None
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        assert other_tag.poll() is None and lookalike.poll() is None
        assert not temp_dir.exists()
        kept = attempt / "ray-logs"
        assert kept.is_dir() and not kept.is_symlink()
        assert (kept / "raylet.out").read_text() == "raylet log\n"
        assert not list((attempt / "cleanup").glob("*.json"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        raytools.remove_temp_dir(temp_dir)


def test_union_of_training_spans():
    from engine.measure.spans import union_seconds

    assert union_seconds([]) == 0.0
    assert union_seconds([(0, 1), (0.5, 2), (3, 4)]) == pytest.approx(3.0)
    assert union_seconds([(3, 4), (0, 1)]) == pytest.approx(2.0)


def test_snapshot_round_trip_keeps_the_row_fields():
    from engine.define.workloads import JobSpec
    from engine.executors.ray.worker import from_snapshot, snapshot
    from engine.train.loop import JobResult

    job = JobSpec("j0", "E", 0, 42, "mlp", "wine", None, 16, 3, 0.1, "sgd")
    result = JobResult(job, start=time.perf_counter() - 2.0, samples=96, epochs_run=1,
                       train_time_s=0.5, history=[{"epoch": 1, "train_loss": 0.7}])
    snap = json.loads(json.dumps(snapshot(result)))  # plain values only
    assert 1.9 < snap["total_time_s"] < 10
    back = from_snapshot(job, {**snap, "train_spans": [[0, 1]]})
    assert back.job is job and back.samples == 96 and back.history == result.history
    assert back.end == pytest.approx(back.start + back.total_time_s)


def test_scheduler_choice_and_pruning_warnings():
    from engine.executors.ray.tune import make_scheduler, pruning_warnings

    sched, facts = make_scheduler("asha", 12, 1, 2)
    assert facts["class"] == "ASHAScheduler" and facts["max_t"] == 12
    sched, facts = make_scheduler("hyperband", 12, 1, 2)
    assert facts["class"] == "AsyncHyperBandScheduler" and facts["brackets"] == 4
    sched, facts = make_scheduler("median", 12, 2, 2)
    assert facts["class"] == "MedianStoppingRule" and facts["grace_period"] == 2
    assert make_scheduler("asha", 2, 5, 2)[1]["grace_period"] == 2  # never above max_t
    assert make_scheduler("fifo", 3, 1, 2)[1] == {"class": "FIFOScheduler"}
    assert pruning_warnings("fifo", 1, 1, 3, 1, 2) == []
    assert pruning_warnings("asha", 6, 3, 12, 1, 2) == []
    # Issue 25: two trials at reduction factor 3 can still lose one (no false warning);
    # one trial cannot.
    assert pruning_warnings("asha", 2, 2, 12, 1, 3) == []
    few = pruning_warnings("asha", 1, 1, 12, 1, 3)
    assert len(few) == 1 and "cannot stop any trial" in few[0]
    serial = pruning_warnings("hyperband", 6, 1, 12, 1, 2)
    assert len(serial) == 1 and "one trial at a time" in serial[0]
    assert "does not exceed grace_period" in pruning_warnings("median", 6, 6, 2, 2, 2)[0]
    assert "compared with at least 3" in pruning_warnings("median", 3, 3, 12, 1, 2)[0]


def test_validate_options_for_campaign_validation():
    assert ray_options.validate_options({}) is None
    assert ray_options.validate_options({"scheduler": "asha"}) is None
    with socket_closed_port() as port:
        reason = ray_options.validate_options({"address": f"127.0.0.1:{port}"})
    assert reason.startswith(f"options.ray.address '127.0.0.1:{port}': no Ray cluster reachable")
    import socket

    with socket.socket() as server:  # something listening: reachable
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert ray_options.validate_options({"address": "127.0.0.1:%d" % server.getsockname()[1]}) \
            is None


@pytest.mark.parametrize("options, expected", [
    ({"scheduler": "ashaa"}, "did you mean 'asha'"),
    ({"scheduler": ["fifo", "pbt"]}, "got 'pbt'"),
    ({"max_parallel": 0}, "key 'max_parallel' must be a number >= 1"),
    ({"reduction_factor": 1}, "key 'reduction_factor' must be a number >= 2"),
    ({"adress": "x:1"}, "adress"),
])
def test_campaign_refuses_bad_ray_options(options, expected):
    from engine.define.campaign import parse_campaign
    from engine.errors import ConfigError

    doc = {"experiments": "D_hpo", "executors": ["ray"], "options": {"ray": options}}
    with pytest.raises(ConfigError) as info:
        parse_campaign(doc, "c.toml")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_runtime_that_fails_to_start_leaves_no_folder_or_record(tmp_path, monkeypatch):
    import ray

    def broken_init(**kwargs):
        raise RuntimeError("raylet failed to start\nmore detail")

    monkeypatch.setattr(ray, "init", broken_init)
    before = set(Path("/tmp").glob("fr-*"))
    with pytest.raises(FugueError) as info:
        raytools.start_runtime(attempt_dir=tmp_path, num_cpus=1, num_gpus=0)
    assert str(info.value) == ("ray: the runtime did not start: RuntimeError: raylet failed "
                               "to start")
    assert set(Path("/tmp").glob("fr-*")) <= before
    assert not list((tmp_path / "cleanup").glob("*.json"))
    assert raytools.TAG_ENV not in os.environ
