"""Every phase's cost across commits and torch releases, from saved results (docs/history.md).

One module per role, each importing only those above it in this list (and phasebench.results and
phasebench.schema, the leaves that read saved results, and phasebench.method, the method the code measures with):

- units: a value as it is read;
- changes: change points of a count series (the count gate's threshold) and of a time series (the detector the
  change-point study chose, lab/studies/changepoint_study.py), and the seeded bootstrap range that describes how
  the runs spread about a change;
- points: saved results read into points, each with the series key it belongs to;
- series: points ordered along first-parent history or by torch version, made series, their change points found
  (each a change of code, or of measurement where the count bracket or the method's sources changed there), each
  series' newest commit and its date, and what they were split on;
- page: the self-contained HTML page (--html): the change points first, then one case's chart at a time;
- cli: `python -m phasebench.history`, the terminal's lines.

It imports no torch.
"""
