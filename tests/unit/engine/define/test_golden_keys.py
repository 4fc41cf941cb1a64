"""Golden cell keys: the contract with every result a user already has on disk.

A cell's ``key`` (resume), ``config_key`` (pooling across passes and campaigns),
``workload_key`` (a strategy's seq baseline) and its folder ``slug`` are pinned here for a
fixed synthetic machine, for each kind of campaign the product plans. A refactor must leave
every pinned value unchanged; a feature that adds an option, an axis or a column follows the
key rule in ``docs/measurement.md`` ("Cell keys") and adds its new variant as a new scenario
here — it never edits an existing one. The only re-pins are a default that changes what
runs (rule 2): the cells that ran the old default must get new keys, and a spelling newly
resolved to what it names (rule 3: one device by UUID is its ``cuda:N``, issue 46); each
lists itself in docs/measurement.md's re-pin table.

Adding a scenario: write it in ``SCENARIOS`` and run
``FUGUE_GOLDEN_ADD=1 pytest tests/unit/engine/define/test_golden_keys.py``: only scenarios missing from
``tests/fixtures/golden_keys.json`` are written; existing ones are never rewritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.define.workloads import (
    WORKLOADS,
    SplitSpec,
    base_fields,
    make_job,
    register_workload,
)
from engine.plugins import load_builtins

REPO = Path(__file__).resolve().parents[4]
GOLDEN = REPO / "tests" / "fixtures" / "golden_keys.json"
#: A fixed machine identity: keys must not depend on the host the tests run on.
MACHINE = {"host": "golden-host", "device": "cpu", "gpu_uuid": "", "gpu_name": "",
           "torch": "2.13.0"}


def _cells(campaign) -> list[dict[str, str]]:
    return [{"slug": c.slug, "key": c.key, "config_key": c.config_key,
             "workload_key": c.workload_key} for c in build_cells(campaign, MACHINE)]


def _from_text(tmp: Path, text: str, experiments: str | None = None) -> list[dict[str, str]]:
    if experiments is not None:
        (tmp / "mine.toml").write_text(experiments)
    path = tmp / "golden.toml"
    path.write_text(text)
    return _cells(load_campaign(path))


def quick(tmp: Path) -> list[dict[str, str]]:
    return _cells(load_campaign(REPO / "campaigns" / "quick.toml"))


def compile_both(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,D_cv"\n'
                           'executors = ["seq", "unified_model"]\ncompile = "both"\n'
                           'compile_mode = "reduce-overhead"\nthreads = 1\n')


def ray_schedulers(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo,D_ens"\nexecutors = ["seq", "ray"]\n'
                           'passes = 2\n[options.ray]\n'
                           'scheduler = ["fifo", "asha", "median", "hyperband"]\n'
                           'grace_period = 2\n')


def unified_ablation(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens"\nexecutors = ["unified_model"]\n'
                           'compile_mode = "max-autotune"\n'
                           '[options.unified_model]\nsweep = "ablation"\n')


def unified_features(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,D_reg"\n'
                           'executors = ["seq", "unified_model", "mp"]\nseed = 7\n'
                           '[options.unified_model]\nfeatures = "vf:1,s:0,fl:1"\n'
                           'max_parallel = 2\nretire = "mask"\n'
                           '[options.mp]\nmax_parallel = 3\nmps = "off"\n')


def experiments_file(tmp: Path) -> list[dict[str, str]]:
    mine = ('[experiments.D_ens]\nk = 3\nepochs = 2\n'
            '[experiments.U1]\ntype = "cv"\nmodel = "mlp"\ndataset = "wine"\nk = 3\n'
            'batch_size = 16\nepochs = 1\nlr = 0.01\n')
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,U1"\nexperiments_file = "mine.toml"\n'
                           'executors = ["seq", "unified_model"]\n', mine)


def save_models(tmp: Path) -> list[dict[str, str]]:
    """issue 50: ``experiments_file_override`` with ``save_models = "best"`` in the campaign
    and ``save_models = true`` in an experiment: which models are kept changes nothing
    measured, so no key (the test below: equal to that scenario's pinned keys)."""
    mine = ('[experiments.D_ens]\nk = 3\nepochs = 2\n'
            '[experiments.U1]\ntype = "cv"\nmodel = "mlp"\ndataset = "wine"\nk = 3\n'
            'batch_size = 16\nepochs = 1\nlr = 0.01\nsave_models = true\n')
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,U1"\nexperiments_file = "mine.toml"\n'
                           'executors = ["seq", "unified_model"]\nsave_models = "best"\n', mine)


