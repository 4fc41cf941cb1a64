"""The runner's last steps, which must never hide why it stopped (issue 43).

A read-only remount or a full disk fails the write that stops the campaign, and then the
runner's own cleanup (``runner.pid``'s removal) fails the same way. Python's ``finally``
would let that second error replace the first (the user read "runner.pid: Read-only file
system", no row, no event) and skip the releases after it (the guard, the campaign
lock). :func:`release_all` runs every release, each on its own; :func:`exit_code_of` gives
``campaign_done`` the exit status the runner's process will end with.

Torch-free.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from engine.cell.protocol import output_failure
from engine.errors import FugueError, OutputError


def release_all(steps: Sequence[tuple[str, Callable[[], object]]],
                first: BaseException | None) -> None:
    """Run every ``(name, step)`` in order, whatever the ones before did.

    ``first`` is the error that is ending the run (None: it ends normally). A step that
    fails is never raised: with ``first`` it is a consequence of it (the same disk), and
    ``first`` is the error told; without it, one ``warning`` line on stderr names the step
    and why (the campaign's outcome stands: the next runner finds a stale ``runner.pid``
    and the free lock, and takes over)."""
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - every release runs; the first error wins
            if first is None:
                reason = output_failure(exc) or f"{type(exc).__name__}: {exc}"
                print(f"fugue-tui: warning: the runner's cleanup ({name}) failed: {reason}",
                      file=sys.stderr)


def exit_code_of(stopped: BaseException | None, campaign_code: int) -> int:
    """The exit status of the runner's process (``python -m engine.runner``) when
    ``stopped`` ended the campaign (None: the campaign's own ``campaign_code``): a
    :class:`FugueError`'s code; an ``OSError`` that means unwritable output, 2 (as
    ``engine.runner.cli`` reports it); anything else, 1 (an uncaught exception)."""
    if stopped is None:
        return campaign_code
    if isinstance(stopped, FugueError):
        return stopped.exit_code
    if output_failure(stopped) is not None:
        return OutputError.exit_code
    return 1
