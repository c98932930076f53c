"""`python -m phasebench.report`."""

from phasebench.report import main

if __name__ == "__main__":
    raise SystemExit(main())
