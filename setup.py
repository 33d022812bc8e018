"""Build hook: the modules every decision goes through, compiled with mypyc.

mypyc (mypy's compiler, which black and mypy are shipped compiled with) turns
them into C extensions from the same source; nothing in the source is written
for it (docs/performance.md has the figures with and without). The package
stays pure Python where that is asked for:

- editable installs (`pip install -e .`), so that an edit takes effect at once;
- HMA_POLICY_PURE=1 in the environment.

mypyc checks the annotations at run time, so a type error in these modules
fails the build. CI (.ci/run) runs the compiled install's commands (an audit,
a decision, the bundled policy's tests and check) and the test suite on the
editable, pure form.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup

# Per decision: input (normalise, validate) and its limits walk, the schema check, facts,
# the step table and the evaluator.
COMPILED = ("core/accept", "core/input", "core/bounds", "core/facts", "core/table", "core/evaluate", "core/memo")


def _extensions() -> list:
    editable = any(arg in ("editable_wheel", "develop") for arg in sys.argv)
    if editable or os.environ.get("HMA_POLICY_PURE") == "1":
        return []
    from mypyc.build import mypycify

    root = Path(__file__).resolve().parent
    # mypyc names a module after its path: engine/ is staged as hma_policy/.
    staging = root / "build" / "mypyc-src"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(root / "engine", staging / "hma_policy", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    paths = [os.path.relpath(staging / "hma_policy" / f"{name}.py") for name in COMPILED]
    return mypycify(["--ignore-missing-imports", "--follow-imports=silent", *paths], opt_level="3",
                    target_dir=os.path.relpath(root / "build" / "mypyc"))


setup(ext_modules=_extensions())
