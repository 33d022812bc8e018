"""Build hook: the modules on the per-document path, compiled with mypyc.

Every audited file and every decide() call goes through these modules; mypyc
(mypy's compiler, which black and mypy ship themselves compiled with) turns
them into C extensions from the same source, about 20% less CPU an audit (see
README, Performance). The package stays pure Python where that is asked for:

- editable installs (`pip install -e .`), so that an edit takes effect at once;
- HMA_POLICY_PURE=1 in the environment.

A type error in a compiled module fails the build (mypyc enforces the
annotations at run time, so they must hold); CI builds and tests both forms.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup

# Compiled, in engine/. Public classes whose docstrings matter (Decision,
# Limits, SourceLimits, Policy) live in modules left as Python.
COMPILED = ("accept", "declog", "document", "evaluate", "facts", "sources")


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
