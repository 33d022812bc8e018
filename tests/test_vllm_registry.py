"""tools/vllm_registry.py: the static reader of a vLLM wheel's connector registry.

Two kinds of test:
- every recorded release (tests/vllm_releases/facts/<version>.json, read from
  the real wheel) re-renders byte for byte to its recorded registry, so a
  change to the renderer shows up as a diff of real registries;
- read_wheel on small wheels built here with zipfile, one per feature the
  reader must get right (aliases, inheritance across modules, env switches)
  and per error it must report with its stable code.  Every synthetic module
  carries a canary: code that, if it ever ran, would leave a file behind.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import vllm_registry as vr  # noqa: E402

RELEASES = ROOT / "tests" / "vllm_releases"
KV = "vllm/distributed/kv_transfer/kv_connector/"
BASE_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.base"


# --------------------------------------------------------------------------
# Recorded releases


def _recorded_versions() -> list[str]:
    return sorted(p.stem for p in (RELEASES / "facts").glob("*.json"))


def test_recorded_releases_are_complete():
    facts = _recorded_versions()
    registries = sorted(p.stem for p in (RELEASES / "registries").glob("*.yaml"))
    assert facts, "no recorded release"
    assert facts == registries


@pytest.mark.parametrize("version", _recorded_versions())
def test_recorded_facts_render_to_recorded_registry(version):
    facts = json.loads((RELEASES / "facts" / f"{version}.json").read_text(encoding="utf-8"))
    assert facts["vllm_version"] == version
    expected = (RELEASES / "registries" / f"{version}.yaml").read_bytes()
    assert vr.render_registry(facts).encode("utf-8") == expected


# --------------------------------------------------------------------------
# Synthetic wheels


def canary(tmp_path: Path, tag: str) -> str:
    """Module text that writes <tmp>/ran-<tag> if it is ever executed."""
    target = tmp_path / f"ran-{tag}"
    return f"import pathlib\npathlib.Path({str(target)!r}).write_text('executed')\nraise SystemExit('executed')\n"


BASE = """
from abc import ABC
class SupportsHMA(ABC):
    pass
class KVConnectorBase_V1(ABC):
    pass
