"""A suite: one agent's experiments watched together, per tier. What the windows hop tells the
suite hop (`message`), each run's evidence (`evidence`), an experiment's share of a suite tier
(`share`), the 14-day window and the suite's clock (`window`), the detectors (`arithmetic`,
`pooled`, `sparse`, and both as one cache in `statistics`), the suite tier's state (`state`),
its comparisons kept as its strata move (`comparison`) and what its tiers publish (`report`).
docs/statistics.md, 'Suites'."""
