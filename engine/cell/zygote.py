"""The zygote: a pre-warmed parent that forks every cell of one runner.

``python -m engine.cell --zygote FD`` (:mod:`engine.cell.__main__`). A cell's fixed cost was
mostly its imports (torch and ``torch._dynamo``, 4-5 s on a small host); the zygote pays them
once per runner and forks each cell from that state, so a cell starts in a fraction of a
second. Its runner (:mod:`engine.runner.zygote`) starts it with the cells' environment and
one end of a ``SOCK_SEQPACKET`` socket (FD), waits for its ``ready`` message, and then asks
it for one cell at a time (:func:`serve`). The zygote belongs to that runner alone (one
campaign: its plugins, threads and device), dies with it (its parent-death signal), and
falls back to nothing: when it cannot start or dies, the runner starts cells the old way.

What the zygote holds, and what it must never do (each checked before every fork,
:func:`fork_problem`):

* it has imported what every cell imports before anything of its own
  (:func:`engine.cell.main.preload`: torch, ``torch._dynamo``, the engine's cell modules);
  every module a cell imports later (an executor, a dataset loader, a model, TorchInductor
  on a first compile) is imported by the cell, in the phase it always was;
* it never ran a tensor operation (no allocation a cell could inherit, no OpenMP or intra-op
  thread pool), and it runs
  no thread at all (``/proc/self/task`` holds one entry): a fork copies only the forking
  thread, and a lock another thread held would stay locked in the child forever;
* it never initialised CUDA (``torch.cuda.is_initialized()`` is False): a CUDA context does
  not survive a fork, and each cell reads ``CUDA_VISIBLE_DEVICES`` itself;
* it loaded no plugin: each cell loads the campaign's plugins itself, as before.

Each cell is forked twice (zygote → intermediate → cell) so that the intermediate's exit
hands the cell to the runner, which makes itself a child subreaper for that moment: the cell
is then the *runner's* child, exactly as a spawned one (the runner waits for it, reads its
exit status, and it dies with the runner through its own parent-death signal). In the cell,
before any code of its own runs (:func:`_become_cell`): a new session (``setsid``), stdin
from ``/dev/null``, stdout and stderr to the log the runner opened (passed as a descriptor),
the zygote's socket closed (it holds no other descriptor), the environment replaced by the
cell's (its TorchInductor/Triton cache folders, ``CUDA_VISIBLE_DEVICES``, thread counts,
stack-dump folder), the working folder, ``sys.argv`` and the title (``ps``) of ``python -m
engine.cell SPEC``, and the random state of a fresh process (torch's default CPU
generator, numpy's global generator and Python's ``random`` seeded from the OS, as each is
at a fresh start). Then the cell waits for the runner's go (sent once the runner has checked
that it adopted the cell and recorded it in ``cell.pid``), asks for its parent-death signal,
and runs as ``python -m engine.cell SPEC``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import random
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from engine.cell.protocol import receive_message, send_message
from engine.processes import set_death_signal

#: Seconds the intermediate waits for the cell's new session before giving up on it.
SESSION_TIMEOUT_S = 10.0


def warm() -> dict[str, Any]:
    """Import what every cell imports first (:func:`engine.cell.main.preload`); return the
    facts of the ``ready`` message."""
    t0 = time.perf_counter()
    from engine.cell.main import preload

    preload()
    return {"imports_s": round(time.perf_counter() - t0, 3)}


def os_threads() -> list[str]:
    """This process's threads as the kernel sees them (``/proc/self/task``): their names."""
    out = []
    for tid in sorted(os.listdir("/proc/self/task")):
        try:
            out.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:
            out.append("?")
    return out


def fork_problem() -> str:
    """Why this process must not fork a cell now ("" when it may): a thread besides the
    main one (Python's or native), or a CUDA context."""
    threads = os_threads()
    if len(threads) != 1 or threading.active_count() != 1:
        return (f"the zygote runs {len(threads)} threads ({', '.join(threads)}; Python "
                f"threads: {threading.active_count()}): a fork copies only one")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the zygote initialised CUDA: a CUDA context does not survive a fork"
    return ""


