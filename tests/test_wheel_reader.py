"""hma_policy.authoring.wheel and `hma-policy registry from-wheel|render`:
reading a vLLM wheel's registry and options statically, on small wheels built
here with zipfile, one per feature the reader must get right (aliases,
inheritance across modules, env switches, option types) and per error it
must report with its stable code.

Every synthetic module starts with a canary: code that, if it ever ran,
would leave a file behind. The real wheels' results are checked in
test_vllm_releases.py, through their recorded facts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hma_policy import cli
from hma_policy.authoring import wheel as wh
from hma_policy.authoring.wheel import render as render_module
from hma_policy.core.facts import DECLARED

KV = "vllm/distributed/kv_transfer/kv_connector/"
BASE_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.base"


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
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        for member, text in files.items():
            body = (canary(tmp_path, member.replace("/", "_")) + text) if with_canary and member.endswith(".py") else text
            zf.writestr(member, body)
    return path


def no_canary_ran(tmp_path: Path) -> None:
    assert not list(tmp_path.rglob("ran-*")), "wheel code was executed"
    assert not any(m == "vllm" or m.startswith("vllm.") for m in sys.modules), "a wheel module was imported"


def hma(capsys, *argv: str) -> tuple[int, str, str]:
    """The command line, in this process: (exit status, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def nixl_wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/nixl/__init__.py": "from .connector import NixlConnector, NixlPullConnector\n",
        KV + "v1/nixl/connector.py": (
            "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, SupportsHMA\n"
            "class NixlBaseConnector(KVConnectorBase_V1, SupportsHMA):\n    pass\n"
            "class NixlPullConnector(NixlBaseConnector):\n    pass\n"
            "NixlConnector = NixlPullConnector\n"),
        KV + "factory.py": factory(("NixlConnector", "vllm.distributed.kv_transfer.kv_connector.v1.nixl", "NixlConnector")),
    })


# -- what the reader finds ------------------------------------------------------------------

def test_alias_through_package_and_module(tmp_path):
    facts = wh.read_wheel(str(nixl_wheel(tmp_path)))
    no_canary_ran(tmp_path)
    assert facts["vllm_version"] == "9.9.9"
    assert facts["marker"] == f"{BASE_MODULE}:SupportsHMA"
    (reg,) = facts["registrations"]
    assert [alt["ref"]["class"] for alt in reg["resolves"]] == [
        "vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector:NixlPullConnector"]
    pull = facts["classes"]["vllm.distributed.kv_transfer.kv_connector.v1.nixl.connector:NixlPullConnector"]
    assert pull["bases"] == ["NixlBaseConnector"] and pull["supports_hma"] is True
    assert pull["hma_from"].endswith(":NixlBaseConnector")
    text = wh.render_registry(facts)
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
    facts = wh.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    classes = facts["classes"]
    b = classes["vllm.distributed.kv_transfer.kv_connector.v1.b:B"]
    assert b["base_refs"] == ["class:vllm.distributed.kv_transfer.kv_connector.v1.a:A"]
    assert b["supports_hma"] is True and b["connector"] is True
    assert classes["vllm.distributed.kv_transfer.kv_connector.v1.b:C"]["supports_hma"] is False
    text = wh.render_registry(facts)
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

LMCACHE_FACTORY = factory(("LMCacheMPConnector", "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_mp_connector",
                           "LMCacheMPConnector"))


@pytest.mark.parametrize("source", [LMCACHE_FUNCTION, LMCACHE_IF], ids=["function", "module-if"])
def test_env_switch_becomes_a_case(tmp_path, source):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "v1/lmcache_mp_connector.py": source,
                                  KV + "factory.py": LMCACHE_FACTORY})
    facts = wh.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    (switch,) = [s for s in facts["switches"] if s["name"] == "LMCacheMPConnector"]
    assert switch["env"] == ["LMCACHE_USE_UPSTREAM_MP"]
    first = facts["registrations"][0]["resolves"][0]
    assert first["when"] == [{"env": "LMCACHE_USE_UPSTREAM_MP", "test": "set"}]
    text = wh.render_registry(facts)
    assert "    supports_hma: true\n" in text  # the default: external LMCache, or the HMA class
    assert "    cases:\n      - id: " in text
    assert "        when: {env_lmcache_use_upstream_mp: true}\n        supports_hma: false\n" in text


