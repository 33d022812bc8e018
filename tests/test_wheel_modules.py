"""The module table a wheel gives (``registry from-wheel --modules``): which
modules of vLLM's KV-transfer tree exist and which names each binds, read
statically; and how the engine looks a node's module path up in it
(core/modules.py: the node facts module_in_release, class_in_module)."""

from __future__ import annotations

import json

import pytest

from hma_policy.authoring import wheel as wh
from hma_policy.core.errors import PolicyError
from hma_policy.core.modules import read_modules

from test_wheel_reader import BASE, KV, factory, hma, make_wheel, no_canary_ran

V1 = "vllm.distributed.kv_transfer.kv_connector.v1"

BINDINGS = """
import os, importlib.util as iu
import a.b.c
from typing import TYPE_CHECKING
from .base import KVConnectorBase_V1 as Base
if TYPE_CHECKING:
    from .hidden import Hidden
class Sure(Base):
    pass
def helper():
    global Escaped
    Escaped = 1
Alias = Sure
first, (second, *rest) = 1, (2, 3)
annotated: int = 1
declared_only: int
if os.environ.get("X"):
    OnlyIf = Sure
    Both = 1
else:
    Both = 2
try:
    from nixl import Agent
except ImportError:
    Agent = None
try:
    from mooncake import Store
except ImportError:
    pass
for looped in range(3):
    inloop = looped
with open(__file__) as handle:
    inwith = 1
Gone = 1
del Gone
if (walrus := 3):
    pass
"""


@pytest.fixture
def table(tmp_path):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/example.py": BINDINGS,
        KV + "v1/lazy.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        KV + "v1/star.py": "from .base import *\n",
        KV + "v1/broken.py": "class (:\n",
        KV + "v1/pkg/__init__.py": "from .impl import Impl\n",
        KV + "v1/pkg/impl.py": "class Impl:\n    pass\n",
        KV + "v1/pkg/other.py": "X = 1\n",
        "vllm/config.py": "class VllmConfig:\n    pass\n",
        KV + "factory.py": factory(("Sure", f"{V1}.example", "Sure")),
    })
    facts = wh.read_wheel(str(wheel))
    no_canary_ran(tmp_path)
    return facts["modules"]


def test_names_bound_for_sure_maybe_or_open(table):
    assert table["prefix"] == "vllm.distributed.kv_transfer"
    example = table["modules"][f"{V1}.example"]
    assert set(example["names"]) >= {"os", "iu", "a", "TYPE_CHECKING", "Base", "Sure", "helper", "Alias", "first",
                                     "second", "rest", "annotated", "Both", "Agent", "handle", "inwith", "walrus"}
    # only on some way through: one branch, a try body an import error may stop, a loop, a del
    assert example["maybe"] == sorted(["OnlyIf", "Store", "looped", "inloop", "Gone"])
    # never bound at module level: under TYPE_CHECKING, only annotated, a function's global
    assert not {"Hidden", "declared_only", "Escaped", "KVConnectorBase_V1"} & set(example["names"] + example["maybe"])
    assert example["open"] is False
    # (every module of these wheels starts with a canary that imports pathlib)
    assert table["modules"][f"{V1}.lazy"] == {"names": ["__getattr__", "pathlib"], "maybe": [], "open": True}
    assert table["modules"][f"{V1}.star"]["open"] is True
    assert table["modules"][f"{V1}.broken"] == {"names": [], "maybe": [], "open": True}  # exists; binds what?
    # a package: what its __init__ binds, and its submodules as possible attributes
    assert table["modules"][f"{V1}.pkg"] == {"names": ["Impl", "pathlib"], "maybe": ["impl", "other"], "open": False}
    # only the KV-transfer tree is recorded
    assert "vllm.config" not in table["modules"] and f"{V1}.pkg.impl" in table["modules"]


