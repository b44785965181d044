"""What the cross-tier stage stores of an experiment: each tier's medians and counts. A tier whose
window has no priced run stores a null cost, which loads back and leaves the cost spread to the
priced tiers; a null anywhere else is a corrupt state, refused."""

import json

import pytest

from stream_app.core.experiment_state import experiment_from_json, experiment_to_json
from stream_app.metrics.cross_tier import TierFigures, cross_tier_report

PRICED = TierFigures(0.8, 1.0, 0.6, 0.5, 10, 8, 7.5)
UNPRICED = TierFigures(0.9, 1.0, 0.8, None, 4, 4, 3.6)


def test_an_unpriced_tier_round_trips_and_its_cost_counts_nowhere() -> None:
    tiers = {"T0": PRICED, "T1": UNPRICED}
    assert experiment_from_json(experiment_to_json(tiers)) == tiers
    report = cross_tier_report("e", tiers)
    assert (report.cost_variance, report.cost_delta) == (0.0, 0.0)  # T0's alone
    assert report.tier_uplift == {"T1": pytest.approx(0.125)}
    alone = cross_tier_report("e", {"T1": UNPRICED})
    assert (alone.cost_variance, alone.cost_delta) == (None, None)


@pytest.mark.parametrize("field", [0, 1, 2])
def test_a_null_median_other_than_the_cost_is_refused(field: int) -> None:
    row = list(PRICED)
    row[field] = None
    with pytest.raises(ValueError, match="not a median"):
        experiment_from_json(json.dumps({"T0": row}).encode())
