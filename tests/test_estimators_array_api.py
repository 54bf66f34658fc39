"""scikit-learn's array-API input checks of the estimators, run in a child process with ``SCIPY_ARRAY_API=1``
(the switch must be set before SciPy is first imported; tests/conftest.py moves these checks out of the main
run, where they could only skip)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_array_api_input_checks_pass_in_array_api_mode():
    files = sorted(str(p) for p in HERE.glob("test_estimators*.py") if p.name != Path(__file__).name)
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                          "check_array_api_input", *files], cwd=HERE.parent, env=env, capture_output=True,
                         text=True, timeout=600)
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 4, tail  # one per estimator at least
    assert "skipped" not in tail and "failed" not in tail, tail