def switched_wheel(tmp_path: Path, condition: str) -> Path:
    """A wheel that registers X: the class New (SupportsHMA), or Old where ``condition`` holds."""
    return make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/x.py": (
            "import os\nfrom .base import KVConnectorBase_V1, SupportsHMA\n"
            "class Old(KVConnectorBase_V1):\n    pass\n"
            "class New(KVConnectorBase_V1, SupportsHMA):\n    pass\n"
            "X = New\n"
            f"if {condition}:\n    X = Old\n"),
        KV + "factory.py": factory(("X", "vllm.distributed.kv_transfer.kv_connector.v1.x", "X")),
    })


def test_switch_on_an_env_variable_the_engine_lacks(tmp_path):
    wheel = switched_wheel(tmp_path, "'VLLM_X_LEGACY' in os.environ")
    facts = wh.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    (switch,) = facts["switches"]
    assert switch["env"] == ["VLLM_X_LEGACY"]
    with pytest.raises(wh.WheelError) as info:
        wh.render_registry(facts)
    assert info.value.code == "facts.unknown_switch"
    assert "VLLM_X_LEGACY" in info.value.message


def test_unknown_external_class_is_not_guessed(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/ext.py": "from some_vendor.kv import VendorConnector\n",
        KV + "factory.py": factory(("Vendor", "vllm.distributed.kv_transfer.kv_connector.v1.ext", "VendorConnector")),
    })
    facts = wh.read_wheel(str(wheel))
    assert facts["registrations"][0]["resolves"][0]["ref"]["external"] == "some_vendor.kv.VendorConnector"
    with pytest.raises(wh.WheelError) as info:
        wh.render_registry(facts)
    assert info.value.code == "facts.unknown_external"
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel))
    assert (code, out) == (2, "")
    assert err == (f"hma-policy: {wheel}: facts.unknown_external: some_vendor.kv.VendorConnector is defined outside "
                   "vLLM and its HMA support is not known; add it, with the source of the answer, to "
                   "hma_policy/authoring/wheel/external.json\n")


def test_release_without_supports_hma(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": "class KVConnectorBase_V1:\n    pass\n",
        KV + "v1/shared.py": "from .base import KVConnectorBase_V1\nclass Shared(KVConnectorBase_V1):\n    pass\n",
        KV + "factory.py": factory(("Shared", "vllm.distributed.kv_transfer.kv_connector.v1.shared", "Shared")),
    })
    facts = wh.read_wheel(str(wheel))
    assert facts["marker"] is None
    text = wh.render_registry(facts)
    assert "no SupportsHMA class" in text and "supports_hma: true" not in text


def test_render_is_deterministic_and_json_round_trips(tmp_path):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "v1/lmcache_mp_connector.py": LMCACHE_FUNCTION,
                                  KV + "factory.py": LMCACHE_FACTORY})
    facts = wh.read_wheel(str(wheel))
    again = json.loads(wh.facts_json(wh.read_wheel(str(wheel))))
    assert wh.render_registry(again) == wh.render_registry(facts)
    assert facts["wheel"]["file"] in wh.render_registry(facts)
    assert facts["wheel"]["sha256"] in wh.render_registry(facts)


def test_the_tables_name_what_the_engine_and_the_sources_know():
    """ENGINE_ENV_FACTS names facts the engine declares for a node; every
    external class has a verdict and its source."""
    node_facts = {f.name for f in DECLARED if f.ruleset == "node"}
    assert set(render_module.ENGINE_ENV_FACTS.values()) <= node_facts
    assert render_module.known_external()
    for name, (supports, why) in render_module.known_external().items():
        assert isinstance(supports, bool) and len(why) > 20 and name.count(".") >= 2


