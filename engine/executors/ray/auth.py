"""Which Ray authentication token a runtime or a connection uses (Ray's token auth).

Ray 2.60 turns token authentication on for every new local runtime ``ray.init()`` starts
and, when no token is configured, writes a new one to ``~/.ray/auth_token``. From then on
the user's own ``ray start --head`` finds that file and turns authentication on for the
user's cluster too, and a driver connecting to it by address (Ray never turns
authentication on for an explicit address) is refused with 20 s of ``InvalidAuthToken``
lines. A benchmark that starts runtimes must not change the user's Ray that way, so:

- every private runtime (one per ``ray`` cell; ``cluster = "local"``) gets a token of its
  own, generated into its temporary folder, and starts with ``RAY_AUTH_MODE=token`` and
  ``RAY_AUTH_TOKEN_PATH`` naming that file (:func:`private_env`): nothing is written to
  the home folder, and a runtime that listens on a port never runs without authentication;
- a connection to the user's cluster uses the user's token, found in Ray's documented order
  (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``: :func:`user_token`),
  when the cluster wants one (a driver in token mode on a cluster without authentication
  could not create its actors with Ray 2.60: "SchedulingCancelled"), and a cluster that refuses it, or wants one where there is
  none, is one line naming ``ray get-auth-token`` (:func:`use_user_token`) before
  ``ray.init`` would retry for 20 s.

Torch-free; ``ray`` is imported only inside the functions that talk to it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path

from engine.errors import FugueError

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
#: The token file's name, in a private runtime's temporary folder and in ``~/.ray``.
TOKEN_FILE = "auth_token"
#: What the one-line errors tell the user to run (on the cluster's head node).
GET_TOKEN = "`ray get-auth-token`"
#: Where :func:`user_token` looks, in Ray's order (for the messages).
LOOKUP = f"{TOKEN_ENV}, {PATH_ENV}, ~/.ray/{TOKEN_FILE}"


def private_env(folder: str | Path) -> dict[str, str | None]:
    """Generate a new token into ``folder/auth_token`` (mode 0600; 256 random bits, as
    ``ray get-auth-token --generate`` makes one) and return the environment a private
    runtime starts with: token authentication on, the token read from that file, and any
    ``RAY_AUTH_TOKEN`` of the user's removed (None), since it would take precedence.

    Raises:
        FugueError: the file cannot be written (names it).
    """
    path = Path(folder) / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
    except OSError as exc:
        raise FugueError(f"ray: cannot write the runtime's token {path}: "
                         f"{exc.strerror or exc}") from None
    return {MODE_ENV: "token", PATH_ENV: str(path), TOKEN_ENV: None}


def apply_env(env: Mapping[str, str | None],
              environ: MutableMapping[str, str] | None = None) -> dict[str, str | None]:
    """Set (a value) or remove (None) each of ``env`` in ``environ`` (``os.environ``);
    return what was there before, for :func:`apply_env` to put back."""
    environ = os.environ if environ is None else environ
    saved = {k: environ.get(k) for k in env}
    for key, value in env.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    return saved


def refresh_ray() -> None:
    """Make this process's Ray read the authentication variables again: Ray caches its
    configuration (the mode) and the token it loaded, and reads them afresh only when
    told (what Ray's own ``_enable_token_auth`` does). A Ray without these internals is
    left alone: it then reads the variables when it first needs them."""
    with contextlib.suppress(ImportError, AttributeError):
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def user_token(environ: Mapping[str, str] | None = None,
               home: str | Path | None = None) -> tuple[str, str] | None:
    """The user's token in Ray's order, as ``(where it came from, token)``, or None:
    ``RAY_AUTH_TOKEN`` when set and not empty, else the file ``RAY_AUTH_TOKEN_PATH``
    names, else ``~/.ray/auth_token`` when it exists and is not empty.

    Raises:
        FugueError: ``RAY_AUTH_TOKEN_PATH`` names a file that cannot be read or is empty
            (Ray aborts the process on that rather than fall back; one line instead).
    """
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_ENV, "").strip()
    if token:
        return TOKEN_ENV, token
    named = environ.get(PATH_ENV)
    if named:
        try:
            token = Path(named).expanduser().read_text().strip()
        except OSError as exc:
            raise FugueError(f"ray: {PATH_ENV} names {named!r}, which cannot be read "
                             f"({exc.strerror or exc}): point it at the cluster's token "
                             f"({GET_TOKEN} on its head node prints it)") from None
        if not token:
            raise FugueError(f"ray: {PATH_ENV} names {named!r}, which is empty: put the "
                             f"cluster's token there ({GET_TOKEN} on its head node prints it)")
        return f"{PATH_ENV} ({named})", token
    default = (Path(home) if home is not None else Path.home()) / ".ray" / TOKEN_FILE
    with contextlib.suppress(OSError):
        token = default.read_text().strip()
        if token:
            return str(default), token
    return None


def use_user_token(address: str) -> str | None:
    """Before this process connects to the user's cluster at ``address`` (``host:port``):
    ask the cluster's GCS once whether it lets this process in as it is; when it wants a
    token and the user has not set ``RAY_AUTH_MODE``, turn token authentication on with
    the user's token (:func:`user_token`) and ask again. Only then: a driver in token mode on a
    cluster without authentication could not create its actors (Ray 2.60).
    Returns None, or one line saying why not: the cluster wants a token and none was
    found, or it refused the one found, or ``RAY_AUTH_MODE`` turns it off here. Anything
    else (not a GCS, not answering) is left for ``ray.init`` to report. A ``ray://`` (Ray
    Client) address is not asked.

    Raises:
        FugueError: ``RAY_AUTH_TOKEN_PATH`` names an unreadable or empty file (only asked
            when the cluster wants a token).
    """
    if address.startswith("ray://"):
        return None
    refresh_ray()
    if _refused(address) is None:
        return None
    ask = (f"{GET_TOKEN} on the cluster's head node prints its token; put it in "
           f"~/.ray/{TOKEN_FILE} (or {PATH_ENV}, {TOKEN_ENV}) here")
    mode = os.environ.get(MODE_ENV)
    if mode is not None and mode.lower() != "token":
        return (f"the Ray cluster at {address!r} requires an authentication token, but "
                f"{MODE_ENV}={mode} here turns it off: unset it; {ask}")
    found = user_token()
    if found is None:
        return (f"the Ray cluster at {address!r} requires an authentication token and none "
                f"was found ({LOOKUP}): {ask}")
    if mode is None:  # Ray never turns it on for an explicit address: this process does
        os.environ[MODE_ENV] = "token"
        refresh_ray()
        if _refused(address) is None:
            return None
    return (f"the Ray cluster at {address!r} refused the authentication token from "
            f"{found[0]}: {ask}")


def _refused(address: str) -> str | None:
    """Ray's reason when the GCS at ``address`` refuses this process's credentials, else
    None. Ray's client logs the refusal on the process's stderr (fd 2, from C++) before it
    raises: that line is kept off the front end's output."""
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:
        return None
    try:
        with _quiet_stderr():
            GcsClient(address=address)
    except AuthenticationError as exc:
        return str(exc.message if hasattr(exc, "message") else exc)
    except Exception:  # noqa: BLE001 - not ours to judge: ray.init reports it
        return None
    return None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (a C++ library's log line)."""
    with contextlib.suppress(AttributeError, ValueError, OSError):
        sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
