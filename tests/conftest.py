"""The suite's shared fixtures (`tests/fixtures.py`) and its SIGTERM handling
(`tests/sigterm.py`), registered as plugins."""

pytest_plugins = ["tests.fixtures", "tests.sigterm"]
