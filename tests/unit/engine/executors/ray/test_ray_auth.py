"""``engine.executors.ray.auth``: whose Ray token a runtime or a connection uses (issue 49).
No Ray runtime here: the real cluster's refusals are in tests/e2e/test_ray_guest.py."""

from __future__ import annotations

import os
import stat

import pytest

from engine.errors import FugueError
from engine.executors.ray import auth


def test_the_users_token_is_found_in_rays_order(tmp_path):
    """RAY_AUTH_TOKEN, then the file RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("from-home\n")
    named = tmp_path / "named"
    named.write_text("from-path")
    env = {"RAY_AUTH_TOKEN": "from-env", "RAY_AUTH_TOKEN_PATH": str(named)}
    assert auth.user_token(env, home) == ("RAY_AUTH_TOKEN", "from-env")
    env["RAY_AUTH_TOKEN"] = ""  # empty: not set, as Ray reads it
    assert auth.user_token(env, home) == (f"RAY_AUTH_TOKEN_PATH ({named})", "from-path")
    del env["RAY_AUTH_TOKEN_PATH"]
    assert auth.user_token(env, home) == (str(home / ".ray" / "auth_token"), "from-home")
    assert auth.user_token({}, tmp_path / "nobody") is None


@pytest.mark.parametrize("content", [None, "  \n"], ids=["missing", "empty"])
def test_a_token_path_that_gives_no_token_is_one_line(tmp_path, content):
    """Ray aborts the process on it (no fallback): one line naming the variable, the file
    and ``ray get-auth-token`` instead."""
    named = tmp_path / "token"
    if content is not None:
        named.write_text(content)
    with pytest.raises(FugueError) as err:
        auth.user_token({"RAY_AUTH_TOKEN_PATH": str(named)}, tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert "RAY_AUTH_TOKEN_PATH" in message and str(named) in message
    assert "`ray get-auth-token`" in message


def test_a_private_runtime_gets_a_token_of_its_own(tmp_path):
    """A new 256-bit token, readable by its owner only, in the runtime's folder; the
    runtime's environment reads it from there and drops a RAY_AUTH_TOKEN of the user's
    (it would take precedence); two runtimes never share one."""
    env = auth.private_env(tmp_path)
    path = tmp_path / "auth_token"
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path),
                   "RAY_AUTH_TOKEN": None}
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    other = tmp_path / "other"
    other.mkdir()
    auth.private_env(other)
    assert (other / "auth_token").read_text() != token
    with pytest.raises(FugueError, match="auth_token"):
        auth.private_env(tmp_path)  # never overwrites a token


def test_apply_env_sets_removes_and_puts_back():
    environ = {"RAY_AUTH_TOKEN": "users", "KEEP": "1"}
    saved = auth.apply_env({"RAY_AUTH_TOKEN": None, "RAY_AUTH_MODE": "token"}, environ)
    assert environ == {"KEEP": "1", "RAY_AUTH_MODE": "token"}
    auth.apply_env(saved, environ)
    assert environ == {"RAY_AUTH_TOKEN": "users", "KEEP": "1"}


@pytest.fixture
def user(monkeypatch, tmp_path):
    """A user with an empty home and no Ray variable, and a stand-in for the cluster's
    GCS (``cluster["token"]``: the token it wants, None: no authentication) that answers
    as Ray's does: in token mode the user's token is sent, else none. Ray's own caches
    are not touched."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key in (auth.MODE_ENV, auth.TOKEN_ENV, auth.PATH_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(auth, "refresh_ray", lambda: None)
    cluster: dict[str, str | None] = {"token": None}
    asked: list[str | None] = []

    def refused(address: str) -> str | None:
        sent = None
        if os.environ.get(auth.MODE_ENV) == "token":
            found = auth.user_token()
            sent = found[1] if found else None
        asked.append(sent)
        wanted = cluster["token"]
        return None if wanted is None or sent == wanted else "InvalidAuthToken"

    monkeypatch.setattr(auth, "_refused", refused)
    return home, cluster, asked


def test_a_users_token_is_used_only_for_a_cluster_that_wants_one(user):
    """Ray never turns authentication on for an explicit address: the campaign does, with
    the user's token, when the cluster wants one; a cluster without authentication is
    joined without (a driver in token mode could not create actors there)."""
    home, cluster, asked = user
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("t")
    assert auth.use_user_token("127.0.0.1:1") is None
    assert os.environ.get(auth.MODE_ENV) is None and asked == [None]
    cluster["token"] = "t"
    assert auth.use_user_token("127.0.0.1:1") is None
    assert os.environ[auth.MODE_ENV] == "token" and asked == [None, None, "t"]


def test_each_refusal_is_one_line_naming_ray_get_auth_token(user, monkeypatch):
    home, cluster, _ = user
    cluster["token"] = "the-clusters"
    none = auth.use_user_token("10.0.0.5:6379")
    assert none is not None and "none was found (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, " \
        "~/.ray/auth_token)" in none
    monkeypatch.setenv(auth.TOKEN_ENV, "wrong")
    wrong = auth.use_user_token("10.0.0.5:6379")
    assert wrong is not None and "refused the authentication token from RAY_AUTH_TOKEN" in wrong
    monkeypatch.setenv(auth.MODE_ENV, "disabled")
    off = auth.use_user_token("10.0.0.5:6379")
    assert off is not None and "RAY_AUTH_MODE=disabled here turns it off" in off
    for line in (none, wrong, off):
        assert "\n" not in line and "'10.0.0.5:6379'" in line and "`ray get-auth-token`" in line
