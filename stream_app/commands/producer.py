"""Moved to `stream_app.producer`; this alias stays only until tests/chain.py imports from there."""

from stream_app.producer import experiment_key, produce

__all__ = ["experiment_key", "produce"]
