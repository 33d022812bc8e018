"""Import-only stand-ins for the optional back ends that a vLLM connector module imports at its top.

Runs inside a release's scratch environment (tools/_vllm_child.py), never in
hma_policy. Some releases' connector modules import their back end when the
module is loaded (0.13.0's ``mooncake_connector`` does ``from mooncake.engine
import TransferEngine``; its ``lmcache_integration`` imports names that the
installed LMCache, a later one, no longer has). Without the back end the
module cannot be loaded, and the release's factory cannot even resolve the
connector's class, although the class, and whether it inherits
``SupportsHMA``, is vLLM's own.

A stand-in here replaces one whole top-level package (``mooncake``,
``lmcache``): every module under it is a placeholder module whose every
attribute is a placeholder class. It lets the imports succeed and does
nothing else. Nothing is stubbed by name in advance: ``discover`` imports one
of the release's connector modules (in a forked process, so that each module
starts from the same state) and, when the ``ImportError`` names a package
outside vLLM that is missing or installed without what the module imports,
or an installed package raises while vLLM imports it (one later than this
release), stands that package in and tries again; vLLM itself, and any
package vLLM's core had already imported, is never stood in. ``load`` then imports such a
module for good with only its own stand-ins, and only for the length of that
import, so that no other module's guarded ``try: import mooncake`` ever sees
one. The caller records what was stood in, and a connector class that would
itself come from a stand-in (``from_stub``) is never a case.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import re
import sys
import traceback
import types

MARK = "__hma_conformance_stub__"
# More stand-ins than this for one module means it is not a missing back end.
MAX_STUBS = 12
_CANNOT_IMPORT = re.compile(r"cannot import name '([A-Za-z_][A-Za-z0-9_]*)' from '([A-Za-z_][\w.]*)'")


class _StubMeta(abc.ABCMeta):
    """Placeholder classes: every attribute is another placeholder; ABCMeta, so vLLM may mix them with its ABCs."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}", cls.__module__)

    def __getitem__(cls, item):  # a generic in an annotation: ``MessagingFuture[Any]``
        return cls


