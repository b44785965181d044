"""`python -m stream_app` is `stream-app`."""

from stream_app.cli.main import main

raise SystemExit(main())
