"""Where runs come from, one module per source: ProjectScylla experiment directories
(`scylla`), the watcher that publishes a directory live (`watcher`), and the producer that sends
events to the input topic (`producer`). docs/operations.md, 'From ProjectScylla'."""
