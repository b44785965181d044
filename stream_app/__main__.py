"""`python -m stream_app` is `stream-app`."""

from stream_app.commands.cli import main

raise SystemExit(main())
