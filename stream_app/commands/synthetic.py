"""Moved to `stream_app.synthetic`; this alias stays only until prometheus/generate_tests.py
imports from there."""

from stream_app.synthetic import SPREAD, TIERS, Drop, Profile, scenario, synthetic_lines

__all__ = ["SPREAD", "TIERS", "Drop", "Profile", "scenario", "synthetic_lines"]
