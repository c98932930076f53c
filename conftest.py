"""The entry of phasebench's pytest plugin (phasebench/plugin/__init__.py) for a checkout that was not installed;
installed (`pip install -e .`), the plugin is already registered under this name and the line does nothing."""

pytest_plugins = ["phasebench.plugin"]
