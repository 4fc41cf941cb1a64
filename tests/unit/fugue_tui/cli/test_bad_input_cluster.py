"""Bad ``cluster`` input (issue 28) ends like every bad input: one line naming the file,
key and value, exit 2, nothing written (rows of tests/unit/fugue_tui/cli/test_bad_input_matrix.py, run by
its own check). None of these needs a running cluster: the form of each key and the keys
that go together are checked while the campaign is read, an address where nothing answers
by a TCP connect (port 1 of this host refuses at once), and ``cluster = "local"`` plans on
this host's own resources (no GPU here) without starting Ray. The rows that need real
nodes (a ``gpu`` model no node has, a cell no node can hold) are in
tests/e2e/test_cluster.py, against the shared multi-node cluster."""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

_E = 'experiments = "D_ens"\n'

CASES = [
    matrix._batch(_E + 'cluster = "127.0.0.1:1"\ndevice = "cpu"\ncpus_per_cell = 1\n',
                  "key 'cluster'", "no Ray cluster reachable at '127.0.0.1:1'",
                  id="cluster-unreachable"),
    matrix._batch(_E + 'cluster = "nowhere"\n', "key 'cluster'", "'nowhere'",
                  "host:port", id="cluster-not-an-address"),
    matrix._batch(_E + 'cluster = "local"\ndevice = "cpu"\n', "key 'cluster'",
                  "cpus_per_cell", id="cluster-cpu-without-cpus"),
    matrix._batch(_E + 'cluster = "local"\ndevices = "cpu"\n', "key 'cluster'",
                  "cpus_per_cell", id="cluster-devices-cpu-without-cpus"),
    matrix._batch(_E + 'gpu = "L4"\n', "key 'gpu'", "cluster", id="gpu-without-cluster"),
    matrix._batch(_E + 'cpus_per_cell = 2\n', "key 'cpus_per_cell'", "cluster",
                  id="cpus-per-cell-without-cluster"),
    matrix._batch(_E + 'cluster = "local"\ndevices = ["cuda:0", "cuda:1"]\n',
                  "key 'devices'", "with a cluster", id="cluster-with-devices"),
    matrix._batch(_E + 'cluster = "local"\ndevice = "cuda:1"\n', "key 'device'",
                  "'cuda:1'", id="cluster-with-a-cuda-index"),
    matrix._batch(_E + 'cluster = "local"\ndevice = "cpu"\ncpus_per_cell = 1\ngpu = "L4"\n',
                  "key 'gpu'", "device = \"cpu\"", id="cluster-gpu-on-cpu"),
    matrix._batch(_E + 'cluster = "local"\ndevice = "cpu"\ncpus_per_cell = 0\n',
                  "key 'cpus_per_cell'", ">= 1", id="cluster-cpus-zero"),
    matrix._batch(_E + 'cluster = "local"\ngpu = "L 4"\n', "key 'gpu'", "'L 4'",
                  id="cluster-gpu-not-a-model"),
    # planned on this host's own resources (cluster = "local": no Ray started to say so)
    matrix._batch(_E + 'cluster = "local"\ngpu = "L4"\n', "key 'gpu'",
                  "no node of cluster 'local' has GPU model 'L4'", id="cluster-local-gpu-absent"),
    matrix._batch(_E + 'cluster = "local"\ndevice = "cpu"\ncpus_per_cell = 4096\n',
                  "key 'cpus_per_cell'", "can ever hold a cell", id="cluster-local-too-big"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_cluster(tmp_path, case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
