"""`python -m phasebench.gate` (phasebench.gate.cli)."""

from phasebench.gate.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