# -- the command: output, and nothing of the wheel runs -----------------------------------------

def test_from_wheel_writes_registry_facts_and_options_and_render_gives_the_same_bytes(tmp_path, capsys):
    wheel = options_wheel(tmp_path)
    facts, direct, again, options = (tmp_path / n for n in ("facts.json", "direct.yaml", "again.yaml", "options.json"))
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "-o", str(direct), "--facts", str(facts),
                         "--options", str(options))
    assert (code, out) == (0, "")
    assert err == f"hma-policy: wrote {facts}\nhma-policy: wrote {options}\nhma-policy: wrote {direct}\n"
    assert hma(capsys, "-q", "registry", "render", "--from-facts", str(facts), "-o", str(again)) == (0, "", "")
    assert direct.read_bytes() == again.read_bytes()
    assert "  Base:\n    supports_hma: false\n" in direct.read_text()
    assert json.loads(options.read_text())["options"]["--kv-transfer-config"]["type"] == "json"
    # standard output: the same bytes
    code, out, _ = hma(capsys, "registry", "from-wheel", str(wheel))
    assert code == 0 and out == direct.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    no_canary_ran(tmp_path)


def test_the_command_in_a_fresh_process_runs_no_module_of_the_wheel(tmp_path):
    """The whole command, as a user runs it: the canaries stay silent, and
    Python's audit hooks (PEP 578) see no vllm module imported, no code
    object of the wheel run and no program started."""
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "v1/lmcache_mp_connector.py": LMCACHE_FUNCTION,
                                  KV + "factory.py": LMCACHE_FACTORY, **OPTION_FILES})
    # Every import, every code object run and every program started: a module
    # of the wheel would be imported by a name starting with vllm (or lmcache,
    # which it imports), or run from a file under tmp_path, where the wheel is.
    watcher = (
        "import sys\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event == 'import':\n"
        "        seen.append((event, str(args[0])))\n"
        "    elif event == 'exec':\n"
        "        seen.append((event, getattr(args[0], 'co_filename', repr(args[0]))))\n"
        "    elif event in ('subprocess.Popen', 'os.system', 'os.exec', 'os.posix_spawn', 'os.spawn', 'os.fork'):\n"
        "        seen.append((event, repr(args[:1])))\n"
        "sys.addaudithook(hook)\n"
        "from hma_policy import cli\n"
        "code = cli.main(sys.argv[2:])\n"
        "bad = [s for s in seen if s[0] not in ('import', 'exec')  # a program started\n"
        "       or s[1].startswith(('vllm', 'lmcache')) or sys.argv[1] in s[1] or '/vllm/' in s[1]]\n"
        "print('EVENTS', sum(s[0] == 'exec' for s in seen) > 0, bad)\n"
        "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", watcher, str(tmp_path), "registry", "from-wheel", str(wheel), "-o",
                           str(tmp_path / "r.yaml"), "--options", str(tmp_path / "o.json")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "EVENTS True []"  # the hook saw code run: hma-policy's own
    assert "LMCacheMPConnector" in (tmp_path / "r.yaml").read_text()
    assert json.loads((tmp_path / "o.json").read_text())["options"]
    no_canary_ran(tmp_path)


# -- errors: one line with the file and a stable code, exit 2, nothing written --------------------

def test_missing_factory(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE})
    with pytest.raises(wh.WheelError) as info:
        wh.read_wheel(str(wheel))
    assert info.value.code == "wheel.no_factory"
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "-o", str(tmp_path / "r.yaml"))
    assert (code, out) == (2, "")
    assert err == f"hma-policy: {wheel}: wheel.no_factory: no {KV}factory.py in the wheel\n"
    assert not (tmp_path / "r.yaml").exists()
    no_canary_ran(tmp_path)


def test_factory_without_registrations(tmp_path):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "factory.py": factory()})
    with pytest.raises(wh.WheelError) as info:
        wh.read_wheel(str(wheel))
    assert (info.value.code, info.value.message) == ("wheel.no_factory", f"{KV}factory.py registers no connector")


