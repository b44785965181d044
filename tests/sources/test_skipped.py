"""What a source could make no event of is said on stderr: a few lines per cause, never one per
sample of a thousand-sample eval, and never a control character a hostile log put there."""

from pathlib import Path

from stream_app.sources.skipped import SHOWN_PER_CAUSE, Skipped, skipped_lines


def test_a_cause_of_many_samples_is_a_few_lines_and_a_count() -> None:
    log, other = Path("logs/a.eval"), Path("logs/b.eval")
    skipped = [Skipped(log, "no_tier", f"sample {i} epoch 1: no tier") for i in range(1000)]
    skipped += [Skipped(other, "unreadable_log", "not a zip"), Skipped(log, "bad_score", "s 7")]
    lines = skipped_lines(skipped)
    assert lines == [
        *(f"skipped {log}: no_tier: sample {i} epoch 1: no tier" for i in range(SHOWN_PER_CAUSE)),
        f"skipped {other}: unreadable_log: not a zip",
        f"skipped {log}: bad_score: s 7",
        f"skipped {log}: no_tier: {1000 - SHOWN_PER_CAUSE} more like it",
    ]


def test_control_characters_of_a_hostile_log_are_written_as_escapes() -> None:
    hostile = Skipped(Path("logs/\x1b[2Jx.eval"), "no_tier", "sample \x1b]0;owned\x07 epoch 1\r")
    [line] = skipped_lines([hostile])
    assert line.isprintable()
    assert "\\x1b[2J" in line
    assert "\\x07" in line
    assert "\\r" in line