def stream_poisson(tmp: Path) -> list[dict[str, str]]:
    """issue 51: a stream campaign (``arrivals``, a Poisson process over two templates):
    one stream cell per executor and pass, keyed by the stream's hash, its templates and
    its own seed once each (docs/measurement.md, "Cell keys"). The arrival times are
    numpy's PCG64 ``exponential`` draws rounded to the microsecond."""
    return _from_text(tmp, 'name = "g"\nexecutors = ["seq"]\npasses = 2\n'
                           'arrivals = { process = "poisson", rate = 4.0, count = 6, seed = 3, '
                           'mix = { D_ens = 2, D_reg = 1 } }\n')


def stream_trace(tmp: Path) -> list[dict[str, str]]:
    """issue 51: a stream campaign from a trace (times, templates, an override): no
    random draw at all, and no seed of its own in the key."""
    (tmp / "trace.csv").write_text("time_s,experiment,epochs\n0,D_ens,\n0.5,D_cv,1\n"
                                   "0.5,D_ens,2\n")
    return _from_text(tmp, 'name = "g"\nexecutors = ["seq"]\n'
                           'arrivals = { trace = "trace.csv" }\n')


def stream_mp(tmp: Path) -> list[dict[str, str]]:
    """issue 51: a stream served by seq and by mp (``max_parallel``): one workload key,
    mp's options in its own cells' keys as in a batch cell's."""
    return _from_text(tmp, 'name = "g"\nexecutors = ["seq", "mp"]\n'
                           'arrivals = { process = "poisson", rate = 2.0, count = 5, '
                           'mix = { D_ens = 1, D_cv = 1 } }\n[options.mp]\nmax_parallel = 2\n')


def stream_unified(tmp: Path) -> list[dict[str, str]]:
    """issue 52: a stream served by seq and by unified_model (dynamic stacking), with
    unified_model options: one workload key, the options in unified_model's cells' keys as
    in a batch cell's; serving a stream adds no key of its own."""
    return _from_text(tmp, 'name = "g"\nexecutors = ["seq", "unified_model"]\n'
                           'arrivals = { process = "poisson", rate = 3.0, count = 5, seed = 4, '
                           'mix = { D_ens = 2, D_reg = 1 } }\n[options.unified_model]\n'
                           'kernels = "exact"\nmax_parallel = 4\n')


