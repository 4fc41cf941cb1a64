"""The scheduler names of ``[options.ray]`` and its campaign-time checks: torch-free and Ray-free, so that the
campaign's validation (``engine.define.campaign``) can refuse a bad cluster address before
anything is written, without importing the runtime module."""

from __future__ import annotations

import socket
from typing import Any

from engine.errors import FugueError

#: Ray Tune's own trial schedulers, ``fifo`` first (no early stopping: the comparison with
#: seq); ``engine.executors.ray.tune.make_scheduler`` builds each. Declared here, torch- and
#: Ray-free, so that the options' declaration, the docs and the benches read one list.
TUNE_SCHEDULERS = ("fifo", "asha", "median", "hyperband")
#: ray's ``scheduler`` choices: Tune's, then ``sha`` (rung-synchronous, decided by the cell).
RAY_SCHEDULERS = (*TUNE_SCHEDULERS, "sha")

#: Seconds to wait for a TCP connection to an existing cluster before calling it unreachable.
CONNECT_TIMEOUT_S = 3.0


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``ray://host:port`` → ``(host, port)``.

    Raises:
        FugueError: not of that form (one line naming the value).
    """
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    # ASCII decimal only: str.isdigit() accepts "²" (int() then raises) and "١"
    if (not sep or not host or not (port.isascii() and port.isdigit())
            or not 0 < int(port) < 65536):
        raise FugueError(f"options.ray.address must be host:port or ray://host:port, "
                         f"got {address!r}")
    return host.strip("[]"), int(port)


def check_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Return ``None`` when a TCP connection to ``address`` opens within ``timeout``
    seconds, else a one-line reason. Cheap and Ray-free: meant for campaign validation,
    before anything is written, as well as before ``ray.init`` (which would retry for a
    long time).

    Raises:
        FugueError: the address is malformed.
    """
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return (f"options.ray.address {address!r}: no Ray cluster reachable "
                f"({exc.strerror or type(exc).__name__}, waited {timeout:g} s)")


def validate_options(options: dict[str, Any]) -> str | None:
    """Campaign-time check of ``[options.ray]`` that needs the network: ``None``, or a
    one-line reason when ``address`` is set and nothing answers there (meant to be called
    by campaign validation, so a bad address fails before anything is written).

    Raises:
        FugueError: a malformed address.
    """
    address = options.get("address")
    return check_address(address) if address else None


def campaign_check(options: dict[str, Any]) -> tuple[str, str] | None:
    """:attr:`ExecutorSpec.options_check` of ray: ``("devices", reason)`` for a packing
    that cannot be resolved here or is combined with ``address`` (a cluster places its
    actors itself), ``("address", reason)`` when an address is set and no cluster answers
    there, else None.

    Raises:
        FugueError: a malformed address.
    """
    if options.get("devices") is not None and options.get("address"):
        return ("devices", "packs the GPUs of the private local runtime; with address the "
                           "cluster places the actors (leave one of them out)")
    from engine.executors.packing import campaign_check as packing_check

    found = packing_check(options)
    if found:
        return found
    reason = validate_options(options)
    return ("address", reason) if reason else None
