"""`code` and `tests` on events flow into per-run metrics, window statistics and replay."""

import json
import subprocess
import sys

import pytest

from stream_app.core.config import CoreConfig
from stream_app.core.ingest import evaluate_run
from stream_app.core.replay import replay_lines
from stream_app.core.window import TierWindow
from stream_app.service.settings import load_settings
from tests.helpers import encode, make_event

CODE = {"candidate": "def f(a):\n    return a + 1\n", "reference": "def f(b):\n    return b + 1\n"}


def test_run_metrics_carry_code_bleu_and_test_pass_rate() -> None:
    metrics = evaluate_run(
        encode(make_event(code=CODE, tests={"passed": 3, "failed": 1})), CoreConfig()
    )
    assert not hasattr(metrics, "reason")
    assert metrics.code_bleu is not None
    assert 0 < metrics.code_bleu < 1
    assert metrics.test_pass_rate == 0.75
    plain = evaluate_run(encode(make_event()), CoreConfig())
    assert (plain.code_bleu, plain.test_pass_rate) == (None, None)  # type: ignore[union-attr]


def test_window_statistics_over_runs_that_have_them() -> None:
    events = [
        encode(make_event(run_id="a", code=CODE, tests={"passed": 1, "failed": 1})),
        encode(make_event(run_id="b", code={**CODE, "candidate": CODE["reference"]})),
        encode(make_event(run_id="c")),
        encode(make_event(run_id="d", tests={"passed": 0, "failed": 0, "skipped": 2})),
    ]
    agg = replay_lines(events, CoreConfig()).tiers[0]
    assert agg.runs == 4
    assert agg.code_bleu is not None
    assert agg.code_bleu.count == 2
    assert agg.code_bleu.max == 1.0
    assert agg.test_pass_rate is not None
    assert agg.test_pass_rate.count == 1  # run d ran no test
    assert agg.test_pass_rate.median == 0.5
    none = replay_lines([encode(make_event())], CoreConfig()).tiers[0]
    assert (none.code_bleu, none.test_pass_rate) == (None, None)


def test_config_weights_change_code_bleu() -> None:
    only_ast = load_settings(
        code_bleu={"weights": {"ngram": 0, "weighted_ngram": 0, "ast": 1, "dataflow": 0}}
    )
    metrics = evaluate_run(encode(make_event(code=CODE)), only_ast)
    assert metrics.code_bleu == 1.0  # type: ignore[union-attr]  # same structure, other names
    with pytest.raises(ValueError, match="needs exactly"):
        load_settings(code_bleu={"weights": {"ngram": 1}})


def test_old_window_state_without_code_metrics_still_loads() -> None:
    old_row = [1_700_000_000_000_000, "r1", 1.0, 0.9, 0.1, 60.0, 0.1, 0.95]
    window = TierWindow.from_state(10, [old_row])
    assert window.entries[0].code_bleu is None


def test_cli_codebleu_and_pass_at_k(tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    (base / "c.py").write_text(CODE["candidate"])
    (base / "r.py").write_text(CODE["reference"])
    run = [sys.executable, "-m", "stream_app"]
    out = subprocess.run(
        [*run, "codebleu", str(base / "c.py"), str(base / "r.py")],
        capture_output=True,
        timeout=60,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert set(doc) == {
        "code_bleu",
        "ngram_match",
        "weighted_ngram_match",
        "ast_match",
        "dataflow_match",
        "language",
    }
    assert doc["ast_match"] == 1.0
    out = subprocess.run(
        [*run, "pass-at-k", "10", "3", "1", "5"], capture_output=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == {
        "n": 10,
        "c": 3,
        "pass_at_k": {"pass@1": 0.3, "pass@5": pytest.approx(11 / 12)},
    }
    bad = subprocess.run(
        [*run, "pass-at-k", "5", "1", "6"], capture_output=True, timeout=60, check=False
    )
    assert bad.returncode == 2
    assert b"cannot exceed n_samples" in bad.stderr
    missing = subprocess.run(
        [*run, "codebleu", "/nonexistent.py", str(base / "r.py")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
    assert b"cannot read /nonexistent.py" in missing.stderr
