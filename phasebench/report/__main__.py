"""`python -m phasebench.report` (phasebench.report.cli)."""

from phasebench.report.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
