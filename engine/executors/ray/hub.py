"""The hub: one actor per cell, the cell's mailbox and the Ray Tune start gate.

Torch-free on purpose: the hub's process imports this module and nothing heavier (an actor
class defined in a module that imports torch makes its process import torch, a second of
CPU taken from the actors starting beside it on a small host).
"""

from __future__ import annotations

import asyncio


class Hub:
    """The cell's mailbox and the Tune start gate: one asynchronous actor that takes no CPU
    (it must never compete with the jobs for a slot), one process for both.

    Workers :meth:`put` messages (``(kind, job_id, payload)``, ``engine.executors.ray.worker``);
    the cell takes everything waiting in one call (:meth:`take`). Pre-warmed Tune actors wait in
    :meth:`wait_open` until the cell opens the group window (:meth:`open`).
    """

    def __init__(self) -> None:
        self._items: list[tuple] = []
        self._open = asyncio.Event()

    async def put(self, item: tuple) -> None:
        self._items.append(item)

    async def take(self) -> list[tuple]:
        items, self._items = self._items, []
        return items

    async def open(self) -> None:
        self._open.set()

    async def wait_open(self) -> None:
        await self._open.wait()