"""


def factory(*registrations: tuple[str, str, str]) -> str:
    lines = ["class KVConnectorFactory:", "    @classmethod", "    def register_connector(cls, name, module_path, class_name):",
             "        pass", ""]
    for name, module, cls in registrations:
        lines.append(f"KVConnectorFactory.register_connector({name!r}, {module!r}, {cls!r})")
    return "\n".join(lines) + "\n"


def make_wheel(tmp_path: Path, files: dict[str, str], *, name: str = "vllm", version: str = "9.9.9",
               with_canary: bool = True) -> Path:
    """A wheel whose every .py starts with a canary; files maps path -> text."""
    path = tmp_path / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        for member, text in files.items():
            body = (canary(tmp_path, member.replace("/", "_")) + text) if with_canary and member.endswith(".py") else text
            zf.writestr(member, body)
    return path


def no_canary_ran(tmp_path: Path) -> None:
    assert not list(tmp_path.glob("ran-*")), "wheel code was executed"
    assert not any(m.startswith("vllm.distributed") for m in sys.modules), "a wheel module was imported"


def test_alias_through_package_and_module(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/nixl/__init__.py": "from .connector import NixlConnector, NixlPullConnector\n",
        KV + "v1/nixl/connector.py": (
            "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, SupportsHMA\n"
            "class NixlBaseConnector(KVConnectorBase_V1, SupportsHMA):\n    pass\n"
            "class NixlPullConnector(NixlBaseConnector):\n    pass\n"
            "NixlConnector = NixlPullConnector\n"),
        KV + "factory.py": factory(("NixlConnector", "vllm.distributed.kv_transfer.kv_connector.v1.nixl", "NixlConnector")),
    })
    facts = vr.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    assert facts["vllm_version"] == "9.9.9"
    assert facts["marker"] == f"{BASE_MODULE}:SupportsHMA"
    (reg,) = facts["registrations"]
    assert [alt["ref"]["class"] for alt in reg["resolves"]] == [
        "vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector:NixlPullConnector"]
    pull = facts["classes"]["vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector:NixlPullConnector"]
    assert pull["bases"] == ["NixlBaseConnector"] and pull["supports_hma"] is True
    assert pull["hma_from"].endswith(":NixlBaseConnector")
    text = vr.render_registry(facts)
    assert "  NixlConnector:\n    supports_hma: true\n" in text
    assert "alias of NixlPullConnector" in text
    assert "NixlBaseConnector(KVConnectorBase_V1, SupportsHMA)" in text


def test_inheritance_across_two_modules_and_renamed_import(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/a.py": (
            "from .base import KVConnectorBase_V1, SupportsHMA as HMA\n"
            "class A(KVConnectorBase_V1, HMA):\n    pass\n"
            "class Plain(KVConnectorBase_V1):\n    pass\n"),
        KV + "v1/b.py": (
            "from vllm.distributed.kv_transfer.kv_connector.v1 import a as amod\n"
            "from vllm.distributed.kv_transfer.kv_connector.v1.a import Plain as P\n"
            "class B(amod.A):\n    pass\n"
            "class C(P):\n    pass\n"),
        KV + "v1/__init__.py": "",
        KV + "factory.py": factory(("B", "vllm.distributed.kv_transfer.kv_connector.v1.b", "B"),
                                   ("Cee", "vllm.distributed.kv_transfer.kv_connector.v1.b", "C")),
    })
    facts = vr.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    classes = facts["classes"]
    b = classes["vllm.distributed.kv_transfer.kv_connector.v1.b:B"]
    assert b["base_refs"] == ["class:vllm.distributed.kv_transfer.kv_connector.v1.a:A"]
    assert b["supports_hma"] is True and b["connector"] is True
    assert classes["vllm.distributed.kv_transfer.kv_connector.v1.b:C"]["supports_hma"] is False
    text = vr.render_registry(facts)
    assert "  B:\n    supports_hma: true\n" in text
    # the name differs from the class: the entry says which class
    assert "  Cee:\n    supports_hma: false\n    module_path: vllm.distributed.kv_transfer.kv_connector.v1.b\n    class: C\n" in text


LMCACHE_FUNCTION = """
import os
from .base import KVConnectorBase_V1
class MPUpstream(KVConnectorBase_V1):
    pass
def _resolve():
    if os.environ.get("LMCACHE_USE_UPSTREAM_MP"):
        return MPUpstream
    try:
        from lmcache.integration.vllm.lmcache_mp_connector import LMCacheMPConnector as Ext
        return Ext
    except ImportError:
        return MPUpstream
LMCacheMPConnector = _resolve()
"""

LMCACHE_IF = """
import os
from .base import KVConnectorBase_V1, SupportsHMA
class LMCacheMPConnectorUpstream(KVConnectorBase_V1):
    pass
class LMCacheMPConnectorHMA(KVConnectorBase_V1, SupportsHMA):
    pass
if os.getenv("LMCACHE_USE_UPSTREAM_MP"):
    LMCacheMPConnector = LMCacheMPConnectorUpstream
else:
    LMCacheMPConnector = LMCacheMPConnectorHMA
"""


@pytest.mark.parametrize("source", [LMCACHE_FUNCTION, LMCACHE_IF], ids=["function", "module-if"])
def test_env_switch_becomes_a_case(tmp_path, source):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/lmcache_mp_connector.py": source,
        KV + "factory.py": factory(("LMCacheMPConnector", "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector",
                                    "LMCacheMPConnector")),
    })
    facts = vr.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    (switch,) = [s for s in facts["switches"] if s["name"] == "LMCacheMPConnector"]
    assert switch["env"] == ["LMCACHE_USE_UPSTREAM_MP"]
    first = facts["registrations"][0]["resolves"][0]
    assert first["when"] == [{"env": "LMCACHE_USE_UPSTREAM_MP", "test": "set"}]
    text = vr.render_registry(facts)
    assert "    supports_hma: true\n" in text  # the default: external LMCache, or the HMA class
    assert "    cases:\n      - id: " in text
    assert "        when: {env_lmcache_use_upstream_mp: true}\n        supports_hma: false\n" in text


def test_switch_on_an_env_variable_the_engine_lacks(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/x.py": (
            "import os\nfrom .base import KVConnectorBase_V1, SupportsHMA\n"
            "class Old(KVConnectorBase_V1):\n    pass\n"
            "class New(KVConnectorBase_V1, SupportsHMA):\n    pass\n"
            "X = New\n"
            "if 'VLLM_X_LEGACY' in os.environ:\n    X = Old\n"),
        KV + "factory.py": factory(("X", "vllm.distributed.kv_transfer.kv_connector.v1.x", "X")),
    })
    facts = vr.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    (switch,) = facts["switches"]
    assert switch["env"] == ["VLLM_X_LEGACY"]
    with pytest.raises(vr.RegistryError) as info:
        vr.render_registry(facts)
    assert info.value.code == "facts.unknown_switch"
    assert "VLLM_X_LEGACY" in info.value.message


def test_unknown_external_class_is_not_guessed(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/ext.py": "from some_vendor.kv import VendorConnector\n",
        KV + "factory.py": factory(("Vendor", "vllm.distributed.kv_transfer.kv_connector.v1.ext", "VendorConnector")),
    })
    facts = vr.read_wheel(str(wheel))
    assert facts["registrations"][0]["resolves"][0]["ref"]["external"] == "some_vendor.kv.VendorConnector"
    with pytest.raises(vr.RegistryError) as info:
        vr.render_registry(facts)
    assert info.value.code == "facts.unknown_external"


def test_release_without_supports_hma(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": "class KVConnectorBase_V1:\n    pass\n",
        KV + "v1/shared.py": "from .base import KVConnectorBase_V1\nclass Shared(KVConnectorBase_V1):\n    pass\n",
        KV + "factory.py": factory(("Shared", "vllm.distributed.kv_transfer.kv_connector.v1.shared", "Shared")),
    })
    facts = vr.read_wheel(str(wheel))
    assert facts["marker"] is None
    text = vr.render_registry(facts)
    assert "no SupportsHMA class" in text and "supports_hma: true" not in text


def test_render_is_deterministic_and_json_round_trips(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/lmcache_mp_connector.py": LMCACHE_FUNCTION,
        KV + "factory.py": factory(("LMCacheMPConnector", "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector",
                                    "LMCacheMPConnector")),
    })
    facts = vr.read_wheel(str(wheel))
    again = json.loads(vr.facts_json(vr.read_wheel(str(wheel))))
    assert vr.render_registry(again) == vr.render_registry(facts)
    assert facts["wheel"]["file"] in vr.render_registry(facts)
    assert facts["wheel"]["sha256"] in vr.render_registry(facts)


# --------------------------------------------------------------------------
# Errors: a stable code, one line on stderr, exit 2


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = vr.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_factory(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE})
    with pytest.raises(vr.RegistryError) as info:
        vr.read_wheel(str(wheel))
    assert info.value.code == "wheel.no_factory"
    code, out, err = run_cli(capsys, str(wheel))
    assert code == 2 and out == ""
    assert err.startswith("error: wheel.no_factory: ") and err.count("\n") == 1 and "Traceback" not in err
    no_canary_ran(tmp_path)


def test_factory_without_registrations(tmp_path):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "factory.py": factory()})
    with pytest.raises(vr.RegistryError) as info:
        vr.read_wheel(str(wheel))
    assert info.value.code == "wheel.no_factory"


def test_corrupt_zip(tmp_path, capsys):
    good = make_wheel(tmp_path, {KV + "factory.py": factory()})
    corrupt = tmp_path / "vllm-1.0-py3-none-any.whl"
    corrupt.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    code, out, err = run_cli(capsys, str(corrupt))
    assert code == 2 and err.startswith("error: wheel.unreadable: ") and err.count("\n") == 1
    code, out, err = run_cli(capsys, str(tmp_path / "absent.whl"))
    assert code == 2 and err.startswith("error: wheel.unreadable: ")


def test_not_a_vllm_wheel(tmp_path, capsys):
    other = make_wheel(tmp_path, {"other/__init__.py": ""}, name="other")
    code, out, err = run_cli(capsys, str(other))
    assert code == 2 and err.startswith("error: wheel.not_vllm: ") and "'other'" in err
    bare = tmp_path / "bare.whl"
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr(KV + "factory.py", factory(("A", "m", "A")))
    code, out, err = run_cli(capsys, str(bare))
    assert code == 2 and err.startswith("error: wheel.not_vllm: ")


def test_cli_writes_facts_and_renders_them_back(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/a.py": "from .base import KVConnectorBase_V1, SupportsHMA\nclass A(KVConnectorBase_V1, SupportsHMA):\n    pass\n",
        KV + "factory.py": factory(("A", "vllm.distributed.kv_transfer.kv_connector.v1.a", "A")),
    })
    facts_path, direct, rendered = tmp_path / "facts.json", tmp_path / "direct.yaml", tmp_path / "again.yaml"
    assert run_cli(capsys, str(wheel), "-o", str(direct), "--facts", str(facts_path))[0] == 0
    assert run_cli(capsys, "--from-facts", str(facts_path), "-o", str(rendered))[0] == 0
    assert direct.read_bytes() == rendered.read_bytes()
    assert "  A:\n    supports_hma: true\n" in direct.read_text()
    facts_path.write_text("{not json")
    code, _, err = run_cli(capsys, "--from-facts", str(facts_path))
    assert code == 2 and err.startswith("error: facts.invalid: ")
    no_canary_ran(tmp_path)


# --------------------------------------------------------------------------
# Options (tools/vllm_options.py)

import vllm_options as vo  # noqa: E402

CONFIG = """
from dataclasses import dataclass
from typing import Literal
Policy = Literal["fcfs", "priority"]
def config(cls):
    return cls
@config
@dataclass
class KVTransferConfig:
    kv_connector: str | None = None
@config
@dataclass
class SchedulerConfig:
    disable_hybrid_kv_cache_manager: bool | None = None
    policy: Policy = "fcfs"
    max_num_seqs: int = 128
    watermark: float = 0.01
    kv_transfer_config: KVTransferConfig | None = None
    ids: list[int] | None = None
"""

ARG_UTILS = """
import argparse
from vllm.config import SchedulerConfig
def get_kwargs(cls):
    return {}
# _compute_kwargs sets argparse.BooleanOptionalAction for bool fields
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        scheduler_kwargs = get_kwargs(SchedulerConfig)
        group = parser.add_argument_group("SchedulerConfig")
        group.add_argument("--disable-hybrid-kv-cache-manager", **scheduler_kwargs["disable_hybrid_kv_cache_manager"])
        group.add_argument("--scheduling-policy", **scheduler_kwargs["policy"])
        group.add_argument("--max-num-seqs", "-mns", **{**scheduler_kwargs["max_num_seqs"], "default": None})
        group.add_argument("--watermark", **scheduler_kwargs["watermark"])
        group.add_argument("--kv-transfer-config", **scheduler_kwargs["kv_transfer_config"])
        group.add_argument("--ids", **scheduler_kwargs["ids"])
        parser.add_argument("--disable-log-stats", action="store_true")
        return parser
"""

CLI_ARGS = """
from dataclasses import dataclass
import json
from vllm.engine.arg_utils import EngineArgs, get_kwargs
@dataclass
class BaseFrontendArgs:
    host: str | None = None
    allowed_origins: list[str] = None
    @classmethod
    def _customize_cli_kwargs(cls, kw):
        kw["allowed_origins"]["type"] = json.loads
        return kw
    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = cls._customize_cli_kwargs(get_kwargs(cls))
        for key, value in frontend_kwargs.items():
            parser.add_argument(f"--{key.replace('_', '-')}", **value)
        return parser
@dataclass
class FrontendArgs(BaseFrontendArgs):
    port: int = 8000