def adhoc_run(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """``fugue-tui run --model mlp --dataset wine --type cv --k 3 ... --dry-run``, through the
    command's own code path up to the point where it hands the campaign to the runner."""
    import fugue_tui.console.batch
    from fugue_tui.cli import main

    seen: list[list[dict[str, str]]] = []

    def capture(path: str, overrides: dict[str, Any], **_: Any) -> int:
        seen.append(_cells(load_campaign(path, overrides)))
        return 0

    monkeypatch.setattr(fugue_tui.console.batch, "run_batch", capture)
    monkeypatch.chdir(tmp)
    assert main(["run", "--model", "mlp", "--dataset", "wine", "--type", "cv", "--k", "3",
                 "--epochs", "2", "--lr", "0.01", "--exec", "seq", "unified_model",
                 "--runs-dir", str(tmp / "runs"), "--dry-run"]) == 0
    assert len(seen) == 1
    return seen[0]


def _zz_golden_pairs(exp, seed):
    split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
    return [make_job(exp, f"{exp.id}_p{i}", i, seed,
                     {**base_fields(exp), "batch_size": exp.batch_size * (i + 1)}, split)
            for i in range(exp.k)]


def plugin_workload(tmp: Path) -> list[dict[str, str]]:
    """A workload type declared through the plugin API (``register_workload``)."""
    load_builtins()
    if "zz_golden_pairs" not in WORKLOADS:
        register_workload("zz_golden_pairs", description="golden-key test")(_zz_golden_pairs)
    mine = ('[experiments.P1]\ntype = "zz_golden_pairs"\nmodel = "mlp"\ndataset = "digits"\n'
            'k = 2\nbatch_size = 32\nepochs = 1\nlr = 0.05\n')
    return _from_text(tmp, 'name = "g"\nexperiments = "P1"\nexperiments_file = "mine.toml"\n'
                           'executors = ["seq", "unified_model", "ray"]\n', mine)


def mp_start_both(tmp: Path) -> list[dict[str, str]]:
    """mp's ``start`` (issue 20) at its legacy value and its new one, one cell each: the
    spawn cells must keep the keys a campaign without ``start`` had."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,D_hpo"\nexecutors = ["seq", "mp"]\n'
                           '[options.mp]\nstart = ["spawn", "forkserver"]\nmax_parallel = 2\n')


def mp_start_forkserver(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_reg"\nexecutors = ["mp"]\n'
                           'passes = 2\n[options.mp]\nstart = "forkserver"\nmps = "off"\n')


def ray_reuse_both(tmp: Path) -> list[dict[str, str]]:
    """ray's ``reuse_actors`` (issue 20) at its legacy value and its new one, one hpo cell
    each (and each scheduler): the false cells must keep the keys a campaign without the
    option had; D_ens (no Tune) runs once, keyed as before."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo,D_ens"\nexecutors = ["seq", "ray"]\n'
                           '[options.ray]\nreuse_actors = [false, true]\n'
                           'scheduler = ["fifo", "asha"]\nmax_parallel = 2\n')


def ray_reuse_true(tmp: Path) -> list[dict[str, str]]:
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo,D_cv"\nexecutors = ["ray"]\n'
                           'passes = 2\n[options.ray]\nreuse_actors = true\n')


def precision_axis(tmp: Path) -> list[dict[str, str]]:
    """The precision axis (issue 26), all five values: the fp32 cells of these amp-less
    experiments keep the keys a campaign without ``precision`` had."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,D_cv"\n'
                           'executors = ["seq", "unified_model"]\n'
                           'precision = ["fp32", "tf32", "amp-fp16", "amp-bf16", "bf16"]\n')


def precision_amp_synonym(tmp: Path) -> list[dict[str, str]]:
    """A campaign's ``amp = true`` (= ``amp-fp16``) over experiments without and with the
    catalogue's legacy ``amp = true`` (E05 and E01): hashed in both, since the legacy flag
    did not apply on the CPU."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_reg,E05,E01"\nexecutors = ["seq"]\n'
                           'amp = true\n')


def precision_experiment_default(tmp: Path) -> list[dict[str, str]]:
    """An experiment's own ``precision`` (its default, hashed with its definition) and a
    campaign axis over it: the value equal to the default adds nothing to the key."""
    mine = ('[experiments.D_ens]\nprecision = "bf16"\n'
            '[experiments.U2]\ntype = "cv"\nmodel = "mlp"\ndataset = "wine"\nk = 3\n'
            'batch_size = 16\nepochs = 1\nlr = 0.01\nprecision = "amp-bf16"\n')
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,U2"\nexperiments_file = "mine.toml"\n'
                           'executors = ["seq", "mp"]\nprecision = ["fp32", "bf16"]\n', mine)


def k_sweep(tmp: Path) -> list[dict[str, str]]:
    """issue 23: K swept over an ensemble, seq and unified_model, two passes."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens"\n'
                           'executors = ["seq", "unified_model"]\npasses = 2\n'
                           'k_sweep = [1, 2, 4, 8]\n')


def k_sweep_ablation(tmp: Path) -> list[dict[str, str]]:
    """issue 23: the K sweep combined with unified_model's ablation ladder."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_ens,D_reg"\n'
                           'executors = ["unified_model"]\nk_sweep = [1, 16]\n'
                           '[options.unified_model]\nsweep = "ablation"\n')


