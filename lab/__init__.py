"""The lab: what exists to produce this project's own studies, apart from the product a user installs (phasebench/).
It imports the product; the product never imports it (tests/test_layers.py), and the wheel holds none of it
(tests/test_wheel.py). Loaded explicitly, never by an entry point:

- plugin: the intervention study's pytest switches, --omp-wait-policy and --pins (`pytest -p lab.plugin ...`);
- study: the intervention study's file, interventions.json (its format, writer and reader);
- paired_stats, closing, account: its statistics, what closes the gap, and the account,
  `python -m lab.account COUNTED --beside TIMED --interventions STUDY`;
- studies: the study drivers (`python -m lab.studies.interventions`, `.gate_study`, `.count_study`,
  `.changepoint_study`; lab/studies/__init__.py lists them);
- tests: the lab's own tests, a CI job of their own (.github/workflows/lab.yml;
  `python -m pytest -p lab.plugin lab/tests`).

Run from the repository root, where `lab` is importable.
"""