def _settle() -> None:
    """Stop the thread pools that imports start, before the first cell's fork.

    numpy's OpenBLAS starts its worker threads when it is loaded (one less than its thread
    count) and stops them in a ``pthread_atfork`` handler before every fork, starting them
    again on its next call, which the zygote never makes. One throw-away fork runs that
    handler once: from then on the zygote runs one thread, and :func:`fork_problem` can
    insist on it before each cell's fork."""
    if len(os_threads()) == 1:
        return
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 2.0
    while len(os_threads()) > 1 and time.monotonic() < deadline:
        time.sleep(0.001)  # a joined thread's kernel task can linger a moment after the join


def serve(argv: list[str]) -> list[str]:
    """Be the zygote on the socket whose descriptor ``argv[0]`` is. Runs until the runner
    closes its end (then exits); returns only in a forked cell, with the cell's own
    arguments (its spec path), for the caller to run as ``python -m engine.cell`` would."""
    _ZYGOTE_PID[0] = os.getpid()
    sock = socket.socket(fileno=int(argv[0]))
    os.set_inheritable(sock.fileno(), False)
    faulthandler.enable()  # a crash of the zygote itself, in zygote.log
    try:
        facts = warm()
        _settle()
        problem = fork_problem()
    except BaseException as exc:  # noqa: BLE001 - the runner must hear why, then spawns
        traceback.print_exc()
        problem = f"the zygote could not import what cells use: {type(exc).__name__}: {exc}"
    if problem:
        with contextlib.suppress(OSError):
            send_message(sock, {"error": problem})
        print(f"fugue-tui zygote: {problem}", file=sys.stderr, flush=True)
        os._exit(1)
    send_message(sock, {"ready": True, "pid": os.getpid(), "threads": len(os_threads()),
                        "python_threads": threading.active_count(),
                        "cuda_initialized": sys.modules["torch"].cuda.is_initialized(),
                        **facts})
    while True:
        try:
            doc, fds = receive_message(sock)
        except OSError as exc:  # one bad message: say so, keep serving
            with contextlib.suppress(OSError):
                send_message(sock, {"error": f"bad request: {exc}"})
            continue
        if doc is None:  # the runner closed its end, or died: nothing more to do
            os._exit(0)
        reply = _fork_cell(sock, doc, fds)
        if isinstance(reply, list):  # in the cell
            return reply
        try:
            send_message(sock, reply)
        except OSError:
            os._exit(0)


def _fork_cell(sock: socket.socket, doc: dict[str, Any], fds: list[int]
               ) -> dict[str, Any] | list[str]:
    """Fork the cell a ``start`` request describes: in the zygote, the reply for the
    runner (``{"pid": N}`` or ``{"error": ...}``); in the cell, its arguments."""
    try:
        if doc.get("op") != "start" or len(fds) != 2:
            return {"error": f"bad request {doc.get('op')!r} with {len(fds)} descriptors"}
        problem = fork_problem()
        if problem:
            return {"error": problem}
        log_fd, go_fd = fds
        report_r, report_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing of the zygote's output twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the intermediate, then (returning) the cell
            try:
                os.close(report_r)
                return _intermediate(sock, doc, log_fd, go_fd, report_w)
            except BaseException:  # noqa: BLE001 - never back into the zygote's loop
                with contextlib.suppress(Exception):
                    traceback.print_exc()
                os._exit(1)
        os.close(report_w)
        chunks = []
        while chunk := os.read(report_r, 256):  # EOF: the intermediate has exited
            chunks.append(chunk)
        os.close(report_r)
        os.waitpid(pid, 0)
        report = b"".join(chunks).decode(errors="replace").strip()
        if not report.isdigit():
            return {"error": f"the cell was not forked: {report or 'no report'}"}
        return {"pid": int(report)}
    except OSError as exc:
        return {"error": f"fork failed: {exc}"}
    finally:
        if os.getpid() == _ZYGOTE_PID[0]:  # not in the cell, which closed its copies
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


#: The zygote's own pid (set by :func:`serve`): the process that closes a request's
#: descriptors once the cell has its copies.
_ZYGOTE_PID = [0]


