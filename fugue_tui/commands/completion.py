"""``fugue-tui completion {bash,zsh,fish}``: the shell completion script, generated from
the parser by shtab, which completes files or folders where a value is a path, campaign
files (``*.toml``) where a value is one, and the values the command knows (issue 49):
executors (built-in and plugins'), experiment ids (the catalogue's, and those of an
``--experiments-file``/``--experiments`` given on the line, read by the shell when
completing), schedulers and precisions. The known lists are written into the script when
it is generated: a plugin added later needs the script generated again."""

from __future__ import annotations

import argparse
import re


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


#: Values completed from a list, per option or argument ``dest`` (see :func:`_value_kinds`).
_VALUE_DESTS = {"run_exec": "executor", "executors": "executor", "run_exp": "experiment",
                "selector": "experiment", "run_scheduler": "scheduler",
                "run_precision": "precision"}
#: Campaign files: a TOML file (folders too, to walk into).
_CAMPAIGN_DESTS = {"batch", "campaign_file"}
#: What an experiments file's table header looks like: ``[experiments.ID]``.
_SED_IDS = r"sed -n 's/^[[:space:]]*\[experiments\.\([A-Za-z0-9_.-]*\)\].*/\1/p'"


def _value_kinds() -> dict[str, list[str]]:
    """The known values per kind, from the registries, the catalogue and the precision
    table (what ``run`` and ``validate`` accept here, plugins included)."""
    from engine.define.catalogue import load_catalogue
    from engine.executors import SCHEDULER_CHOICES
    from engine.plugins import load_plugins
    from engine.registry import EXECUTORS
    from fugue_tui.commands.arguments import precision_names

    load_plugins()
    return {"executor": EXECUTORS.names(), "experiment": list(load_catalogue().ids()),
            "scheduler": list(SCHEDULER_CHOICES), "precision": list(precision_names())}


def _safe_words(words: list[str]) -> str:
    """Words for a shell list: only names a shell need not quote."""
    return " ".join(w for w in words if re.fullmatch(r"[A-Za-z0-9_.:+-]+", w))


def _words_completion(kind: str, words: list[str]) -> dict[str, object]:
    """A shtab ``.complete`` value offering ``words`` in bash, zsh and fish."""
    listed = _safe_words(words)
    fn = f"_fugue_tui_{kind}s"
    return {"bash": fn, "zsh": f"({listed})", "fish": f"({fn})",
            "preamble": {
                "bash": f"{fn}() {{\n  compgen -W \"{listed}\" -- \"$1\"\n}}\n",
                "fish": f"function {fn}\n  printf '%s\\n' {listed}\nend\n"}}


def _experiment_completion(ids: list[str]) -> dict[str, object]:
    """Experiment ids: the catalogue's, and those of the experiments file named on the
    command line (``--experiments-file F``, ``--experiments F``, ``--experiments-file=F``)."""
    listed = _safe_words(ids)
    bash = f"""_fugue_tui_experiments() {{
  local ids="{listed}" file="" i
  for ((i = 1; i < ${{#COMP_WORDS[@]}}; i++)); do
    case "${{COMP_WORDS[i]}}" in
      --experiments-file|--experiments) file="${{COMP_WORDS[i+1]}}" ;;
      --experiments-file=*|--experiments=*) file="${{COMP_WORDS[i]#*=}}" ;;
    esac
  done
  file="${{file/#\\~/$HOME}}"
  if [ -n "$file" ] && [ -r "$file" ]; then
    ids="$ids $({_SED_IDS} "$file" 2>/dev/null)"
  fi
  compgen -W "$ids" -- "$1"
}}
"""
    zsh = f"""_fugue_tui_experiments() {{
  local -a ids
  ids=({listed})
  local file="" i
  for ((i = 1; i <= $#words; i++)); do
    case "${{words[i]}}" in
      --experiments-file|--experiments) file="${{words[i+1]}}" ;;
      --experiments-file=*|--experiments=*) file="${{words[i]#*=}}" ;;
    esac
  done
  file="${{file/#\\~/$HOME}}"
  if [[ -n "$file" && -r "$file" ]]; then
    ids+=(${{(f)"$({_SED_IDS} "$file" 2>/dev/null)"}})
  fi
  compadd -a ids
}}
"""
    fish = f"""function _fugue_tui_experiments
  printf '%s\\n' {listed}
  set -l words (commandline -opc)
  set -l file
  for i in (seq (count $words))
    switch $words[$i]
      case --experiments-file --experiments
        set -l next (math $i + 1)
        if test $next -le (count $words)
          set file $words[$next]
        end
      case '--experiments-file=*' '--experiments=*'
        set file (string split -m1 = -- $words[$i])[2]
    end
  end
  set file (string replace -r '^~' $HOME -- "$file")
  if test -n "$file"; and test -r "$file"
    {_SED_IDS} "$file" 2>/dev/null
  end
end
"""
    return {"bash": "_fugue_tui_experiments", "zsh": "_fugue_tui_experiments",
            "fish": "(_fugue_tui_experiments)",
            "preamble": {"bash": bash, "zsh": zsh, "fish": fish}}


def mark_values(parser: argparse.ArgumentParser) -> None:
    """Mark the values the completion scripts offer from a list (executors, experiment
    ids, schedulers, precisions) and campaign files (``*.toml``); only ``completion``
    calls this (loading the plugins and the catalogue costs a moment)."""
    import shtab

    kinds = _value_kinds()
    completions = {kind: (_experiment_completion(words) if kind == "experiment"
                          else _words_completion(kind, words)) for kind, words in kinds.items()}
    campaign = shtab.glob("*.toml")

    def walk(node: argparse.ArgumentParser) -> None:
        for action in node._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for sub in action.choices.values():
                    walk(sub)
            elif action.dest in _VALUE_DESTS and not action.choices:
                action.complete = completions[_VALUE_DESTS[action.dest]]  # type: ignore[attr-defined]
            elif action.dest in _CAMPAIGN_DESTS:
                action.complete = campaign  # type: ignore[attr-defined]

    walk(parser)


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

    mark_values(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
