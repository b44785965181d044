"""The base of every error a user can fix: a bad option, a missing file, a broker or worker out of
reach. The CLI prints any of them as one line and exits with status 2 (`exit_codes.USAGE`), never
a traceback; library code raises the subclass of its own concern, the CLI needs to know only
this one."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; its message is one line that says what and, where it can, how
    to fix it."""


def unreadable(path: object, exc: OSError | UnicodeDecodeError) -> UserError:
    """The error of an input file a command cannot read, worded alike in every command: the
    path and the system's reason, without the errno and path Python's message repeats."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return UserError(f"cannot read {path}: {reason}")
