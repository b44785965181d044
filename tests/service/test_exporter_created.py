"""The worker's `/metrics` carries no `_created` series, and leaves every other registry of the
process as it was: importing or using the exporter changes nothing outside it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from stream_app.service.exporter import Exporter


def test_no_created_series_on_metrics_and_other_registries_keep_theirs() -> None:
    exporter = Exporter("test")
    exporter.received.inc()
    page = exporter.render().decode()
    assert "evalstream_runs_received_total 1.0" in page
    assert "_created" not in page

    other = CollectorRegistry()
    Counter("someone_elses", "a counter of another app in the process", registry=other).inc()
    assert "someone_elses_created" in generate_latest(other).decode()
