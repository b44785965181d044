"""`produce` keys each event by its experiment: the worker's partitioning, so an experiment's
runs keep the order they were sent in and the order-dependent outputs equal `replay`."""

from __future__ import annotations

from stream_app.sources.producer import experiment_key
from tests.helpers import encode, make_event


def test_events_are_keyed_by_experiment() -> None:
    assert experiment_key(encode(make_event(run_id="r1", experiment_id="exp-7"))) == b"exp-7"
    assert experiment_key(b'{"experiment_id": "\\u00e9"}') == "é".encode()


def test_lines_without_an_experiment_have_no_key() -> None:
    for line in (
        b"{not json",
        b"[1, 2]",
        b'{"experiment_id": 3}',
        b'{"run_id": "r"}',
        b"[" * 10**5,
    ):
        assert experiment_key(line) is None
