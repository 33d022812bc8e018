"""The package's annotations hold: mypy finds no error in engine/.

The package ships py.typed, so programs that embed it type-check against
these annotations; and mypyc, which compiles some modules at install
(setup.py), refuses a module whose annotations mypy rejects. mypy is run
as the build runs it (the same version, pinned in pyproject.toml, and the
same two options), for the oldest Python the package supports (its
requires-python in pyproject.toml), with typeshed's stubs for PyYAML
installed by the test extras, which check the YAML readers more closely
than the build can.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"


def oldest_python() -> str:
    """The oldest Python the package supports, as requires-python says (">=3.10": 3.10)."""
    found = re.search(r'^requires-python = ">=(3\.[0-9]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found, "pyproject.toml states requires-python as >=3.N"
    return found.group(1)


def test_mypy_finds_no_error_in_the_package(tmp_path: Path) -> None:
    # mypy names modules after their folder: engine/ is staged as hma_policy/, as setup.py stages it.
    shutil.copytree(ENGINE, tmp_path / "hma_policy", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                             "--python-version", oldest_python(), "--cache-dir", str(tmp_path / "cache"), "hma_policy"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout
