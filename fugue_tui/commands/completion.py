"""``fugue-tui completion {bash,zsh,fish}``: the shell completion script, generated from
the parser by shtab, which completes files or folders where a value is a path."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    completion = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print the completion script for SHELL, generated from this command "
                    "line's parser (shtab). Install it once, e.g. for bash: fugue-tui "
                    "completion bash > ~/.local/share/bash-completion/completions/fugue-tui; "
                    "zsh: fugue-tui completion zsh > \"${fpath[1]}/_fugue-tui\"; fish: "
                    "fugue-tui completion fish > ~/.config/fish/completions/fugue-tui.fish.")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), metavar="SHELL",
                            help="bash, zsh or fish")


#: Options and arguments whose values are files or folders, for the completion scripts.
_FILE_DESTS = {"batch", "campaign_file", "experiments_file", "experiments_file_list",
               "experiments_file_sub", "run_experiments_file", "replay"}
_DIR_DESTS = {"runs_dir", "runs_dir_report", "report_dir", "run_runs_dir", "attach",
              "results", "run_dir", "export", "data_dir"}


def mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which values are paths (it completes files or folders there). Without
    shtab (a GPU machine running the checkout: bench/gpu_check.py) nothing is marked: only
    ``completion`` needs the marks, and it needs shtab itself."""
    try:
        import shtab
    except ImportError:
        return

    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                mark_paths(sub)
        elif action.dest in _FILE_DESTS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        elif action.dest in _DIR_DESTS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