def hpo_sampled(tmp: Path) -> list[dict[str, str]]:
    """A sampled hpo search space (issue 25): distributions, a dotted key and
    ``num_samples``, under every executor; D_hpo (no ``num_samples``) keeps its keys."""
    mine = ('[experiments.S1]\ntype = "hpo"\nmodel = "mlp"\ndataset = "digits"\nepochs = 2\n'
            'search_space = { lr = { loguniform = [1e-4, 1e-1] }, batch_size = [32, 64], '
            'weight_decay = { uniform = [0, 1e-3] }, "model_kwargs.hidden" = '
            '{ randint = [16, 65] } }\nnum_samples = 3\n')
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo,S1"\nexperiments_file = "mine.toml"\n'
                           'executors = ["seq", "unified_model", "mp", "ray"]\n', mine)


def seq_schedulers(tmp: Path) -> list[dict[str, str]]:
    """seq's early-stopping schedulers (issue 25): the fifo cells keep the keys a campaign
    without the option had (legacy fifo is left out of the key); D_ens runs once."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo,D_ens"\nexecutors = ["seq"]\n'
                           '[options.seq]\nscheduler = ["fifo", "sha", "asha"]\n')


def unified_schedulers(tmp: Path) -> list[dict[str, str]]:
    """unified_model's early-stopping schedulers (issue 25): its fifo cell keeps the key of
    a campaign without the option (hpo_sampled's D_hpo unified cell)."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo"\n'
                           'executors = ["seq", "unified_model", "mp", "ray"]\n'
                           '[options.unified_model]\nscheduler = ["fifo", "sha", "median"]\n')


def mp_schedulers(tmp: Path) -> list[dict[str, str]]:
    """mp's early-stopping schedulers (issue 25): its fifo cell keeps the key of a campaign
    without the option (unified_schedulers' D_hpo mp cell)."""
    return _from_text(tmp, 'name = "g"\nexperiments = "D_hpo"\n'
                           'executors = ["seq", "unified_model", "mp", "ray"]\n'
                           '[options.mp]\nscheduler = ["fifo", "sha", "hyperband"]\n')
_AUTO_EXPERIMENTS = """
[experiments.G_wide]
type = "ensemble"
family = "offline"
description = "8 wide MLPs: max_parallel = auto has something to decide"
model = "mlp"
model_kwargs = { hidden = 4096 }
dataset = "digits"
k = 8
batch_size = 64
epochs = 1
lr = 0.01
optimizer = "sgd"
size = "small"
"""


def max_parallel_auto(tmp: Path) -> list[dict[str, str]]:
    """``max_parallel = "auto"`` (issue 24) with a profile of the golden machine (RSS(1) 500
    MiB, +100 MiB per member) and a 1000 MiB budget: unified_model resolves to 5 of 8, mp
    (forkserver: parent 400 + 150 per worker) to 2 (cores); the keys hash those numbers as
    if written, never "auto". G_cv has no profile: all of its jobs, keyed as all."""
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand
    from engine.profile.store import (
        append_profile,
        job_key,
        profile_id,
        torch_cuda_version,
    )

    (tmp / "mine.toml").write_text(_AUTO_EXPERIMENTS)
    job = expand(load_catalogue(str(tmp / "mine.toml")).get("G_wide"), 42)[0].to_dict()
    ident = {"host": MACHINE["host"], "device": "cpu", "gpu_name": "", "gpu_uuid": "",
             "torch": MACHINE["torch"], "cuda": torch_cuda_version()}
    key = job_key(job, "off", "cpu")
    append_profile(tmp / "runs", {
        "profile_id": profile_id(key, ident), "timestamp": "20261201_000000", **ident, **key,
        "ks": "1,2,4", "rss_mb": '{"1": 500, "2": 600, "4": 800}', "rss1_mb": 500,
        "rss_per_member_mb": 100, "parent_rss_mb": 400, "private1_mb": 150})
    return _from_text(tmp, f'name = "g"\nexperiments = "G_wide,D_ens"\n'
                           f'executors = ["seq", "unified_model", "mp"]\n'
                           f'experiments_file = "mine.toml"\nruns_dir = "{tmp / "runs"}"\n'
                           '[options.unified_model]\nmax_parallel = "auto"\n'
                           '[options.mp]\nmax_parallel = "auto"\n'
                           '[budget]\nram = "1000MiB"\ncores = 2\n')