def make_arg_parser(parser):
    parser.add_argument("--headless", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
    return EngineArgs.add_cli_args(parser)
"""

PARSER = """
import argparse
class FlexibleArgumentParser(argparse.ArgumentParser):
    def parse_args(self, args=None):
        return [a.replace("_", "-") for a in args]
"""


def test_read_options_types_and_no_forms(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {
        "vllm/__init__.py": "",
        "vllm/config/__init__.py": "from vllm.config.scheduler import SchedulerConfig\n",
        "vllm/config/scheduler.py": CONFIG,
        "vllm/engine/arg_utils.py": ARG_UTILS,
        "vllm/entrypoints/cli/serve.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
        "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
        "vllm/utils/argparse_utils.py": PARSER,
    })
    found = vo.read_options(str(wheel))
    no_canary_ran(tmp_path)
    options = found["options"]
    assert found["vllm_version"] == "9.9.9"
    assert found["frontend_module"] == "vllm.entrypoints.openai.cli_args"
    assert found["parser"]["underscores_accepted"] is True and found["parser"]["dotted_json_keys"] is False
    summary = {name: (o["type"], o["no_form"]) for name, o in options.items()}
    assert summary == {
        "--disable-hybrid-kv-cache-manager": ("bool", True),   # bool | None: BooleanOptionalAction
        "--scheduling-policy": ("str", False),                # a Literal type alias
        "--max-num-seqs": ("int", False),                     # through **{**kwargs[...], ...}
        "--watermark": ("float", False),
        "--kv-transfer-config": ("json", False),              # a config dataclass
        "--ids": ("list", False),
        "--disable-log-stats": ("bool", False),               # store_true: no --no- form
        "--headless": ("bool", False),
        "--host": ("str", False),                             # FrontendArgs fields, bases included
        "--allowed-origins": ("json", False),                 # _customize_cli_kwargs: json.loads
        "--port": ("int", False),
    }
    assert options["--max-num-seqs"]["aliases"] == ["-mns"]
    assert options["--disable-hybrid-kv-cache-manager"]["field"] == "SchedulerConfig.disable_hybrid_kv_cache_manager"
    assert options["--port"]["source"] == "FrontendArgs"
    # the registry CLI writes the same options with --options
    (tmp_path / "w2").mkdir()
    wheel_with_factory = make_wheel(tmp_path / "w2", {
        "vllm/config/__init__.py": "from vllm.config.scheduler import SchedulerConfig\n",
        "vllm/config/scheduler.py": CONFIG,
        "vllm/engine/arg_utils.py": ARG_UTILS,
        KV + "v1/base.py": BASE,
        KV + "factory.py": factory(("Base", "vllm.distributed.kv_transfer.kv_connector.v1.base", "KVConnectorBase_V1")),
    }, with_canary=False)
    out = tmp_path / "options.json"
    assert vr.main([str(wheel_with_factory), "-o", str(tmp_path / "r.yaml"), "--options", str(out)]) == 0
    assert json.loads(out.read_text())["options"]["--kv-transfer-config"]["type"] == "json"


def test_read_options_without_arg_utils(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {"vllm/__init__.py": ""})
    with pytest.raises(vr.RegistryError) as info:
        vo.read_options(str(wheel))
    assert info.value.code == "wheel.no_options"
    assert vo.main([str(wheel)]) == 2
    assert capsys.readouterr().err.startswith("error: wheel.no_options: ")


_events: list[tuple[str, tuple]] | None = None


def _audit(event: str, args: tuple) -> None:
    if _events is not None and event in ("exec", "import"):
        _events.append((event, args))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one records only inside the test


def test_reading_a_wheel_neither_executes_nor_imports_its_code(tmp_path):
    """PEP 578 audit events: no code object of the wheel runs, no vllm module is imported.

    (ast.parse raises a 'compile' event for building the tree, which runs nothing.)
    """
    global _events
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/lmcache_mp_connector.py": LMCACHE_FUNCTION,
        KV + "factory.py": factory(("LMCacheMPConnector", "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector",
                                    "LMCacheMPConnector")),
        "vllm/engine/arg_utils.py": ARG_UTILS,
        "vllm/config/__init__.py": "from vllm.config.scheduler import SchedulerConfig\n",
        "vllm/config/scheduler.py": CONFIG,
    })
    _events = []
    try:
        facts = vr.read_wheel(str(wheel))
        options = vo.read_options(str(wheel))
    finally:
        recorded, _events = _events, None
    assert facts["registrations"] and options["options"]
    assert [e for e in recorded if e[0] == "exec"] == []
    assert [e for e in recorded if e[0] == "import" and str(e[1][0]).startswith(("vllm", "lmcache"))] == []
    no_canary_ran(tmp_path)
