"""The campaign's ``cluster`` keys (issue 28): a campaign whose cells run as Ray actors on
the nodes of a Ray cluster. Checked here without Ray (the form of each value, the keys
that go together, whether anything answers at the address); what the cluster's nodes
offer (a GPU model the ``gpu`` selector names, room for one cell) is decided when the
runner plans (:mod:`engine.cluster.head`), before anything is written. Torch-free.

::

    cluster = "10.0.0.5:6379"   # a running cluster's GCS address (or ray://host:port),
                                # or "local": a cluster started on this host for the campaign
    gpu = "L4"                  # only nodes with this GPU model (Ray's accelerator_type)
    cpus_per_cell = 2           # the CPUs each cell holds on its node (required for a
                                # CPU campaign: devices = "cpu"); GPU cells hold one GPU
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

#: Seconds to wait for a TCP connection to the cluster's address before calling it
#: unreachable (Ray's own connect would retry for a minute).
CONNECT_TIMEOUT_S = 3.0
#: A GPU model as Ray names it in its ``accelerator_type:<model>`` resource.
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass(frozen=True)
class ClusterSettings:
    """``cluster``, ``gpu`` and ``cpus_per_cell`` as checked (empty/0: not set)."""

    address: str          # "local" or host:port / ray://host:port
    gpu: str = ""
    cpus_per_cell: int = 0

    @property
    def local(self) -> bool:
        return self.address == "local"

    def resolved(self) -> dict[str, Any]:
        return {"cluster": self.address, **({"gpu": self.gpu} if self.gpu else {}),
                **({"cpus_per_cell": self.cpus_per_cell} if self.cpus_per_cell else {})}


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``ray://host:port`` → ``(host, port)``; None-free, raises ValueError."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    # ASCII decimal only: str.isdigit() accepts "١" (an Arabic-Indic 1: port 1)
    if (not sep or not host or not (port.isascii() and port.isdigit())
            or not 0 < int(port) < 65536):
        raise ValueError(address)
    return host.strip("[]"), int(port)


def reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when a TCP connection to ``address`` opens within ``timeout`` s, else why not."""
    try:
        with socket.create_connection(parse_address(address), timeout=timeout):
            return None
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__}, waited {timeout:g} s"


def parse_cluster(doc: dict[str, Any], device: str, devices: tuple[str, ...],
                  at) -> ClusterSettings | None:
    """The cluster keys of a campaign table (``at(key)``: where that key's value came from).
    None when ``cluster`` is not set.

    Raises:
        ConfigError: ``gpu`` or ``cpus_per_cell`` without ``cluster``; an address of
            neither form or one where nothing answers; a ``devices`` list or a ``cuda:N``
            device with a cluster (Ray assigns each cell its GPU); ``gpu`` with a CPU
            campaign; a CPU campaign without ``cpus_per_cell``; a count below 1.
    """
    address = doc.get("cluster")
    if address is None:
        for key in ("gpu", "cpus_per_cell"):
            if key in doc:
                raise ConfigError(f"{at(key)}: key '{key}' applies to a campaign on a Ray "
                                  "cluster: set cluster = \"<address>\" or \"local\" too")
        return None
    where = f"{at('cluster')}: key 'cluster'"
    if address != "local":
        try:
            parse_address(address)
        except ValueError:
            raise ConfigError(f"{where} must be \"local\", host:port or ray://host:port (the "
                              f"cluster's GCS address), got {address!r}") from None
        why = reachable(address)
        if why:
            raise ConfigError(f"{where}: no Ray cluster reachable at {address!r} ({why}); "
                              "start it (ray start --head) or use cluster = \"local\"")
    if devices:
        raise ConfigError(f"{at('devices')}: key 'devices' with a cluster: Ray gives each "
                          "cell one GPU of its node (devices = \"cpu\" for a CPU campaign, "
                          "gpu = \"MODEL\" to choose the model), leave devices out")
    if device.startswith("cuda:"):
        raise ConfigError(f"{at('device')}: key 'device' {device!r} with a cluster: Ray "
                          "gives each cell one GPU of its node; use device = \"cuda\" or "
                          "\"auto\" (gpu = \"MODEL\" to choose the model)")
    gpu = doc.get("gpu", "")
    if "gpu" in doc and not _MODEL.match(gpu):
        raise ConfigError(f"{at('gpu')}: key 'gpu' must be a GPU model as Ray names it "
                          f"(e.g. \"L4\", \"A100\", \"H100\"), got {gpu!r}")
    cpus = doc.get("cpus_per_cell", 0)
    if "cpus_per_cell" in doc and cpus < 1:
        raise ConfigError(f"{at('cpus_per_cell')}: key 'cpus_per_cell' must be >= 1, got {cpus}")
    if device == "cpu":
        if gpu:
            raise ConfigError(f"{at('gpu')}: key 'gpu' selects a GPU model, but the campaign "
                              "runs on the CPU (device = \"cpu\"): leave one of them out")
        if not cpus:
            raise ConfigError(f"{where}: a CPU campaign on a cluster must declare the CPUs "
                              "each cell holds on its node: add cpus_per_cell = N (Ray "
                              "places cells by the resources they declare)")
    return ClusterSettings(address, gpu, cpus)
