"""`stream-app pass-at-k`: unbiased pass@k for n samples with c correct, as JSON."""

from __future__ import annotations

import argparse
import json

from stream_app import exit_codes
from stream_app.cli.command import Command
from stream_app.errors import UserError


class PassAtKCommand(Command):
    """The estimator of `stream_app.metrics.pass_at_k`, for one or more k."""

    name = "pass-at-k"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """N, C and one or more K."""
        parser.add_argument("n", type=int, metavar="N", help="samples")
        parser.add_argument("c", type=int, metavar="C", help="correct samples")
        parser.add_argument("k", type=int, nargs="+", metavar="K", help="one or more k")

    def run(self, args: argparse.Namespace) -> int:
        """Print pass@k for each k."""
        from stream_app.metrics.pass_at_k import calculate_pass_at_k

        try:
            # Named as calculate_pass_at_k_for_multiple and seed 004 name them, not bare "1".
            scores = {f"pass@{k}": calculate_pass_at_k(args.n, args.c, k) for k in args.k}
        except ValueError as exc:
            raise UserError(str(exc)) from None
        print(json.dumps({"n": args.n, "c": args.c, "pass_at_k": scores}, indent=2))
        return exit_codes.OK


COMMAND = PassAtKCommand()
