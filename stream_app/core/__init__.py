"""The pure core: the contract's validation, per-run metrics, rolling tier windows, aggregates,
the batch fold and replay. No Faust, Kafka or Prometheus import: the worker and `replay` both call
it, so their results cannot differ."""