def devices_by_model(tmp: Path) -> list[dict[str, str]]:
    """A multi-device campaign (issue 27): the machine part is host + GPU model
    (engine.measure.provenance.model_identity), never the UUID."""
    campaign = load_campaign(_write(tmp, 'name = "g"\nexperiments = "D_ens,D_cv"\n'
                                         'executors = ["seq", "mp"]\npasses = 2\n'
                                         'devices = ["cuda:0", "cuda:1"]\nthreads = 1\n'))
    machine = {"host": MACHINE["host"], "device": "cuda", "gpu_uuid": "",
               "gpu_name": "NVIDIA A100-SXM4-40GB", "torch": MACHINE["torch"],
               "devices": "by-model"}
    return [{"slug": c.slug, "key": c.key, "config_key": c.config_key,
             "workload_key": c.workload_key} for c in build_cells(campaign, machine)]


def _write(tmp: Path, text: str) -> Path:
    path = tmp / "golden.toml"
    path.write_text(text)
    return path
def mp_packing(tmp: Path) -> list[dict[str, str]]:
    """mp's ``devices`` (issue 27) on two fake H200s: the packed cell keys by the GPU models
    it resolves to; seq's key is the one it has without packing."""
    from tests.fixtures.fake_nvml import FakeDevice, FakeNVML
    from tests.unit.engine.executors.test_packing import fake_host

    nvml = FakeNVML([FakeDevice("GPU-golden-0", name="NVIDIA H200"),
                     FakeDevice("GPU-golden-1", name="NVIDIA H200")])
    with fake_host(nvml):
        return _from_text(tmp, 'name = "g"\nexperiments = "D_ens"\nexecutors = ["seq", "mp"]\n'
                               '[options.mp]\ndevices = ["cuda:0", "cuda:1"]\n'
                               'jobs_per_device = 2\n')


def ray_packing(tmp: Path) -> list[dict[str, str]]:
    """ray's ``devices`` (issue 27) on the same two fake H200s, as ``"auto"``."""
    from tests.fixtures.fake_nvml import FakeDevice, FakeNVML
    from tests.unit.engine.executors.test_packing import fake_host

    nvml = FakeNVML([FakeDevice("GPU-golden-0", name="NVIDIA H200"),
                     FakeDevice("GPU-golden-1", name="NVIDIA H200")])
    with fake_host(nvml):
        return _from_text(tmp, 'name = "g"\nexperiments = "D_ens"\nexecutors = ["seq", "ray"]\n'
                               '[options.ray]\ndevices = "auto"\n')


def _cluster(tmp: Path, text: str, node: dict) -> list[dict[str, str]]:
    """A campaign on a Ray cluster (issue 28): the machine part is the node's class as
    engine.runner.cluster.ClusterHead.machine_identity forms it from the node's facts."""
    from engine.runner.cluster import ClusterHead

    campaign = load_campaign(_write(tmp, text))
    machine = ClusterHead(campaign.cluster, campaign).machine_identity(node)
    return [{"slug": c.slug, "key": c.key, "config_key": c.config_key,
             "workload_key": c.workload_key} for c in build_cells(campaign, machine)]


_NODE_FACTS = {"host_class": "Golden CPU @ 2.00GHz x8", "torch": MACHINE["torch"],
               "host": "golden-node", "cores": 8}


def cluster_cpu(tmp: Path) -> list[dict[str, str]]:
    """A CPU campaign on a cluster: host class, torch and the CPUs each cell holds."""
    return _cluster(tmp, 'name = "g"\nexperiments = "D_ens,D_cv"\nexecutors = ["seq", "mp"]\n'
                         'device = "cpu"\ncluster = "local"\ncpus_per_cell = 2\n',
                    {"Resources": {"CPU": 8.0}, "facts": {**_NODE_FACTS, "gpus": []}})