def test_the_engine_reads_the_table_as_facts(table, tmp_path):
    facts = {"vllm_version": "9.9.9", "wheel": {"file": "w.whl", "sha256": "0" * 64}, "modules": table}
    modules = read_modules(wh.modules_json(facts), "modules/9.9.9.json")
    lookups = {
        (f"{V1}.example", "Sure"): ("present", "yes"),
        (f"{V1}.example", "NoSuch"): ("present", "no"),
        (f"{V1}.example", "OnlyIf"): ("present", "unknown"),
        (f"{V1}.lazy", "Anything"): ("present", "unknown"),
        (f"{V1}.pkg", "other"): ("present", "unknown"),
        (f"{V1}.pkg", "Impl"): ("present", "yes"),
        (f"{V1}.nixl_connector", "NixlConnector"): ("missing", "unknown"),
        ("vllm.distributed.kv_transfer", "X"): ("missing", "unknown"),
        # outside the recorded tree, or not a module name importlib reads as written: not known
        ("vllm.config", "VllmConfig"): ("unknown", "unknown"),
        ("acme.kv.connector", "AcmeConnector"): ("unknown", "unknown"),
        ("vllm.distributed.kv_transfer_x.y", "Y"): ("unknown", "unknown"),
        (f"{V1}..example", "Sure"): ("unknown", "unknown"),
        (f"{V1}.example ", "Sure"): ("unknown", "unknown"),
    }
    assert {key: modules.facts(*key) for key in lookups} == lookups


def test_from_wheel_and_render_write_the_same_table(tmp_path, capsys):
    wheel = make_wheel(tmp_path, {
        KV + "v1/base.py": BASE,
        KV + "v1/example.py": "from .base import KVConnectorBase_V1\nclass Example(KVConnectorBase_V1):\n    pass\n",
        KV + "factory.py": factory(("Example", f"{V1}.example", "Example")),
    })
    facts, direct, again, registry = (tmp_path / n for n in ("facts.json", "direct.json", "again.json", "r.yaml"))
    code, out, err = hma(capsys, "registry", "from-wheel", str(wheel), "--facts", str(facts), "--modules", str(direct),
                         "-o", str(registry))
    assert (code, out) == (0, "")
    assert err == f"hma-policy: wrote {facts}\nhma-policy: wrote {direct}\nhma-policy: wrote {registry}\n"
    assert hma(capsys, "-q", "registry", "render", "--from-facts", str(facts), "--modules", str(again),
               "-o", str(tmp_path / "r2.yaml")) == (0, "", "")
    assert direct.read_bytes() == again.read_bytes()
    data = json.loads(direct.read_text())
    assert (data["kind"], data["format"], data["vllm_version"]) == ("modules", 1, "9.9.9")
    assert data["modules"][f"{V1}.example"]["names"] == ["Example", "KVConnectorBase_V1", "pathlib"]
    # facts recorded without the table cannot give one; nothing is written
    old = json.loads(facts.read_text())
    del old["modules"]
    facts.write_text(json.dumps(old))
    code, out, err = hma(capsys, "registry", "render", "--from-facts", str(facts), "--modules", str(tmp_path / "m.json"),
                         "-o", str(tmp_path / "r3.yaml"))
    assert code == 2 and err == f"hma-policy: {facts}: facts.invalid: recorded without the module table (read the wheel again)\n"
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "r3.yaml").exists()
    no_canary_ran(tmp_path)


@pytest.mark.parametrize("text", ["", "[]", '{"kind": "registry", "format": 1}', '{"kind": "modules", "format": 1}',
                                  '{"kind": "modules", "format": 1, "vllm_version": "1", "prefix": "p", '
                                  '"modules": {"m": {"names": 3}}}'])
def test_a_table_that_is_not_one_is_a_policy_error(text):
    with pytest.raises(PolicyError) as info:
        read_modules(text, "modules/x.json")
    problem = info.value.problems[0]
    assert (problem.code, problem.file) == ("rules.modules", "modules/x.json")
    assert problem.message.startswith("the module table `modules/x.json` cannot be read: ")