def test_corrupt_zip_and_missing_file(tmp_path, capsys):
    good = make_wheel(tmp_path, {KV + "factory.py": factory()})
    corrupt = tmp_path / "vllm-1.0-py3-none-any.whl"
    corrupt.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    code, out, err = hma(capsys, "registry", "from-wheel", str(corrupt))
    assert (code, out) == (2, "")
    assert err == f"hma-policy: {corrupt}: wheel.unreadable: not a readable zip file (File is not a zip file)\n"
    code, out, err = hma(capsys, "registry", "from-wheel", str(tmp_path / "absent.whl"))
    assert (code, err) == (2, f"hma-policy: {tmp_path / 'absent.whl'}: wheel.unreadable: no such file\n")
    code, out, err = hma(capsys, "registry", "from-wheel", str(tmp_path))
    assert (code, err) == (2, f"hma-policy: {tmp_path}: wheel.unreadable: cannot read it: Is a directory\n")


def test_a_member_whose_data_is_damaged(tmp_path, capsys):
    """The zip's directory reads, but a source file's compressed bytes do not."""
    wheel = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\nVersion: 9.9.9\n")
        zf.writestr(KV + "factory.py", factory(("A", "m", "A")) * 20)
    data = bytearray(wheel.read_bytes())
    start = data.index(b"factory.py") + len(b"factory.py")  # the local header's name, then the deflated data
    data[start + 10:start + 40] = b"\xff" * 30
    wheel.write_bytes(bytes(data))
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel))
    assert code == 2 and err.startswith(f"hma-policy: {wheel}: wheel.unreadable: cannot read {KV}factory.py from the wheel: ")
    assert err.count("\n") == 1


def test_not_a_vllm_wheel(tmp_path, capsys):
    other = make_wheel(tmp_path, {"other/__init__.py": ""}, name="other")
    code, out, err = hma(capsys, "registry", "from-wheel", str(other))
    assert (code, err) == (2, f"hma-policy: {other}: wheel.not_vllm: the wheel of 'other', not vllm\n")
    bare = tmp_path / "bare.whl"
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr(KV + "factory.py", factory(("A", "m", "A")))
    code, out, err = hma(capsys, "registry", "from-wheel", str(bare))
    assert (code, err) == (2, f"hma-policy: {bare}: wheel.not_vllm: no *.dist-info/METADATA: not a wheel\n")


def test_an_output_that_cannot_be_written(tmp_path, capsys):
    wheel = nixl_wheel(tmp_path)
    target = tmp_path / "missing-dir" / "r.yaml"
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "-o", str(target))
    assert (code, out) == (2, "")
    assert err == f"hma-policy: {target}: registry.output: cannot write it: No such file or directory\n"


def test_facts_that_cannot_be_read_or_rendered(tmp_path, capsys):
    facts = tmp_path / "facts.json"
    facts.write_text("{not json")
    code, out, err = hma(capsys, "registry", "render", "--from-facts", str(facts))
    assert code == 2 and err.startswith(f"hma-policy: {facts}: facts.invalid: not JSON (")
    facts.write_text('{"format": 2}')
    code, out, err = hma(capsys, "registry", "render", "--from-facts", str(facts))
    assert (code, err) == (2, f"hma-policy: {facts}: facts.invalid: not a facts file of format 1\n")
    code, out, err = hma(capsys, "registry", "render", "--from-facts", str(tmp_path / "none.json"))
    assert (code, err) == (2, f"hma-policy: {tmp_path / 'none.json'}: facts.unreadable: no such file\n")


def _good_facts(tmp_path: Path) -> dict:
    (tmp_path / "w").mkdir(exist_ok=True)
    wheel = make_wheel(tmp_path / "w", {KV + "v1/base.py": BASE, KV + "v1/lmcache_mp_connector.py": LMCACHE_IF,
                                        KV + "factory.py": LMCACHE_FACTORY})
    return wh.read_wheel(str(wheel))