def cluster_gpu_model(tmp: Path) -> list[dict[str, str]]:
    """A GPU campaign on a cluster restricted to L4 nodes: host class and GPU model."""
    return _cluster(tmp, 'name = "g"\nexperiments = "D_ens"\nexecutors = ["seq"]\n'
                         'cluster = "local"\ngpu = "L4"\n',
                    {"Resources": {"CPU": 8.0, "GPU": 1.0, "accelerator_type:L4": 1.0},
                     "facts": {**_NODE_FACTS, "gpus": ["NVIDIA L4"]}})


def _placed(tmp: Path, text: str, visible: str | None = None) -> list[dict[str, str]]:
    """Keys as the runner's placement forms them (``engine.runner.supervisor.placement_for``:
    the devices resolved through NVML, the machine part from them) on a fake host of two
    H200s and an A100 in MIG mode with two slices; host name and torch version pinned.
    ``visible``: an outer CUDA_VISIBLE_DEVICES."""
    from unittest import mock

    from engine.runner.supervisor import placement_for
    from tests.fixtures.fake_nvml import FakeDevice, FakeMigDevice, FakeMigGpu, FakeNVML
    from tests.unit.engine.executors.test_packing import fake_host

    nvml = FakeNVML([FakeDevice("GPU-golden-0", name="NVIDIA H200"),
                     FakeDevice("GPU-golden-1", name="NVIDIA H200"),
                     FakeMigGpu("GPU-golden-2", migs=[FakeMigDevice("MIG-golden-a"),
                                                      FakeMigDevice("MIG-golden-b")])])
    campaign = load_campaign(_write(tmp, 'name = "g"\nexperiments = "D_ens"\n'
                                         f'executors = ["seq", "mp"]\nthreads = 1\n{text}'))
    with fake_host(nvml, visible), \
            mock.patch("engine.measure.provenance.socket.gethostname",
                       return_value=MACHINE["host"]), \
            mock.patch("engine.measure.provenance.dist_version", return_value=MACHINE["torch"]):
        cells = placement_for(campaign, []).cells
    return [{"slug": c.slug, "key": c.key, "config_key": c.config_key,
             "workload_key": c.workload_key} for c in cells]


_MIGS_VISIBLE = "MIG-golden-a,MIG-golden-b"


def device_index(tmp: Path) -> list[dict[str, str]]:
    """``device = "cuda:1"`` (a whole card): the one-device key (host, cuda:1, its UUID)."""
    return _placed(tmp, 'device = "cuda:1"\n')


def devices_gpu_uuid(tmp: Path) -> list[dict[str, str]]:
    """``devices = ["GPU-<card 1>"]``: one device by its UUID (issue 46)."""
    return _placed(tmp, 'devices = ["GPU-golden-1"]\n')


def device_mig_index(tmp: Path) -> list[dict[str, str]]:
    """``device = "cuda:1"`` under an outer CUDA_VISIBLE_DEVICES of two MIG slices."""
    return _placed(tmp, 'device = "cuda:1"\n', _MIGS_VISIBLE)


def devices_mig_uuid(tmp: Path) -> list[dict[str, str]]:
    """``devices = ["MIG-<slice cuda:1 is>"]`` under the same outer CUDA_VISIBLE_DEVICES."""
    return _placed(tmp, 'devices = ["MIG-golden-b"]\n', _MIGS_VISIBLE)


def devices_two_placed(tmp: Path) -> list[dict[str, str]]:
    """Two devices, one by UUID and one by index: the by-model key (issue 27)."""
    return _placed(tmp, 'devices = ["GPU-golden-0", "cuda:1"]\n')


