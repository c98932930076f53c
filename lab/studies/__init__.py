"""Research studies (the gates, the ratios' gap), not part of the product: phasebench/ never imports this package
(tests/test_layers.py checks). Run from the repository root:

- gate_study: `python -m lab.studies.gate_study OUT_DIR --slow …`, what the pull-request gate does on this machine,
  over the gated runs that lab/studies/gate-study makes (docs/gating.md#baselines-and-ci-gating);
- count_study: `python -m lab.studies.count_study spread|summary …`, the instruction-count gate's thresholds and its
  gated runs, from lab/studies/count-study (docs/instruction-counts.md);
- interventions: `python -m lab.studies.interventions OUT_DIR [--pairs N] …`, each suspected cause of the network phases'
  Python/C++ gap switched alone across fresh processes, with an interval on the change of each ratio
  (docs/method.md#switches-for-the-intervention-study; its docstring says how to run it and what it costs); its
  interventions.json is written through lab/study.py, the format the report's account reads.
"""
