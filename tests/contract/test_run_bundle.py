"""`bundle_runs`: order kept, every bundle under the limit (a lone oversized run travels alone),
and the bytes are a `RunBundle` as the JSON Schema describes it."""

import json

from hypothesis import given
from hypothesis import strategies as st

from schemas.run_bundle import RunBundle, bundle_runs
from stream_app.core.ingest import evaluate_run
from stream_app.service.settings import load_settings
from tests.helpers import encode, make_event

runs = st.lists(st.text(max_size=300).map(lambda t: json.dumps({"x": t}).encode()), max_size=60)


@given(runs, st.integers(min_value=20, max_value=2000))
def test_bundles_keep_order_and_size(items: list[bytes], limit: int) -> None:
    bundles = bundle_runs(items, limit)
    decoded = [json.loads(b) for b in bundles]
    assert [json.dumps(r).encode() for d in decoded for r in d["runs"]] == [
        json.dumps(json.loads(i)).encode() for i in items
    ]
    for bundle, d in zip(bundles, decoded, strict=True):
        assert d["v"] == 1
        assert d["runs"]
        assert len(bundle) <= limit or len(d["runs"]) == 1
    start = 0  # greedy: the next bundle's first run would not have fitted in this one
    for bundle, d in zip(bundles[:-1], decoded, strict=False):
        start += len(d["runs"])
        assert len(bundle) + 1 + len(items[start]) > limit


def test_a_bundle_of_real_runs_is_a_run_bundle() -> None:
    settings = load_settings()
    values = []
    for n in range(3):
        metrics = evaluate_run(encode(make_event(run_id=f"r{n}", passed=n != 1)), settings)
        values.append(metrics.model_dump_json().encode())  # type: ignore[union-attr]
    [bundle] = bundle_runs(values, 1 << 20)
    parsed = RunBundle.model_validate_json(bundle)
    assert [r.run_id for r in parsed.runs] == ["r0", "r1", "r2"]
    assert parsed.model_dump_json().encode() == bundle
