"""The `stream-app` commands, one module each: a `Command` (`stream_app.cli.command`) named
`COMMAND`, listed by name in the registry, `stream_app.cli.registry`."""
