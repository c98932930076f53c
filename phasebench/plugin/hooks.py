"""The hooks phasebench's plugin offers a suite (registered by phasebench/plugin/__init__.py's pytest_addhooks): a
suite's conftest.py implements them to tell the plugin about its own tests, so that the plugin names none of them."""


def pytest_phasebench_selections(config):
    """The suite's selections: {name: phasebench.plugin.cases.Selection}, each a test a benchmark run leaves out
    unless asked for (`--extra NAME`, or the selection's own option), which the test command (--benchmark-disable)
    runs. Every implementation's are taken, with the plugin's own (--free-running); called once, at configure time,
    so it belongs in a conftest.py that pytest loads before it (the root's, or that of a folder of the command line
    or of testpaths: bench/conftest.py)."""
