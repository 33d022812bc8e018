"""The package's shape, checked statically (docs/internals.md describes it).

- No import cycles between engine/ modules.
- Every import between the package's parts goes down its layers (LAYERS).
- Exactly one module imports durable-rules.
- The facade (engine/__init__.py) only re-exports.
- No module uses another module's private names.
- No connector name appears in engine/ code: policy lives in rule files
  (docstrings and comments may show examples).
- No engine module is over 600 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

ENGINE = Path(__file__).resolve().parents[1] / "engine"
RULES = Path(__file__).resolve().parents[1] / "rules"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ENGINE.rglob("*.py")):
        parts = list(path.relative_to(ENGINE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["hma_policy", *parts])] = path
    return out


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for each import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package(name, path).split(".")
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            names = [alias.name for alias in node.names]
            known = modules()
            # `from . import x` imports the module x when there is one
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
            out.append((base, [n for n in names if f"{base}.{n}" not in known]))
            out += [(s, []) for s in subs]
    return out


def test_no_import_cycles():
    known = modules()
    graph = {name: {m for m, _ in imports(name, path) if m in known and m != name} for name, path in known.items()}
    # The facade and packages' __init__ only hand names on: a module importing
    # its own package is not a cycle through code.
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


# The package's parts, bottom up: a part imports only from the layers below
# its own (docs/internals.md). Each part of a layer stands apart from the others.
LAYERS = (
    {"version", "fileio"},
    {"core"},
    {"audit", "isolation", "render", "policyref"},
    {"clisupport"},
    {"authoring", "server"},
    {"cli"},
    {"__main__"},
)


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(known: dict[str, Path]) -> list[str]:
    """Each import from one part of the package into a part of its own layer or a higher one."""
    layer = {part: depth for depth, parts in enumerate(LAYERS) for part in parts}
    layer["__init__"] = len(LAYERS)  # the facade re-exports from anywhere below it, and nothing imports it
    found = []
    for name, path in known.items():
        for module, _ in imports(name, path):
            if module in known and _part(module) != _part(name) and layer[_part(module)] >= layer[_part(name)]:
                found.append(f"{name} imports {module}")
    return found


def test_every_part_imports_only_from_the_layers_below_it():
    known = modules()
    assert {_part(name) for name in known} == set().union(*LAYERS, {"__init__"})  # a new part takes its layer
    assert upward_imports(known) == []


def test_the_layer_check_finds_an_upward_import(tmp_path):
    # Not vacuous: the two upward imports the layers were written against.
    engine = tmp_path / "hma_policy"
    for module, text in {"policyref.py": "from .authoring.impact import rules_from_git\n",
                         "clisupport.py": "from .authoring.diagnostics import PLAIN\n",
                         "authoring/__init__.py": "", "authoring/impact.py": "", "authoring/diagnostics.py": ""}.items():
        (engine / module).parent.mkdir(parents=True, exist_ok=True)
        (engine / module).write_text(text)
    known = {f"hma_policy.{m.removesuffix('.py').replace('/', '.').removesuffix('.__init__')}": engine / m
             for m in ("policyref.py", "clisupport.py", "authoring/__init__.py", "authoring/impact.py",
                       "authoring/diagnostics.py")}
    assert upward_imports(known) == ["hma_policy.policyref imports hma_policy.authoring.impact",
                                     "hma_policy.clisupport imports hma_policy.authoring.diagnostics"]


def test_exactly_one_module_imports_durable_rules():
    users = sorted(name for name, path in modules().items()
                   if any(m.split(".")[0] in ("durable", "durable_rules_engine") for m, _ in imports(name, path)))
    assert users == ["hma_policy.core._durable"]


def test_the_facade_only_re_exports():
    tree = ast.parse((ENGINE / "__init__.py").read_text(encoding="utf-8"))
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "ImportFrom", "Assign"}, kinds
    assigned = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets]
    assert assigned == ["__all__"]


def test_no_module_uses_another_modules_private_names():
    known = modules()
    found = []
    for name, path in known.items():
        for module, names in imports(name, path):
            if module in known and module != name:
                found += [f"{name} imports {module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # attribute access on an imported module object: `audit_module._thing`
        aliases = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   for alias in node.names if f"{node.module}.{alias.name}" in known}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{name} reads {node.value.id}.{node.attr}")
    assert found == []


def _connector_names() -> set[str]:
    names: set[str] = set()
    for path in [*RULES.glob("registries/*.yaml"), *RULES.glob("epochs/*/*.yaml")]:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data.get("kind") == "registry":
            for name, entry in data["connectors"].items():
                names.add(name)
                if "class" in entry:
                    names.add(entry["class"])
        names.update(data.get("containers") or ())
    return names


def test_no_connector_name_appears_in_engine_code():
    names = _connector_names()
    assert {"NixlConnector", "MultiConnector", "LMCacheConnectorV1"} <= names
    found = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [f"{name}:{node.lineno}: {n}" for n in names if n in node.value]
            elif isinstance(node, ast.Name) and node.id in names:
                found.append(f"{name}:{node.lineno}: identifier {node.id}")
    assert found == []


def test_no_engine_module_is_over_600_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
