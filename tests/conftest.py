"""The suite's shared fixtures, registered as a plugin (`tests/fixtures.py`)."""

pytest_plugins = ["tests.fixtures"]