@pytest.mark.parametrize("change, where", [
    (lambda f: f.pop("classes"), "/"),
    (lambda f: f["registrations"][0].update(name="A: b\nkind: rules"), "/registrations/0/name"),
    (lambda f: f["registrations"][0].update(module_path="x y"), "/registrations/0/module_path"),
    (lambda f: f["registrations"][0].update(resolves={}), "/registrations/0/resolves"),
    (lambda f: f["registrations"][0]["resolves"][0].update(when=[{"env": 1, "test": "set"}]),
     "/registrations/0/resolves/0/when/0"),
    (lambda f: f["wheel"].update(file="a\n# b"), "/wheel/file"),
    (lambda f: f.update(vllm_version="1.0\nkind: x"), "/vllm_version"),
    (lambda f: next(iter(f["classes"].values())).update(supports_hma="yes"), None),
])
def test_malformed_facts_are_refused_where_they_are_wrong(tmp_path, change, where):
    """A hand-edited facts file is refused at its first wrong place, with no
    traceback, and no name can write YAML of its own into the registry."""
    facts = _good_facts(tmp_path)
    change(facts)
    with pytest.raises(wh.WheelError) as info:
        wh.render_registry(facts)
    assert info.value.code == "facts.invalid"
    assert info.value.message.startswith("not facts of format 1 at " + (where or "/classes/"))


def test_a_reference_to_a_class_the_facts_lack(tmp_path):
    facts = _good_facts(tmp_path)
    facts["registrations"][0]["resolves"][-1]["ref"] = {"class": "vllm.x:Gone"}
    with pytest.raises(wh.WheelError) as info:
        wh.render_registry(facts)
    assert (info.value.code, info.value.message) == ("facts.invalid", "reference to an unknown class vllm.x:Gone")


# -- options ----------------------------------------------------------------------------------

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
    lora_modules: list[str] | None = None
    @classmethod
    def _customize_cli_kwargs(cls, kw):
        kw["allowed_origins"]["type"] = json.loads
        del kw["allowed_origins"]["nargs"]
        kw["lora_modules"]["type"] = optional_type(str)
        kw["lora_modules"]["action"] = LoRAParserAction
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
    parser.add_argument("--prompt-adapters", type=nullable_str, nargs="+", action=PromptAdapterParserAction)
    parser = FrontendArgs.add_cli_args(parser)
    return EngineArgs.add_cli_args(parser)
"""

PARSER = """
import argparse
class FlexibleArgumentParser(argparse.ArgumentParser):
    def parse_args(self, args=None):
        return [a.replace("_", "-") for a in args]
