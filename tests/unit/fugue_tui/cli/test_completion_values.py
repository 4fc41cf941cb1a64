"""Completion of values (issue 49): the generated bash script, sourced in a real bash,
offers executors, experiment ids (the catalogue's and an ``--experiments-file``'s, read
when completing), schedulers, precisions and campaign files; the zsh and fish scripts
carry the same lists; a mistyped sub-command gets did-you-mean like every other name."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess

import pytest

from fugue_tui.cli import build_parser, main


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    out = {}
    for shell in ("bash", "zsh", "fish"):
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            assert main(["completion", shell]) == 0
        out[shell] = text.getvalue()
    return out


def _complete(script: str, folder, *words: str) -> list[str]:
    (folder / "fugue-tui.bash").write_text(script)
    line = " ".join(f"'{w}'" for w in words)
    program = f"""source ./fugue-tui.bash
COMP_WORDS=(fugue-tui {line}); COMP_CWORD={len(words)}; COMPREPLY=()
_shtab_fugue_tui; printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(["bash", "-c", program], cwd=folder, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return sorted(w for w in done.stdout.splitlines() if w)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_values(scripts, tmp_path):
    bash = scripts["bash"]
    assert _complete(bash, tmp_path, "run", "--exec", "u") == ["unified_model"]
    assert "seq" in _complete(bash, tmp_path, "simulate", "--executors", "")
    assert "E01" in _complete(bash, tmp_path, "run", "--exp", "E0")
    assert "E01" in _complete(bash, tmp_path, "validate", "E")
    assert _complete(bash, tmp_path, "run", "--scheduler", "a") == ["asha"]
    assert _complete(bash, tmp_path, "run", "--precision", "amp") == ["amp-bf16", "amp-fp16"]
    (tmp_path / "mine.toml").write_text("[experiments.MY_one]\nmodel = 'mlp'\n"
                                        "  [experiments.MY_two]\n")
    assert _complete(bash, tmp_path, "validate", "--experiments-file", "mine.toml",
                     "MY") == ["MY_one", "MY_two"]
    assert _complete(bash, tmp_path, "profile", "--experiments=mine.toml", "MY_t") == ["MY_two"]
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "sub").mkdir()
    assert _complete(bash, tmp_path, "--batch", "") == ["fugue-tui.bash", "mine.toml",
                                                        "sub"][1:]  # TOML files, folders


def test_zsh_and_fish_scripts_carry_the_values(scripts):
    zsh, fish = scripts["zsh"], scripts["fish"]
    assert "_fugue_tui_experiments() {" in zsh and "compadd -a ids" in zsh
    assert ":(seq mp ray unified_model)" in zsh or "(seq mp ray unified_model)" in zsh
    assert ":SCHEDULER:(fifo asha median hyperband sha)" in zsh
    assert ":PRECISION:(fp32 tf32 amp-fp16 amp-bf16 bf16)" in zsh
    assert "function _fugue_tui_experiments" in fish and "commandline -opc" in fish
    assert "(_fugue_tui_executors)" in fish and "printf '%s\\n' seq mp ray unified_model" in fish
    assert "*.toml" in zsh and "*.toml" in fish


def test_generating_completion_leaves_the_parser_as_it_was():
    # marks are attributes for shtab only: parsing and help are unchanged
    parser = build_parser()
    args = parser.parse_args(["run", "--exp", "anything", "--exec", "custom"])
    assert args.run_exec == ["custom"]


@pytest.mark.parametrize("argv, hint", [
    (["reprot"], "invalid choice: 'reprot' (did you mean 'report'?) (choose from"),
    (["simulat"], "(did you mean 'simulate'?)"),
    (["run", "--compile", "onn"], "invalid choice: 'onn' (did you mean 'on'?)"),
])
def test_mistyped_choice_gets_did_you_mean(argv, hint):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(argv) == 2
    assert hint in err.getvalue() and len(err.getvalue().splitlines()) == 1


def test_no_close_choice_no_guess():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["xyzzy"]) == 2
    assert "did you mean" not in err.getvalue()
