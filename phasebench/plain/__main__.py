"""`python -m phasebench.plain`: the suite's trainers against the plain programs (phasebench/plain/__init__.py)."""

from phasebench.plain import main

if __name__ == "__main__":
    raise SystemExit(main())