"""

OPTION_FILES = {
    "vllm/__init__.py": "",
    "vllm/config/__init__.py": "from vllm.config.scheduler import SchedulerConfig\n",
    "vllm/config/scheduler.py": CONFIG,
    "vllm/engine/arg_utils.py": ARG_UTILS,
    "vllm/entrypoints/cli/serve.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
    "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
    "vllm/utils/argparse_utils.py": PARSER,
}


def options_wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path, {**OPTION_FILES, KV + "v1/base.py": BASE,
                                 KV + "factory.py": factory(("Base", BASE_MODULE, "KVConnectorBase_V1"))})


def test_read_options_types_and_no_forms(tmp_path):
    found = wh.read_options(str(make_wheel(tmp_path, OPTION_FILES)))
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
        "--allowed-origins": ("json", False),                 # _customize_cli_kwargs: json.loads, nargs deleted
        # A list field keeps get_kwargs' nargs="+" when only its type (of each word) is replaced:
        # vLLM's --lora-modules takes several adapters (it was read as one word).
        "--lora-modules": ("list", False),
        "--prompt-adapters": ("list", False),                 # nargs="+" written out (0.9.x)
        "--port": ("int", False),
    }
    assert options["--max-num-seqs"]["aliases"] == ["-mns"]
    assert options["--disable-hybrid-kv-cache-manager"]["field"] == "SchedulerConfig.disable_hybrid_kv_cache_manager"
    assert options["--port"]["source"] == "FrontendArgs"


INVERSE_PARSER = """
import argparse
class EnableDisableAction(argparse.BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}
class FlexibleArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", argparse.BooleanOptionalAction, EnableDisableAction)
"""


def test_a_parser_that_registers_inverse_spellings_gives_each_on_off_option_its_inverse(tmp_path):
    # vLLM 0.33.0: every BooleanOptionalAction is an EnableDisableAction, so
    # --disable-x also answers to --enable-x (setting the opposite value).
    found = wh.read_options(str(make_wheel(tmp_path, {**OPTION_FILES, "vllm/utils/argparse_utils.py": INVERSE_PARSER})))
    assert found["parser"]["inverse_prefixes"] == {"--enable-": "--disable-", "--disable-": "--enable-"}
    inverses = {name: o["inverses"] for name, o in found["options"].items() if "inverses" in o}
    # Only options with a --no- form: --disable-log-stats is store_true, and keeps its one spelling.
    assert inverses == {"--disable-hybrid-kv-cache-manager": ["--enable-hybrid-kv-cache-manager"]}
    # A parser that registers no such action (every release before 0.33.0) gives none.
    (tmp_path / "plain").mkdir()
    plain = wh.read_options(str(make_wheel(tmp_path / "plain", OPTION_FILES)))
    assert "inverse_prefixes" not in plain["parser"] and not any("inverses" in o for o in plain["options"].values())


OLD_FORMS = {
    "vllm/config/__init__.py": "from vllm.config.scheduler import KVTransferConfig, SchedulerConfig\n",
    # 0.9.1 to 0.11.x: a SkipValidation[bool] field, a loop of deprecated options, and the serve
    # subcommand's own options (0.9.1 adds --headless there, not in make_arg_parser).
    "vllm/config/scheduler.py": CONFIG.replace("    max_num_seqs: int = 128\n", "    max_num_seqs: int = 128\n"
                                               "    chunked: SkipValidation[bool] = None\n").replace(
        "from typing import Literal\n", "from typing import Literal\nfrom pydantic import SkipValidation\n").replace(
        "    kv_connector: str | None = None\n", "    kv_connector: str | None = None\n    kv_buffer: SkipValidation[float] = 1e9\n"),
    "vllm/engine/arg_utils.py": ARG_UTILS.replace('        return parser\n', '''        group.add_argument("--enable-chunked", **scheduler_kwargs["chunked"])
        for arg, type in [("--old-backend", str), ("--old-fallback", bool)]:
            group.add_argument(arg, type=type, deprecated=True)
        return parser
'''),
    "vllm/entrypoints/cli/serve.py": """from vllm.entrypoints.openai.cli_args import make_arg_parser
class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser("serve")
        serve_parser.add_argument("model_tag", nargs="?")
        serve_parser.add_argument("--api-server-count", "-asc", type=int)
        return make_arg_parser(serve_parser)