def _intermediate(sock: socket.socket, doc: dict[str, Any], log_fd: int, go_fd: int,
                  report_w: int) -> list[str]:
    """Fork the cell, wait for its new session, report its pid to the zygote and exit:
    the exit re-parents the cell to the runner (a child subreaper just then)."""
    try:
        cell = os.fork()
    except OSError as exc:
        os.write(report_w, f"fork: {exc}".encode())
        os._exit(1)
    if cell == 0:
        os.close(report_w)
        return _become_cell(sock, doc, log_fd, go_fd)
    deadline = time.monotonic() + SESSION_TIMEOUT_S
    report = f"no session of its own within {SESSION_TIMEOUT_S:g} s"
    while time.monotonic() < deadline:
        try:
            if os.getsid(cell) == cell:  # the runner will find it by its session
                report = str(cell)
                break
        except ProcessLookupError:
            break
        if os.waitpid(cell, os.WNOHANG)[0]:
            report = "it exited before its session existed"
            break
        time.sleep(0.0005)
    os.write(report_w, report.encode())
    os._exit(0)


def _become_cell(sock: socket.socket, doc: dict[str, Any], log_fd: int, go_fd: int
                 ) -> list[str]:
    """Make this forked process what ``python -m engine.cell SPEC`` started by the runner
    would be (the module docstring lists each step and why); return ``[SPEC]``."""
    try:
        os.setsid()
        sock.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        # before the environment is cleared: setproctitle finds the argument strings from
        # the C environ's first entry, which clear() empties (the title would stay the
        # zygote's)
        _retitle([sys.executable, "-m", "engine.cell", *doc["argv"]])
        os.environ.clear()
        os.environ.update(doc["env"])
        os.chdir(doc["cwd"])
        sys.argv = [_main_path(), *doc["argv"]]
        _fresh_random_state()
        _fresh_signals()
        go = os.read(go_fd, 1)  # the runner adopted and recorded this process (or gave up)
        os.close(go_fd)
        if go != b"g":
            os._exit(1)
        set_death_signal(signal.SIGKILL)
        if os.getppid() != doc["runner_pid"]:  # the runner died before it could be asked
            os._exit(1)
        return list(doc["argv"])
    except BaseException:  # noqa: BLE001 - this process is no zygote: it must end here
        with contextlib.suppress(Exception):
            traceback.print_exc()
        os._exit(1)


def _retitle(words: list[str]) -> None:
    """Show this process as ``words`` in ps and ``/proc/PID/cmdline``, as a spawned cell
    shows its command line (else every cell would show the zygote's), through the
    ``setproctitle`` package: it overwrites the original argument strings (the zygote's
    command line keeps :data:`~engine.cell.protocol.TITLE_ROOM` bytes of room for it).
    ``SPT_NOENV`` keeps it off the environment strings (``/proc/PID/environ`` stays the
    cell's, which the Ray and cleanup checks read); the thread name (``comm``, which
    setproctitle also sets) is put back, as a spawned cell keeps its interpreter's name.
    Where anything fails, the title stays the zygote's: the title is cosmetic."""
    try:
        comm = Path("/proc/self/comm").read_text().strip()
    except OSError:
        comm = ""
    had = os.environ.get("SPT_NOENV")
    os.environ["SPT_NOENV"] = "1"  # read by setproctitle's first call
    try:
        import setproctitle

        setproctitle.setproctitle(" ".join(words))
        if comm:
            setproctitle.setthreadtitle(comm)
    except (ImportError, OSError, ValueError):
        return
    finally:
        if had is None:
            os.environ.pop("SPT_NOENV", None)
        else:
            os.environ["SPT_NOENV"] = had


def _main_path() -> str:
    return str(Path(__file__).resolve().with_name("__main__.py"))


def _fresh_signals() -> None:
    """Signal dispositions as a fresh interpreter has them (Ctrl-C raises
    KeyboardInterrupt, SIGPIPE and SIGXFSZ ignored, the rest at their defaults)."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGCHLD, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _fresh_random_state() -> None:
    """Every random generator a fresh process seeds from the OS, seeded from the OS again:
    torch's default CPU generator (torch seeds it nondeterministically at import), numpy's
    global one and Python's ``random``; forked, each would otherwise repeat the zygote's
    sequence in every cell. (Each job seeds torch's generator itself; this keeps what
    runs before it, a plugin's draws say, from being the same in every cell.) CUDA's
    generators do not exist yet: they start in the cell as in a fresh process."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.random.default_generator.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    random.seed()