SCENARIOS: dict[str, Callable[..., list[dict[str, str]]]] = {
    "quick": quick,
    "compile_both": compile_both,
    "ray_schedulers": ray_schedulers,
    "unified_ablation": unified_ablation,
    "unified_features_max_parallel": unified_features,
    "experiments_file_override": experiments_file,
    "adhoc_run": adhoc_run,
    "plugin_workload": plugin_workload,
    "mp_start_both": mp_start_both,
    "mp_start_forkserver": mp_start_forkserver,
    "ray_reuse_both": ray_reuse_both,
    "ray_reuse_true": ray_reuse_true,
    "precision_axis": precision_axis,
    "precision_amp_synonym": precision_amp_synonym,
    "precision_experiment_default": precision_experiment_default,
    "k_sweep": k_sweep,
    "k_sweep_ablation": k_sweep_ablation,
    "hpo_sampled": hpo_sampled,
    "seq_schedulers": seq_schedulers,
    "unified_schedulers": unified_schedulers,
    "mp_schedulers": mp_schedulers,
    "max_parallel_auto": max_parallel_auto,
    "devices_by_model": devices_by_model,
    "mp_packing": mp_packing,
    "ray_packing": ray_packing,
    "cluster_cpu": cluster_cpu,
    "cluster_gpu_model": cluster_gpu_model,
    "device_index": device_index,
    "devices_gpu_uuid": devices_gpu_uuid,
    "device_mig_index": device_mig_index,
    "devices_mig_uuid": devices_mig_uuid,
    "devices_two_placed": devices_two_placed,
    "save_models": save_models,
    "stream_poisson": stream_poisson,
    "stream_trace": stream_trace,
    "stream_mp": stream_mp,
    "stream_unified": stream_unified,
}


def _compute(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    fn = SCENARIOS[name]
    return fn(tmp_path, monkeypatch) if name == "adhoc_run" else fn(tmp_path)


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_cell_keys_are_pinned(name, tmp_path, monkeypatch):
    got = _compute(name, tmp_path, monkeypatch)
    assert got, f"scenario {name} planned no cell"
    golden = _golden()
    if name not in golden and os.environ.get("FUGUE_GOLDEN_ADD") == "1":
        golden[name] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert name in golden, (f"scenario {name} has no golden keys: add them with "
                            "FUGUE_GOLDEN_ADD=1 (see the module docstring)")
    assert got == golden[name]


def test_golden_file_has_no_orphans():
    """Every pinned scenario is still computed: deleting a scenario would unpin its keys."""
    assert set(_golden()) == set(SCENARIOS)


def test_machine_identity_enters_the_key(tmp_path):
    """The fixed machine is part of each key: another torch build means other keys."""
    campaign = load_campaign(REPO / "campaigns" / "quick.toml")
    other = build_cells(campaign, {**MACHINE, "torch": "2.14.1"})
    pinned = _golden()["quick"]
    assert [c.key for c in other] != [c["key"] for c in pinned]
    # ... but not the configuration's own hashes, which pool across machines' passes
    assert [c.config_key for c in other] == [c["config_key"] for c in pinned]


def test_csv_headers_are_pinned():
    """The two results files' headers, byte for byte (``tests/fixtures/golden_headers.csv``:
    groups then individual). A new column is appended at the end of its file's order: the
    pinned header must stay a prefix of the current one."""
    from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS

    groups, individual = (REPO / "tests" / "fixtures" / "golden_headers.csv").read_text().splitlines()
    for pinned, now in ((groups.split(","), GROUP_COLUMNS), (individual.split(","), INDIVIDUAL_COLUMNS)):
        assert list(now[:len(pinned)]) == pinned


def test_one_device_spellings_share_the_pinned_cuda_index_keys():
    """Issue 46: one device by its UUID is pinned with exactly the keys of the ``cuda:N`` it
    is (card and MIG slice); a two-device list keeps the by-model keys (rule 3)."""
    golden = _golden()
    assert golden["devices_gpu_uuid"] == golden["device_index"]
    assert golden["devices_mig_uuid"] == golden["device_mig_index"]
    assert {c["key"] for c in golden["devices_two_placed"]}.isdisjoint(
        c["key"] for c in golden["device_index"])


def test_save_models_changes_no_key():
    """Issue 50: ``save_models`` (campaign and experiment key) is pinned with exactly the
    keys of the same campaign without it: it is no part of any key (docs/measurement.md)."""
    golden = _golden()
    assert golden["save_models"] == golden["experiments_file_override"]