def placeholder(name: str, module: str) -> type:
    def _call(self, *args, **kwargs):
        return self

    def _getattr(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return placeholder(f"{name}.{attr}", module)()

    namespace = {MARK: True, "__module__": module, "__init__": lambda self, *a, **k: None,
                 "__call__": _call, "__getattr__": _getattr}
    cls = _StubMeta(name.rsplit(".", 1)[-1], (), namespace)
    cls.__qualname__ = name
    return cls


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        setattr(self, MARK, True)
        self.__path__ = []  # a package, so that ``mooncake.engine`` is a stand-in too

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        value = placeholder(attr, self.__name__)
        setattr(self, attr, value)
        return value


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.roots: set[str] = set()  # the packages stood in right now

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.util.spec_from_loader(fullname, _Loader(), is_package=True)
        return None


_FINDER = _Finder()


def _drop(root: str, stubs: bool) -> None:
    """Forget the loaded modules of a package: its stand-ins (``stubs``) or its installed modules."""
    for loaded in [m for m in sys.modules if m.split(".")[0] == root]:
        if bool(getattr(sys.modules[loaded], MARK, False)) == stubs:
            del sys.modules[loaded]


def activate(root: str) -> None:
    """Stand ``root`` (a top-level package) in from now on; its installed modules, if loaded, are forgotten."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.roots.add(root)
    _drop(root, stubs=False)


@contextlib.contextmanager
def stood_in(roots):
    """Stand ``roots`` in only inside the block, and forget the stand-ins after it.

    What was imported inside keeps its references; anything imported later
    (another connector module's guarded ``try: import mooncake``) meets the
    package as installed, or missing, again.
    """
    for root in roots:
        activate(root)
    try:
        yield
    finally:
        for root in roots:
            _FINDER.roots.discard(root)
            _drop(root, stubs=True)


def _vllm_own(module: str) -> bool:
    return module.split(".")[0] == "vllm"


def _import_errors(exc: BaseException):
    """The ImportErrors of an exception's chain (vLLM re-raises "Please install mooncake ..." from the real one)."""
    seen, todo = set(), [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ImportError):
            yield current
        todo += [current.__cause__, current.__context__]


def _package_of(filename: str) -> str | None:
    """The top-level package a source file belongs to, by the sys.path entry it lies under."""
    path = os.path.abspath(filename)
    for entry in sorted((os.path.abspath(e) for e in sys.path if e), key=len, reverse=True):
        if path.startswith(entry + os.sep):
            first = path[len(entry) + 1:].split(os.sep)[0]
            return first[:-3] if first.endswith(".py") else first
    return None


def missing_package(exc: BaseException) -> str | None:
    """The package outside vLLM to stand in for an ImportError; None if there is none.

    The package vLLM's own code imported: if the failing import ran inside
    another installed package (LMCache importing a dependency of its own that
    is not installed here), that package, as vLLM asked for it; otherwise the
    package that is missing or lacks the name.
    """
    for error in _import_errors(exc):
        if isinstance(error, ModuleNotFoundError) and error.name:
            module = error.name
        else:
            match = _CANNOT_IMPORT.search(str(error))
            if not match:
                continue
            module = match.group(2)
        module = _entered_from_vllm(error) or module
        return None if _vllm_own(module) else module.split(".")[0]
    return _entered_from_vllm(exc)


def _entered_from_vllm(exc: BaseException) -> str | None:
    """The outside package whose code raised ``exc`` after vLLM's code last called into it, if any.

    An installed package that fails while vLLM imports it (LMCache 0.5.6
    under vLLM 0.9.1 raises an AttributeError in its own logging setup) is,
    for this release, as good as absent.
    """
    packages = [_package_of(frame.filename) for frame in traceback.extract_tb(exc.__traceback__)]
    if "vllm" not in packages:
        return None
    after_vllm = packages[len(packages) - packages[::-1].index("vllm"):]
    return next((p for p in after_vllm if p and p != "vllm"), None)


def discover(module_path: str, protected: frozenset) -> dict:
    """Import a vLLM connector module in this process, standing in each package its ImportErrors name.

    ``protected``: packages never stood in (those vLLM's core had already
    imported: they are vLLM's requirements, not a connector's back end).
    """
    stubs: list[str] = []
    why: dict[str, str] = {}  # each stand-in -> the error that called for it
    while True:
        try:
            importlib.import_module(module_path)
            return {"stubs": stubs, "why": why, "error": None}
        except Exception as exc:
            missing = missing_package(exc) if isinstance(exc, ImportError) else _entered_from_vllm(exc)
            text = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            if missing is None or missing in protected or missing in stubs or len(stubs) == MAX_STUBS:
                # Not a back end's fault: the factory meets the same error in the cases.
                return {"stubs": stubs, "why": why, "error": text}
            activate(missing)  # for the rest of this (forked) process
            stubs.append(missing)
            why[missing] = text


def load(module_path: str, roots) -> dict:
    """Import a connector module with its stand-ins, here and for good: which vLLM modules were first loaded meanwhile?"""
    before = set(sys.modules)
    error = None
    with stood_in(roots):
        try:
            importlib.import_module(module_path)
        except Exception as exc:  # reported; the cases meet the same error through the factory
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
    loaded = sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "vllm")
    return {"loaded": loaded, "error": error}


def in_fork(function, *args) -> dict:
    """``function(*args)`` (a JSON-able dict) in a forked copy of this process, so that nothing it imports stays here."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked copy
        os.close(read_end)
        try:
            payload = json.dumps(function(*args))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised in a fork
            payload = json.dumps({"stubs": [], "error": f"{type(exc).__name__}: {exc}"})
        with os.fdopen(write_end, "w", encoding="utf-8") as handle:
            handle.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return {"stubs": [], "error": "the forked process died"}


def from_stub(value) -> bool:
    """Is this class (or anything in its MRO, or its module) a stand-in?"""
    if getattr(value, MARK, False):
        return True
    for klass in getattr(value, "__mro__", ()):
        if getattr(klass, MARK, False):
            return True
    module = sys.modules.get(getattr(value, "__module__", "") or "")
    return bool(module is not None and getattr(module, MARK, False))
