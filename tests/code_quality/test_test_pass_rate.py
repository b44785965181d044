import subprocess
import sys
from pathlib import Path

import pytest

from stream_app.code_quality.test_pass_rate import calculate_test_pass_rate, from_junit_xml


def test_pass_rate() -> None:
    assert calculate_test_pass_rate(8, 2) == 0.8
    assert calculate_test_pass_rate(6, 1, errors=1, skipped=5) == 0.75  # skipped did not run
    assert calculate_test_pass_rate(0, 0) is None
    assert calculate_test_pass_rate(0, 0, skipped=3) is None
    assert calculate_test_pass_rate(0, 4) == 0.0
    with pytest.raises(ValueError, match="failed must be >= 0"):
        calculate_test_pass_rate(1, -1)


def test_from_a_real_junit_report(tmp_path: Path) -> None:
    suite = tmp_path / "test_sample.py"
    suite.write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_ok_too(): pass\n"
        "def test_fail(): assert 1 == 2\n"
        "@pytest.fixture\ndef broken(): raise RuntimeError('setup')\n"
        "def test_error(broken): pass\n"
        "@pytest.mark.skip\ndef test_skip(): pass\n"
    )
    report = tmp_path / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(suite),
        ],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    counts = from_junit_xml(report)
    assert (counts.passed, counts.failed, counts.errors, counts.skipped) == (2, 1, 1, 1)
    assert calculate_test_pass_rate(**counts.model_dump()) == 0.5
