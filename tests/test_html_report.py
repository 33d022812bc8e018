"""The HTML audit report, rendered by a real browser (headless Chromium):
the DOM holds one row per deployment, one chart bar per outcome, every
connector graph drawn, every file problem; no script and nothing fetched from
the network; text from the audited files stays text.

Chromium is a test requirement: .ci/run installs it from Debian's packages
(`apt-get install chromium`). Without it these tests fail under CI (CI=true
or HMA_POLICY_REQUIRE_CHROMIUM=1, which .ci/run sets), so the report never
goes unchecked there; elsewhere they are skipped with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hma_policy.audit.run import audit
from hma_policy.audit.report import render

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after Chromium has loaded ``page`` (no network, fresh profile)."""
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _missing()
    completed = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--dump-dom", page.as_uri()],
        capture_output=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-2000:]
    return completed.stdout.decode("utf-8")


class Dom(HTMLParser):
    """Every element of the dumped DOM: (tag, attributes), and the text."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.tree_depths: list[int] = []  # for each ul.tree, how deep its lists nest
        self._depth: int | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attributes))
        if tag == "ul" and "tree" in attributes.get("class", "").split():
            self._depth = 0
            self.tree_depths.append(0)
        elif tag == "ul" and self._depth is not None:
            self._depth += 1
            self.tree_depths[-1] = max(self.tree_depths[-1], self._depth)

    def handle_endtag(self, tag):
        if tag == "ul" and self._depth is not None:
            self._depth = self._depth - 1 if self._depth else None

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag: str, cls: str | None = None) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag and (cls is None or cls in a.get("class", "").split())]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        report = audit(["examples/fleet"])
    finally:
        os.chdir(cwd)
    page = tmp / "fleet.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    return report.to_dict(), Dom(dump_dom(page, tmp / "profile"))


def _missing() -> None:
    """CI (which installs Chromium) fails without it; elsewhere the test is
    skipped with this reason, so the README's test command holds on a machine
    without a browser."""
    message = (f"{CHROMIUM} is not installed; the HTML report is tested in headless Chromium. "
               ".ci/run installs it (apt-get update && apt-get install -y --no-install-recommends chromium)")
    if os.environ.get("CI") or os.environ.get("HMA_POLICY_REQUIRE_CHROMIUM"):
        pytest.fail(message)
    pytest.skip(message)


def test_chromium_is_the_debian_package_the_ci_installs():
    if not (shutil.which("chromium") == CHROMIUM or os.path.exists(CHROMIUM)):
        _missing()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install -y --no-install-recommends chromium" in ci


def test_one_row_per_deployment_with_its_outcome(fleet):
    data, dom = fleet
    rows = dom.having("tr", "deployment")
    assert len(rows) == data["summary"]["deployments"] == 38
    assert [r["data-id"] for r in rows] == [d["id"] for d in data["deployments"]]
    assert Counter(r["data-outcome"] for r in rows) == Counter(data["summary"]["outcomes"]) - Counter()
    assert len(dom.having("tr", "problem")) == data["summary"]["problems"] == 1


def test_the_summary_chart_is_inline_svg_with_one_bar_per_outcome(fleet):
    data, dom = fleet
    assert len(dom.having("svg")) == 1 and dom.having("svg")[0]["id"] == "summary-chart"
    bars = dom.having("rect", "bar")
    assert {b["data-key"]: int(b["data-count"]) for b in bars} == {**data["summary"]["outcomes"], "problems": 1}
    widths = {b["data-key"]: int(b["width"]) for b in bars}
    assert widths["enabled"] > widths["disabled"] > widths["error"] > widths["undetermined"] > 0


def test_every_connector_graph_is_drawn(fleet):
    data, dom = fleet
    with_graph = [d for d in data["deployments"] if d["decision"]["connectors"]]
    assert len(dom.having("ul", "tree")) == len(with_graph) == 37  # the unresolved launcher has no graph
    nodes = dom.having("li", "node")
    assert len(nodes) == sum(len(d["decision"]["connectors"]) for d in with_graph)
    assert Counter(n["data-supports"] for n in nodes) == Counter(
        {True: "true", False: "false", None: "unknown"}[c["supports_hma"]] for d in with_graph for c in d["decision"]["connectors"])
    # Children are nested lists, as deep as the graph: a MultiConnector inside a MultiConnector is two levels.
    expected_depths = [max(c["path"].count("/kv_connector_extra_config/connectors/") for c in d["decision"]["connectors"])
                       for d in with_graph]
    assert dom.tree_depths == expected_depths
    assert Counter(expected_depths) == {0: 32, 1: 3, 2: 2}


def test_no_script_and_nothing_from_the_network(fleet):
    _, dom = fleet
    assert dom.having("script") == [] and dom.having("link") == [] and dom.having("iframe") == []
    for tag, attrs in dom.elements:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "href", "action", "poster"):
                assert not value.startswith(("http:", "https:", "//")), (tag, name, value)
    assert dom.having("style")  # the style is inline


def test_names_from_audited_files_stay_text(tmp_path):
    hostile = '<script>alert(1)</script><img src=x onerror=alert(2)>'
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "d.json").write_text(json.dumps({
        "name": hostile, "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                                 "kv_connector_extra_config": {"connectors": [
                                                     {"kv_connector": hostile, "kv_role": "kv_both"}]}}}))
    page = tmp_path / "r.html"
    page.write_text(render(audit([str(tmp_path / "in")]), "html"), encoding="utf-8")
    dom = Dom(dump_dom(page, tmp_path / "profile"))
    assert dom.having("script") == [] and dom.having("img") == []
    assert hostile in "".join(dom.text)
    assert len(dom.having("li", "node")) == 2
