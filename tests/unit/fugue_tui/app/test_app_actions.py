"""Binding ids and the user's keymap file."""

from __future__ import annotations

import os

import pytest

from engine.errors import ConfigError
from fugue_tui.app.actions import (
    ALL,
    APP,
    PLAN,
    RUN,
    bindings,
    keymap_path,
    load_keymap,
)


def test_every_action_has_a_unique_id_and_a_binding_with_it():
    ids = [a.id for a in APP + PLAN + RUN]
    assert len(ids) == len(set(ids))
    made = bindings(RUN)
    assert [b.id for b in made] == [a.id for a in RUN]
    assert all(b.tooltip for b in made)


def test_keymap_file_remaps_by_id(tmp_path):
    path = tmp_path / "keymap.toml"
    path.write_text('[keymap]\n"run.retry" = "R"\n"plan.launch" = "ctrl+r,f5"\n')
    assert load_keymap(path) == {"run.retry": "R", "plan.launch": "ctrl+r,f5"}
    assert load_keymap(tmp_path / "missing.toml") == {}


def test_keymap_errors_name_the_file_and_the_nearest_id(tmp_path):
    path = tmp_path / "keymap.toml"
    path.write_text('[keymap]\n"run.retyr" = "R"\n')
    with pytest.raises(ConfigError, match=r"keymap\.toml: keymap: unknown binding id "
                                          r"'run\.retyr' \(did you mean 'run\.retry'\?\)"):
        load_keymap(path)
    path.write_text('[keymap]\n"run.retry" = 3\n')
    with pytest.raises(ConfigError, match="keymap.run.retry: expected keys as a string"):
        load_keymap(path)
    path.write_text('[keymap\n')
    with pytest.raises(ConfigError, match=r"keymap\.toml:1:\d+: invalid TOML"):
        load_keymap(path)


def test_keymap_path_follows_the_config_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path))
    assert keymap_path() == tmp_path / "keymap.toml"
    assert {a.id for a in ALL} >= {"run.retry", "run.skip", "app.quit", "app.help"}


def test_a_keymap_that_is_not_a_regular_file_is_named_not_ignored(tmp_path):
    """Issue 44: a FIFO keymap was silently an empty keymap (``is_file()`` is False for
    it); the TOML reader names it without waiting on it. A missing one stays empty."""
    fifo = tmp_path / "keymap.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        load_keymap(fifo)
    assert "keymap.toml" in str(info.value) and "FIFO" in str(info.value)
    assert load_keymap(tmp_path / "absent.toml") == {}
