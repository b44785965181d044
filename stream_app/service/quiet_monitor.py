"""Faust's monitor without its per-message bookkeeping.

Faust's default `Monitor` updates counters, dicts and timestamps four times for every message
(in, stream in, stream out, out) and once per fetched record for the end offset: statistics
that only its own web views read, and that evalstream does not serve. Its own measures
(`/metrics`) replace them. Everything else of the monitor (commits, sends, rebalances, tables)
is kept."""

from __future__ import annotations

from typing import Any

from faust.sensors import Monitor
from typing_extensions import override


class QuietMonitor(Monitor):
    """`Monitor` minus the per-message hooks."""

    @override
    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        """Nothing per message."""

    @override
    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        """Nothing per event."""

    @override
    def on_stream_event_out(
        self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None
    ) -> None:
        """Nothing per event."""

    @override
    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        """Nothing per message."""

    @override
    def track_tp_end_offset(self, tp: Any, offset: int) -> None:
        """Nothing per record (the lag gauge reads the consumer's high watermarks)."""
