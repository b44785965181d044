"""`stream-app pass-at-k`: the keys are named as seed 004 and the library name them."""

import json

import pytest

from stream_app.cli.main import main


def test_keys_are_pass_at_k(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pass-at-k", "10", "3", "1", "5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "n": 10,
        "c": 3,
        "pass_at_k": {"pass@1": pytest.approx(0.3), "pass@5": pytest.approx(11 / 12)},
    }


def test_k_above_n_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pass-at-k", "5", "1", "6"]) == 2
    err = capsys.readouterr().err
    assert "cannot exceed n_samples" in err
    assert err.count("\n") == 1
