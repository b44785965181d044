"""ProjectScylla experiment directories as `run-completed` events: where runs land on disk
(`layout`), one run directory as an event (`run_event`), which runs are ready (`scanner`), and
what a watcher already published (`watch_state`). Pure Python and the filesystem: the `watch`
command adds Kafka and file events, `replay` adds nothing."""
