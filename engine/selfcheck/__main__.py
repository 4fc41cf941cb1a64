"""``python -m engine.selfcheck --device cpu --out FILE``: the self-check's process (the
one that imports torch; ``fugue-tui selfcheck`` starts it and reads ``FILE`` back).

Writes the document body (``engine.selfcheck.run.selfcheck``) as JSON to ``FILE`` (stdout
without ``--out``), one progress line per path to stderr. Exit status: 0 every path at or
inside its bound, 1 a path outside, 2 bad input (one line on stderr, nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.selfcheck")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument("--out", help="write the JSON document here (default: stdout)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    from engine.selfcheck.run import selfcheck

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        body = selfcheck(args.device, say)
    except ValueError as exc:
        print(f"fugue-tui selfcheck: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(body, allow_nan=False, indent=1)
    if args.out:
        target = Path(args.out)
        tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
        tmp.write_text(text + "\n")
        tmp.replace(target)
    else:
        print(text)
    return int(body["exit_status"])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the front end says it
        sys.exit(130)
