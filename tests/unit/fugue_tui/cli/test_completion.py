"""``fugue-tui completion bash|zsh|fish`` (issue 29): scripts generated from the parser by
shtab; the bash one is sourced in a real bash and asked to complete."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def script(shell: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "completion", shell],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def scripts() -> dict[str, str]:
    return {shell: script(shell) for shell in ("bash", "zsh", "fish")}


def test_every_script_knows_the_commands_and_their_options(scripts):
    for shell, text in scripts.items():
        for word in ("validate", "report", "completion", "--batch", "--json", "--export",
                     "--dry-run"):
            # fish declares long options as `-l json`
            assert word in text or (shell == "fish" and f"-l {word[2:]}" in text), (shell,
                                                                                    word)
    assert scripts["zsh"].startswith("#compdef fugue-tui")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_commands_options_and_choices(scripts, tmp_path):
    (tmp_path / "c.bash").write_text(scripts["bash"])
    (tmp_path / "my.toml").write_text("")

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        code = (f"source {tmp_path / 'c.bash'}; COMP_WORDS=({line}); "
                f"COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; COMP_POINT={len(line)}; "
                "_shtab_fugue_tui; printf '%s\\n' \"${COMPREPLY[@]}\"")
        proc = subprocess.run(["bash", "-c", code], capture_output=True, text=True,
                              timeout=30, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert complete("fugue-tui", "val") == ["validate"]
    assert complete("fugue-tui", "report", "--for") == ["--format"]
    assert complete("fugue-tui", "completion", "''") == ["bash", "zsh", "fish"]
    assert "my.toml" in complete("fugue-tui", "--batch", "m")  # a campaign file


def test_an_unknown_shell_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "completion", "csh"],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "invalid choice: 'csh'" in proc.stderr
