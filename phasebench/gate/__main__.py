"""`python -m phasebench.gate`."""

from phasebench.gate import main

if __name__ == "__main__":
    raise SystemExit(main())
