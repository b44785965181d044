"""`stream-app codebleu`: CodeBLEU of a candidate file against a reference file, as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from stream_app import exit_codes
from stream_app.cli import options
from stream_app.cli.command import Command
from stream_app.errors import unreadable


class CodeBleuCommand(Command):
    """Scores with the settings' CodeBLEU weights."""

    name = "codebleu"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The two files, `--language` and `--config`."""
        parser.add_argument("candidate", metavar="CANDIDATE_FILE")
        parser.add_argument("reference", metavar="REFERENCE_FILE")
        parser.add_argument("--language", default="python", help="python (default) or any other")
        options.add_config(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Print the score and its parts."""
        from stream_app.code_quality.code_bleu import calculate_code_bleu

        settings = options.settings_of(args)
        texts = []
        for name in (args.candidate, args.reference):
            try:
                texts.append(Path(name).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                raise unreadable(name, exc) from None
        result = calculate_code_bleu(texts[0], texts[1], settings.code_bleu.weights, args.language)
        print(result.model_dump_json(indent=2))
        return exit_codes.OK


COMMAND = CodeBleuCommand()
