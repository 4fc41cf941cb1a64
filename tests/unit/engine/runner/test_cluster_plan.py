"""Planning a campaign on a Ray cluster (issue 28) from the nodes' records, without Ray:
what a cell holds, how many cells a node holds, the key's machine part by node class (two
nodes of one class key alike whatever their names, so ``--resume`` after a node change
skips what already ran; another GPU model keys apart), and the refusals."""

from __future__ import annotations

import pytest

from engine.define.campaign import parse_campaign
from engine.errors import ConfigError
from engine.runner.agent import host_class, node_name
from engine.runner.cluster import ClusterHead


def _head(**doc) -> ClusterHead:
    campaign = parse_campaign({"experiments": "D_ens", "cluster": "local", **doc}, "c.toml")
    return ClusterHead(campaign.cluster, campaign)


def _node(cpus: float, gpus: float = 0, model: str = "", host: str = "n1",
          cpu_model: str = "Golden CPU", gpu_names: tuple[str, ...] = ()) -> dict:
    resources = {"CPU": cpus, "GPU": gpus, **({f"accelerator_type:{model}": 1.0} if model else {})}
    facts = {"host": host, "cpu_model": cpu_model, "cores": 8, "torch": "2.13.0",
             "gpus": list(gpu_names)}
    facts["host_class"] = host_class(facts)
    return {"NodeID": host, "Resources": resources, "facts": facts}


def test_a_cell_holds_its_cpus_or_one_gpu_of_the_model():
    assert _head(device="cpu", cpus_per_cell=2).need() == {"CPU": 2.0}
    assert _head(gpu="L4").need() == {"GPU": 1.0, "accelerator_type:L4": 0.001}
    cpu = _head(device="cpu", cpus_per_cell=2)
    assert [cpu.fits(_node(c)["Resources"]) for c in (1, 2, 5)] == [0, 1, 2]
    gpu = _head(gpu="L4")
    assert gpu.fits(_node(8, 4, "L4")["Resources"]) == 4
    assert gpu.fits(_node(8, 4, "T4")["Resources"]) == 0


def test_nodes_of_one_class_key_alike_and_another_gpu_model_apart():
    head = _head(gpu="L4")
    a = head.machine_identity(_node(8, 1, "L4", host="gpu-1", gpu_names=("NVIDIA L4",)))
    b = head.machine_identity(_node(8, 1, "L4", host="gpu-7", gpu_names=("NVIDIA L4",)))
    assert a == b and a["gpu_name"] == "NVIDIA L4" and a["cluster"] == "by-class"
    other = _head(gpu="T4").machine_identity(_node(8, 1, "T4", gpu_names=("Tesla T4",)))
    assert other["gpu_name"] != a["gpu_name"]
    slower = head.machine_identity(_node(8, 1, "L4", cpu_model="Other CPU",
                                         gpu_names=("NVIDIA L4",)))
    assert slower["host"] != a["host"]  # the host class is part of the key


def test_the_refusals_name_the_key_and_what_the_cluster_has():
    with pytest.raises(ConfigError, match=r"key 'gpu': .*'H100'.*models there: L4"):
        _head(gpu="H100")._refuse_unfit([_node(8, 1, "L4")])
    with pytest.raises(ConfigError, match=r"no node .* has a GPU"):
        _head()._refuse_unfit([_node(8)])
    with pytest.raises(ConfigError, match=r"key 'cpus_per_cell': .*largest node has 2 CPUs"):
        _head(device="cpu", cpus_per_cell=4)._refuse_unfit([_node(2), _node(1)])


def test_nodes_of_two_classes_are_refused(monkeypatch):
    head = _head(device="cpu", cpus_per_cell=1)
    head.settings = type(head.settings)("10.0.0.1:6379", "", 1)  # an address cluster
    nodes = [_node(2, host="a"), _node(2, host="b", cpu_model="Other CPU")]
    monkeypatch.setattr(head, "connect", lambda: None)
    monkeypatch.setattr(head, "close", lambda: None)
    monkeypatch.setattr(head, "nodes", lambda: [dict(n) for n in nodes])
    monkeypatch.setattr(head, "_probe", lambda fitting: [n["facts"] for n in fitting])
    with pytest.raises(ConfigError, match="2 classes"):
        head.plan()
    nodes[1] = _node(2, host="b")  # same class, another name: one class, 4 lanes
    machine, lanes = head.plan()
    assert lanes == 4 and machine["host"] == "Golden CPU x8"


def test_node_names_tell_nodes_of_one_host_apart():
    assert node_name("vm", "10.0.0.1/aa") != node_name("vm", "10.0.0.1/bb")
    assert node_name("vm", "10.0.0.1/aa").startswith("vm ")
