"""The intervention study's pytest switches (docs/method.md#switches-for-the-intervention-study), loaded explicitly:
`pytest -p lab.plugin --omp-wait-policy passive ...`. The product's plugin resolves them, hands them to the workers and
records them in every saved result (phasebench/plugin/switches.py); this plugin only adds the options, which no
command of the product uses."""

from __future__ import annotations


def pytest_addoption(parser):
    group = parser.getgroup("phasebench")
    group.addoption("--omp-wait-policy", default=None, metavar="passive|active|default",
                    help="OMP_WAIT_POLICY in both languages' workers: passive, active, or default for none set there "
                         "(OpenMP's own policy) (default: not given: the workers inherit the pytest process's "
                         "environment)")
    group.addoption("--pins", default=None, metavar="none|count",
                    help="count: time under the instruction-count mode's conditions (its environment pins, one "
                         "intra-op thread, ASLR off, GC frozen, the type cache emptied before each body; "
                         "docs/method.md#switches-for-the-intervention-study) (default: none: the timed workers run as "
                         "the machine has them)")