""",
}


def test_options_the_reader_once_missed_in_older_releases(tmp_path):
    # Each was missing from the bundled 0.9.1 to 0.11.0 lists, as the releases' real parsers
    # showed (tests/vllm_releases/parsers/): a --no- form, four deprecated options, four serve options.
    found = wh.read_options(str(make_wheel(tmp_path, {**OPTION_FILES, **OLD_FORMS})))["options"]
    assert (found["--enable-chunked"]["type"], found["--enable-chunked"]["no_form"]) == ("bool", True)
    assert {name: found[name]["type"] for name in ("--old-backend", "--old-fallback")} == {
        "--old-backend": "str", "--old-fallback": "bool"}
    assert (found["--api-server-count"]["type"], found["--api-server-count"]["aliases"],
            found["--api-server-count"]["source"]) == ("int", ["-asc"], "ServeSubcommand")
    # A config class's field keeps SkipValidation: pydantic checks nothing of its value.
    configs = wh.read_configs(str(make_wheel(tmp_path, {**OPTION_FILES, **OLD_FORMS})))
    assert configs["classes"]["KVTransferConfig"]["fields"]["kv_buffer"]["types"] == ["SkipValidation"]


def test_options_of_a_wheel_without_arg_utils(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {KV + "v1/base.py": BASE, KV + "factory.py": factory(("Base", BASE_MODULE, "KVConnectorBase_V1"))})
    with pytest.raises(wh.WheelError) as info:
        wh.read_options(str(wheel))
    assert info.value.code == "wheel.no_options"
    # the registry alone is fine; asked for options too, nothing is written
    assert hma(capsys, "-q", "registry", "from-wheel", str(wheel), "-o", str(tmp_path / "r.yaml"))[0] == 0
    (tmp_path / "r.yaml").unlink()
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "-o", str(tmp_path / "r.yaml"),
                         "--facts", str(tmp_path / "f.json"), "--options", str(tmp_path / "o.json"))
    assert (code, err) == (2, f"hma-policy: {wheel}: wheel.no_options: the wheel has no parseable vllm/engine/arg_utils.py\n")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".yaml", ".json")) == []


@pytest.mark.parametrize("constant", ['b"1"', "...", "1j"])
def test_an_env_comparison_with_a_constant_json_cannot_hold_is_not_an_env_test(tmp_path, capsys, constant):
    # The facts are JSON: such a comparison is kept as its text (an unreadable
    # condition), not as an `equals` test whose value json.dumps refuses.
    wheel = switched_wheel(tmp_path, f"os.getenv('VLLM_X_LEGACY') == {constant}")
    facts = wh.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    first = facts["registrations"][0]["resolves"][0]
    assert first["when"] == [{"expr": f"os.getenv('VLLM_X_LEGACY') == {constant.replace(chr(34), chr(39))}"}]
    assert json.loads(wh.facts_json(facts)) == facts
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "--facts", str(tmp_path / "f.json"))
    assert (code, out) == (2, "")
    assert err.startswith(f"hma-policy: {wheel}: facts.unknown_switch: a name switch on an unreadable condition: ")


def test_a_flags_override_that_is_not_a_string_names_no_option(tmp_path):
    # _customize_cli_kwargs: kw["host"]["flags"] = [...]; only its strings are option names
    cli_args = CLI_ARGS.replace('kw["allowed_origins"]["type"] = json.loads\n',
                                'kw["allowed_origins"]["type"] = json.loads\n        kw["host"]["flags"] = ["-H", None, 1]\n')
    assert cli_args != CLI_ARGS
    found = wh.read_options(str(make_wheel(tmp_path, {**OPTION_FILES, "vllm/entrypoints/openai/cli_args.py": cli_args})))
    no_canary_ran(tmp_path)
    assert found["options"]["--host"] == {"no_form": False, "type": "str", "aliases": ["-H"], "source": "FrontendArgs",
                                          "field": "FrontendArgs.host"}


def test_a_literal_choice_that_json_cannot_hold_is_no_choice(tmp_path):
    # The config classes are written as JSON: `Literal[b"x", ...]` offers a
    # value no deployment document can give, so it is not one of the field's choices.
    config = CONFIG.replace("    kv_connector: str | None = None\n",
                            '    kv_connector: str | None = None\n    kv_role: Literal[b"x", "kv_both", ..., 1j, 2] | None = None\n')
    assert config != CONFIG
    files = {**OPTION_FILES, "vllm/config/scheduler.py": config,
             "vllm/config/__init__.py": "from vllm.config.scheduler import KVTransferConfig, SchedulerConfig\n"}
    wheel = make_wheel(tmp_path, files)
    found = wh.read_configs(str(wheel))
    no_canary_ran(tmp_path)
    assert found["classes"]["KVTransferConfig"]["fields"]["kv_role"]["choices"] == ["kv_both", 2]
    # what `registry from-wheel --configs` writes (it ended in an internal error: bytes are not JSON)
    assert json.loads(wh.configs_json(found)) == found
