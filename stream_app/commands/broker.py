"""`stream-app broker`: the embedded Tansu broker on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import argparse
import time

from stream_app import exit_codes
from stream_app.cli import options, runner
from stream_app.cli.command import Command
from stream_app.errors import UserError


class BrokerCommand(Command):
    """Starts the broker, says how to point the other commands at it, and stops it on Ctrl-C
    or SIGTERM (memory storage: what it held is gone)."""

    name = "broker"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """`--port` and `--config`."""
        parser.add_argument(
            "--port",
            type=options.port_or_any,
            default=9092,
            help="port (default 9092; 0 = any free)",
        )
        options.add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Run the broker until a stop signal; a broker that exits by itself is an error."""
        from stream_app.brokers.tansu import EmbeddedBroker

        stopped: list[int] = []

        def stop(signum: int, _frame: object) -> None:
            stopped.append(signum)

        # Before the first line is printed: a Ctrl-C right after it must stop the broker cleanly.
        with runner.handling(runner.STOP, stop):
            settings = options.settings_of(args)
            broker = EmbeddedBroker(port=args.port, binary=settings.tansu_bin).start()
            print(f"Tansu broker listening on {broker.address} (memory storage)", flush=True)
            print(f"  export EVALSTREAM_BROKER_URL={broker.url}", flush=True)
            print("Ctrl-C stops it.", flush=True)
            try:
                while not stopped:
                    if broker.process is None or broker.process.poll() is not None:
                        raise UserError("the broker exited unexpectedly")
                    time.sleep(0.2)
            finally:
                broker.stop()
        print("broker stopped", flush=True)
        return exit_codes.OK


COMMAND = BrokerCommand()
