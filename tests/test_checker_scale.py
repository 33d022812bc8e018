"""The checker's scale in conditional registry entries (issue 19, point 10).

Registry entries reachable by module path compile into rules that compare the
module path only beside the class name. The step table classes the two
jointly (a module path is told apart only beside the name it is declared
with), so the inputs of `class_hma` grow linearly with the registry, not with
its square; and the classes stay exact: every decision through the table is
the one durable-rules gives step by step, for names paired with their own
module path, another entry's, or none.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from hma_policy.core.policy import load_policy
from hma_policy.authoring.verify import verify

# Loaded by path: benchmarks/ on sys.path would shadow the standard library's http.
_SPEC = importlib.util.spec_from_file_location(
    "checker_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "checker_scale.py")
checker_scale = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(checker_scale)
rules_copy = checker_scale.rules_copy


def class_hma_inputs(directory: Path) -> int:
    policy = load_policy(directory)
    try:
        return len(policy.table.rows("node", "class_hma"))
    finally:
        policy.close()


def test_class_hma_inputs_grow_linearly_with_the_registry(tmp_path):
    sizes = {n: class_hma_inputs(rules_copy(tmp_path / f"n{n}", n)) for n in (10, 20, 40)}
    # The same number of new inputs per added entry (the product of names and
    # module paths grew by 30 inputs per entry at 10 entries, 70 at 40).
    assert sizes[40] - sizes[20] == 2 * (sizes[20] - sizes[10]), sizes


def test_joint_classes_decide_as_durable_rules(tmp_path):
    directory = rules_copy(tmp_path / "n3", 3)
    table, direct = load_policy(directory), load_policy(directory, memo=False)
    try:
        names = ["Site0Connector", "Site1Connector", "NixlConnector", "Elsewhere"]
        paths = [None, "site.connectors.c0", "site.connectors.c2", "vllm.distributed.kv_transfer.kv_connector.v1.nixl",
                 "elsewhere.kv"]
        checked = 0
        for name in names:
            for path in paths:
                for upstream in (False, True):
                    leaf = {"kv_connector": name, "kv_role": "kv_both"}
                    if path is not None:
                        leaf["kv_connector_module_path"] = path
                    for ktc in (leaf, {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"connectors": [dict(leaf)]}}):
                        document = {"kv_transfer_config": ktc}
                        if upstream:
                            document["env"] = {"LMCACHE_USE_UPSTREAM_MP": "1"}
                        assert table.decide(document).to_dict() == direct.decide(document).to_dict(), document
                        checked += 1
        assert checked == 80
        # the cases hold: Site1 by its own module path is unsupported as a child, supported at the top
        own = {"kv_connector": "Site1Connector", "kv_connector_module_path": "site.connectors.c1", "kv_role": "kv_both"}
        assert table.decide({"kv_transfer_config": own}).hma_enabled is True
        multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [own]}}
        assert table.decide({"kv_transfer_config": multi}).hma_enabled is False
    finally:
        table.close()
        direct.close()


@pytest.mark.slow
def test_two_hundred_conditional_entries_check_quickly(tmp_path):
    policy = load_policy(rules_copy(tmp_path / "n200", 200))
    start = time.perf_counter()
    try:
        report = verify(policy)
    finally:
        policy.close()
    seconds = time.perf_counter() - start
    assert not report.errors, [f.message for f in report.errors]
    assert report.rules_fired == report.rules_total
    order = {f.rules for f in report.findings if f.code == "verify.order" and f.step == "class_hma"}
    for i in (0, 199):
        # each case wins over the plain entry by order, by name and by module path
        assert (f"registry.Site{i}Connector.upstream", f"registry.Site{i}Connector") in order
        assert (f"registry.Site{i}Connector.module.upstream", f"registry.Site{i}Connector.module") in order
    assert seconds < 120, f"verifying 200 conditional registry entries took {seconds:.0f} s"
