"""Text from the outside (producers' ids, Kafka records, Alertmanager's labels) made safe to
print on a terminal, shared by everything that prints it (`tail`, `observe`, `backtest`)."""

from __future__ import annotations


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every character that is not printable (an escape sequence, a carriage return,
    a bidi override, a line break unless `keep_newlines`) written as its Python escape, so that
    it can neither drive the terminal nor break a one-line record."""
    return "".join(
        ch
        if ch.isprintable() or (keep_newlines and ch == "\n")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )
