"""tools/_import_stubs.py: the import-only stand-ins the conformance recorder gives old vLLM connector modules.

The recorder runs vLLM in a scratch environment; these tests need no vLLM.
They pin what a stand-in may do (let an import succeed, answer nothing) and
where it may be seen (only inside the import that needed it).
"""

from __future__ import annotations

import abc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import _import_stubs  # noqa: E402

ROOT = "hma_conformance_absent_backend"


def _not_found(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named '{name}'", name=name)


def test_a_missing_back_end_is_named_by_its_top_level_package():
    assert _import_stubs.missing_package(_not_found("mooncake.engine")) == "mooncake"


def test_vllm_itself_is_never_stood_in():
    assert _import_stubs.missing_package(_not_found("vllm._C")) is None
    error = ImportError("cannot import name 'X' from 'vllm.config' (/x/vllm/config.py)")
    assert _import_stubs.missing_package(error) is None


def test_a_name_the_installed_package_lacks_stands_the_whole_package_in():
    error = ImportError("cannot import name 'CudaIPCWrapper' from 'lmcache.v1.multiprocess.custom_types' (/x.py)")
    assert _import_stubs.missing_package(error) == "lmcache"


def test_the_cause_of_a_reworded_import_error_is_read():
    # vLLM 0.13.0: raise ImportError("Please install mooncake ...") from e
    try:
        try:
            raise _not_found("mooncake")
        except ImportError as inner:
            raise ImportError("Please install mooncake by following the instructions") from inner
    except ImportError as outer:
        assert _import_stubs.missing_package(outer) == "mooncake"


def test_an_error_that_names_no_module_is_not_a_back_end():
    assert _import_stubs.missing_package(ImportError("libcudart.so.12: cannot open shared object file")) is None


def test_a_stand_in_lets_imports_succeed_and_is_seen_only_inside_its_block():
    with pytest.raises(ModuleNotFoundError):
        __import__(f"{ROOT}.engine")
    with _import_stubs.stood_in([ROOT]):
        from hma_conformance_absent_backend.engine import TransferEngine  # type: ignore  # noqa: I001

        assert TransferEngine(1, key=2).anything.at_all() is not None
        assert TransferEngine["generic"] is TransferEngine  # a generic in an annotation
    assert not any(name.split(".")[0] == ROOT for name in sys.modules)
    with pytest.raises(ModuleNotFoundError):
        __import__(f"{ROOT}.engine")


def test_a_class_built_on_a_stand_in_is_known_as_one():
    with _import_stubs.stood_in([ROOT]):
        from hma_conformance_absent_backend import Base  # type: ignore

        class Connector(Base, abc.ABC):  # vLLM mixes its ABCs with back-end classes
            pass

    class Plain:
        pass

    assert _import_stubs.from_stub(Base)
    assert _import_stubs.from_stub(Connector)
    assert not _import_stubs.from_stub(Plain)
    assert not _import_stubs.from_stub(abc.ABC)


def test_discovery_stands_in_what_an_import_needs_and_reports_it(tmp_path, monkeypatch):
    package = tmp_path / "hma_conformance_fake_connector.py"
    package.write_text(f"from {ROOT}.engine import TransferEngine\nVALUE = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _import_stubs.in_fork(_import_stubs.discover, "hma_conformance_fake_connector", frozenset())
    assert found == {"stubs": [ROOT], "error": None,
                     "why": {ROOT: f"ModuleNotFoundError: No module named '{ROOT}'"}}
    assert "hma_conformance_fake_connector" not in sys.modules  # the fork kept what it imported


def test_discovery_never_stands_in_a_protected_package(tmp_path, monkeypatch):
    package = tmp_path / "hma_conformance_fake_connector2.py"
    package.write_text(f"import {ROOT}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _import_stubs.in_fork(_import_stubs.discover, "hma_conformance_fake_connector2", frozenset({ROOT}))
    assert found["stubs"] == []
    assert found["error"] == f"ModuleNotFoundError: No module named '{ROOT}'"
