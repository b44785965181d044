"""The `stream-app` command line around the commands of `stream_app.commands`: `main` dispatches
and maps errors to exit statuses, `registry` names the commands, `command` is what each of them
is, `options` the options and argument types they share, `history` what replay and backtest read,
`runner` the event loop and signals of those that run until stopped."""
