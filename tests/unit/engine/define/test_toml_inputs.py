"""TOML inputs (campaign, experiments, keymap files: ``engine.define.tomlfile``) are read
only from a regular file of at most 1 MiB, and a UTF-8 byte-order mark is skipped (issue
44: a campaign that was a link to ``/dev/zero`` was read until the process held 23.8 GB, a
FIFO blocked for ever, a BOM was "invalid TOML: Invalid statement").

What could hang on a regression (a FIFO, ``/dev/zero``) runs in a child process with a
timeout, so that the test fails instead of blocking the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.define import tomlfile
from engine.errors import ConfigError

REPO = Path(__file__).resolve().parents[4]


def _load_in_child(path: Path, kind: str = "campaign file") -> subprocess.CompletedProcess:
    """``tomlfile.load(path)`` in a child process with 2 GiB of address space to grow
    in and 20 s to answer; prints the ConfigError's line."""
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from engine.define import tomlfile
        from engine.errors import ConfigError
        try:
            tomlfile.load({str(path)!r}, kind={kind!r})
        except ConfigError as exc:
            print(exc)
            sys.exit(2)
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=20, env=env, stdin=subprocess.DEVNULL)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    done = _load_in_child(fifo)
    assert done.returncode == 2, done
    assert done.stdout.strip() == (f"{fifo}: cannot read: a FIFO, not a regular file (a "
                                   "campaign file is read from a regular file)"), done.stdout


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_link_to_dev_zero_is_refused_naming_what_it_is(tmp_path):
    link = tmp_path / "mine.toml"
    link.symlink_to("/dev/zero")
    done = _load_in_child(link, "experiments file")
    assert done.returncode == 2, done
    assert done.stdout.strip() == (f"{link}: cannot read: a character device ('/dev/zero'), "
                                   "not a regular file (an experiments file is read from a "
                                   "regular file)"), done.stdout


def test_a_file_over_the_limit_is_refused_by_its_size(tmp_path):
    big = tmp_path / "c.toml"
    big.write_bytes(b"#" * (tomlfile.MAX_BYTES * 23 // 10))
    with pytest.raises(ConfigError) as caught:
        tomlfile.load(big, kind="campaign file")
    assert str(caught.value) == f"{big}: 2.3 MiB, more than the 1 MiB a campaign file may be"
    at_limit = tmp_path / "ok.toml"
    at_limit.write_bytes(b"#" * tomlfile.MAX_BYTES)  # a comment of exactly 1 MiB: fine
    assert tomlfile.load(at_limit) == {}
    at_limit.write_bytes(b"#" * (tomlfile.MAX_BYTES + 1))
    with pytest.raises(ConfigError, match="1048577 bytes, more than the 1 MiB a TOML file"):
        tomlfile.load(at_limit)


def test_what_is_read_is_bounded_even_if_the_file_grows_after_the_look(tmp_path, monkeypatch):
    """At most limit + 1 bytes are read whatever the size said: a file that grows between
    the look and the read (a log someone appends to) cannot fill the memory."""
    path = tmp_path / "c.toml"
    path.write_bytes(b"#" * 100)
    reads = []
    real_read = os.read

    def small(look):  # the looks saw 10 bytes; 100 are there when read
        def seen(target, *args, **kwargs):
            st = look(target, *args, **kwargs)
            if target not in (path, str(path)) and not isinstance(target, int):
                return st
            return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))
        return seen

    def counting_read(fd, n):
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "stat", small(os.stat))
    monkeypatch.setattr(os, "fstat", small(os.fstat))
    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(ConfigError, match="11 bytes or more .it grew while read., more than"):
        tomlfile.read_input(path, limit=10)
    assert sum(reads) <= 11


def test_a_utf8_byte_order_mark_is_skipped_and_positions_stay_right(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b'\xef\xbb\xbfexperiments = "D_ens"\npasses = 2\n')
    assert tomlfile.load(path) == {"experiments": "D_ens", "passes": 2}
    path.write_bytes(b'\xef\xbb\xbfpasses = = 2\n')  # an error on the BOM's own line
    with pytest.raises(ConfigError, match=r"c\.toml:1:10: invalid TOML: Invalid value"):
        tomlfile.load(path)
    path.write_bytes(b'\xef\xbb\xbfname = "x"\npasses = = 2\n')
    with pytest.raises(ConfigError, match=r"c\.toml:2:10: invalid TOML"):
        tomlfile.load(path)
    # the dashboard's key positions (line 1 is the BOM's line)
    text = path.read_bytes().decode("utf-8")
    assert tomlfile.key_lines(text)[("", "name")] == 1


def test_a_utf16_file_is_named_as_such(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes('experiments = "D_ens"\n'.encode("utf-16"))  # with its BOM
    with pytest.raises(ConfigError, match="UTF-16 byte-order mark.*save the TOML file as UTF-8"):
        tomlfile.load(path)


def test_a_name_no_path_can_be_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^campaign file 'a+\.\.\.a+\.toml' \(305 characters\) "
                                          r"is a 305-byte name"):
        tomlfile.load("a" * 300 + ".toml", kind="campaign file")
    with pytest.raises(ConfigError, match=r"has a NUL byte \(character 2\)"):
        tomlfile.load("a\0.toml")
