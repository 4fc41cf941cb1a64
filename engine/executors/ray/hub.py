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
        self._verdicts: dict[tuple[str, int], asyncio.Future] = {}

    def _future(self, job_id: str, rung: int) -> asyncio.Future:
        key = (job_id, rung)
        if key not in self._verdicts:
            self._verdicts[key] = asyncio.get_running_loop().create_future()
        return self._verdicts[key]

    async def decide(self, job_id: str, rung: int, verdict: str) -> None:
        """sha (issue 25): the cell's verdict for a trial at a rung, ``go`` or ``stop``."""
        future = self._future(job_id, rung)
        if not future.done():
            future.set_result(verdict)

    async def verdict(self, job_id: str, rung: int) -> str:
        """A trial waiting at a rung: the cell's verdict, once every trial reached it."""
        return await self._future(job_id, rung)

    async def put(self, item: tuple) -> None:
        self._items.append(item)

    async def take(self) -> list[tuple]:
        items, self._items = self._items, []
        return items

    async def open(self) -> None:
        self._open.set()

    async def wait_open(self) -> None:
        await self._open.wait()
