"""`stream-app observe`: the project's alerts without Docker (`stream_app.observe`): Prometheus and
Alertmanager on loopback against local workers, every notification printed, until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
import threading
from types import FrameType

from stream_app import exit_codes
from stream_app.cli import runner
from stream_app.cli.command import Command
from stream_app.cli.options import (
    add_config,
    duration,
    host_port,
    options_of,
    port,
    port_or_any,
    settings_of,
)
from stream_app.observe import LOOPBACK
from stream_app.observe.config import ObserveConfig
from stream_app.observe.stack import ChildExited, Interrupted, ObserveStack
from stream_app.ports import port_open, split_host_port
from stream_app.processes import stop_signals


def start_block(stack: ObserveStack) -> str:
    """What runs where and how to see the alerts, printed once everything is ready."""
    config, prom, am = stack.config, stack.prometheus_url, stack.alertmanager_url
    rules = ", ".join(config.rule_files())
    ui = (
        ""
        if stack.tools is None or stack.tools.alertmanager_has_ui
        else "  (Debian's build has no web UI: its page lists the API; amtool works)"
    )
    lines = [
        "evalstream observe: Prometheus and Alertmanager on loopback; alerts are printed here",
        f"  scraping       {', '.join(config.targets)} (job evalstream) every "
        f"{config.scrape_interval}",
        f"  rules          {rules}, evaluated every {config.evaluation_interval}",
        f"  Prometheus     {prom}/classic/alerts   (also {prom}/classic/graph, /classic/rules, "
        "/classic/targets, /consoles/prometheus.html)",
        f"  Alertmanager   {am}/{ui}",
        f"                 {am}/api/v2/alerts, or: amtool --alertmanager.url={am} alert query",
        f"  notifications  Alertmanager -> {stack.receiver.url}, printed below "
        f"(group_wait {config.group_wait}; tier alerts held back while no worker is up)",
        f"  runbooks       {config.runbooks}",
        f"  temp dir       {stack.workdir} (configs and data, removed on exit)",
    ]
    for target in config.targets:
        host, target_port = split_host_port(target)
        if not port_open(host.strip("[]"), target_port):
            lines.append(
                f"Nothing answers on {target} yet: start a worker (make demo, or stream-app "
                "worker); until one does, EvalStreamNoWorker will fire."
            )
    lines.append("Ctrl-C stops it.")
    return "\n".join(lines)


def run_observe(config: ObserveConfig, raw_json: bool = False) -> int:
    """Run the stack until SIGINT, SIGTERM or SIGHUP (0), or until a child exits by itself (1).

    Raises:
        ObserveError: something the user can fix; nothing is left running.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGHUP too: a closed terminal must not leave Prometheus and Alertmanager (each in a
    # session of its own) running on their ports.
    with runner.handling(stop_signals(), on_signal):
        stack = ObserveStack(config, raw_json=raw_json, stop_event=stop)
        try:
            stack.start()
            print(start_block(stack), flush=True)
            while not stop.wait(0.2):
                stack.check()
            code = exit_codes.OK
        except Interrupted:
            code = exit_codes.OK
        except ChildExited as exc:
            print(f"stream-app observe: {exc}", file=sys.stderr, flush=True)
            code = exit_codes.INCOMPLETE
        finally:
            stack.stop()
    print(
        "observe: stopped Prometheus, Alertmanager and the receiver; temp dir removed", flush=True
    )
    return code


class ObserveCommand(Command):
    """Runs `run_observe` with the options' ports and intervals; by default against the local
    worker (127.0.0.1 and the settings' `web_port`), the binaries under `tools_dir`."""

    name = "observe"
    description = (
        "Start the installed Prometheus and Alertmanager (scripts/install-prometheus.sh) on "
        "127.0.0.1 against local workers, with prometheus/rules/*.yml and the routing of "
        "prometheus/alertmanager.yml, and print every notification Alertmanager sends. "
        "Everything it starts stops on Ctrl-C; its temp dir is removed."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Targets, ports, intervals, the runbooks' base, `--json` and `--config`."""
        parser.add_argument(
            "--target",
            action="append",
            type=host_port,
            metavar="HOST:PORT",
            help="a worker's web address, repeatable (default: 127.0.0.1 and the settings' "
            "web_port)",
        )
        parser.add_argument("--prometheus-port", type=port, default=9090, help="(9090)")
        parser.add_argument("--alertmanager-port", type=port, default=9093, help="(9093)")
        parser.add_argument(
            "--webhook-port",
            type=port_or_any,
            default=0,
            help="the alert receiver's port (default: any free one)",
        )
        parser.add_argument("--scrape-interval", type=duration, default="15s", help="(15s)")
        parser.add_argument(
            "--evaluation-interval", type=duration, default="15s", help="rule evaluation (15s)"
        )
        parser.add_argument(
            "--group-wait",
            type=duration,
            default="30s",
            help="Alertmanager's wait before a new group's first notification (30s)",
        )
        parser.add_argument(
            "--runbook-base-url",
            metavar="URL",
            help="where the alerts' runbook links point (default: this checkout's "
            "docs/runbooks.md)",
        )
        parser.add_argument(
            "--json", action="store_true", help="print each notification's JSON as received"
        )
        add_config(parser, help="YAML or TOML config file (for web_port and tools_dir)")

    def run(self, args: argparse.Namespace) -> int:
        """The stack's exit status."""
        settings = settings_of(args)
        config = options_of(
            ObserveConfig,
            args,
            targets=tuple(args.target or (f"{LOOPBACK}:{settings.web_port}",)),
            tools_home=settings.tools_dir / "prometheus",
        )
        return run_observe(config, raw_json=args.json)


COMMAND = ObserveCommand()

if __name__ == "__main__":  # `python -m stream_app.commands.observe`, as docs/runbooks.md has it
    from stream_app.cli.main import main

    sys.exit(main(["observe", *sys.argv[1:]]))
