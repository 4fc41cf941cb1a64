"""``fugue-tui bench [PART [ARGS...]]``: a part of the benchmark suite (``bench/``), which
lives in the source checkout next to the ``engine`` package (it is not installed)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    bench = sub.add_parser(
        "bench", help="run a part of the benchmark suite (from a source checkout)",
        description="Run parts of the benchmark suite (bench/README.md). Each part appends "
                    "its raw rows to bench/results/<part>.csv and re-renders "
                    "bench/RESULTS.md. Without a part: list them.")
    bench.add_argument("part", nargs="?", metavar="PART", help="the part to run")
    bench.add_argument("part_args", nargs=argparse.REMAINDER, metavar="ARGS",
                       help="the part's own options (see fugue-tui bench PART --help)")
    bench.add_argument("--check", action="store_true",
                       help="verify that bench/RESULTS.md matches the committed CSV files")


def run(args: argparse.Namespace) -> int:
    """List the parts, run one (its exit status), or ``--check`` RESULTS.md. Raises
    ``ConfigError`` (exit 2) outside a source checkout or for an unknown part."""
    import subprocess
    from pathlib import Path

    import engine
    from engine.errors import ConfigError, known, nearest

    root = Path(engine.__file__).resolve().parent.parent
    if not (root / "bench" / "__init__.py").is_file():
        raise ConfigError("the benchmark suite runs from a source checkout of fugue-tui "
                          f"(no bench/ next to {root / 'engine'})")
    sys.path.insert(0, str(root))
    from bench import PARTS

    if args.check:
        return subprocess.call([sys.executable, "-m", "bench.results", "--check"], cwd=root)
    if not args.part:
        width = max(map(len, PARTS))
        print("benchmark parts (fugue-tui bench PART [--help]):")
        from fugue_tui.format import wrap_line

        for name, what in PARTS.items():
            for line in wrap_line(f"  {name:<{width}}  {what}", hang=width + 2):
                print(line)
        return 0
    if args.part not in PARTS:
        raise ConfigError(f"unknown benchmark part {args.part!r}{nearest(args.part, PARTS)}; "
                          f"{known(PARTS)}")
    import os

    # the part's --help names the command the user typed, not `python -m bench.PART`
    env = {**os.environ, "FUGUE_BENCH_PROG": f"fugue-tui bench {args.part}"}
    return subprocess.call([sys.executable, "-m", f"bench.{args.part}", *args.part_args],
                           cwd=root, env=env)
