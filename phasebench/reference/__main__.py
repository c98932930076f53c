"""python -m phasebench.reference [--check]: write the generated reference pages (docs/reference/), or with --check
say which of them differ from what would be written, and exit 1."""

from __future__ import annotations

import argparse
import sys

from phasebench.reference import check, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.reference", description=__doc__.split(":")[1].strip())
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = check()
        for path in stale:
            print(f"{path}: out of date; run python -m phasebench.reference", file=sys.stderr)
        return 1 if stale else 0
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
