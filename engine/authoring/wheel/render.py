"""Facts (registry.py) rendered as a registry rule file (``kind: registry``,
the format of rules/connectors.yaml, docs/rules.md §6), deterministically:
the same facts give the same bytes, so a recorded facts file re-renders to
the bundled registry byte for byte.

Two tables complete what a wheel cannot say:

- external.json (beside this module): classes that live outside vLLM but
  that vLLM binds a registered name to, with whether each inherits
  ``SupportsHMA`` and the source of that answer. An external class not in
  the table stops the render (``facts.unknown_external``): it is not guessed.
- :data:`ENGINE_ENV_FACTS`: the environment variables the engine has a fact
  for. A name switch on any other variable cannot be written as a `when:`
  (``facts.unknown_switch``): the engine would first need the fact.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

from .registry import CONNECTOR_BASES, FACTS_FORMAT
from .source import WheelError, plain, positive

__all__ = ["render_registry", "ENGINE_ENV_FACTS", "known_external"]

# variable -> the node fact (engine/core/facts.py) that is true when the
# variable is set (non-empty).
ENGINE_ENV_FACTS = {"LMCACHE_USE_UPSTREAM_MP": "env_lmcache_use_upstream_mp"}


@functools.lru_cache(maxsize=None)
def known_external() -> dict[str, tuple[bool, str]]:
    """external.json: class -> (supports_hma, why)."""
    data = json.loads(resources.files(__package__).joinpath("external.json").read_text("utf-8"))
    return {name: (entry["supports_hma"], entry["why"]) for name, entry in data.items()}


@functools.lru_cache(maxsize=None)
def _facts_validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(resources.files(__package__).joinpath("facts.schema.json").read_text("utf-8")))


def _check(facts: object) -> None:
    """facts.invalid, at the first place the facts do not have the shape
    read_wheel gives them (facts.schema.json, beside this module)."""
    from jsonschema.exceptions import best_match

    error = best_match(_facts_validator().iter_errors(facts))
    if error is not None:
        where = "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in error.absolute_path) or "/"
        message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
        raise WheelError("facts.invalid", f"not facts of format {FACTS_FORMAT} at {where}: {message}")


def _yaml_str(text: str) -> str:
    """A double-quoted YAML scalar (JSON string syntax is valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _yaml_bool(value: bool) -> str:
    return "true" if value else "false"


def _class(facts: dict, key: str) -> dict:
    cls = facts["classes"].get(key)
    if cls is None:
        raise WheelError("facts.invalid", f"reference to an unknown class {key}")
    return cls


def _signature(cls: dict) -> str:
    return f"{cls['name']}({', '.join(cls['bases'])})" if cls["bases"] else cls["name"]


def _class_note(facts: dict, key: str) -> str:
    """'Class(Bases)', plus the ancestor that declares SupportsHMA when it is another class."""
    cls = _class(facts, key)
    note = _signature(cls)
    if cls.get("hma_from") and cls["hma_from"] != key:
        note += "; " + _signature(_class(facts, cls["hma_from"]))
    return note


def _verdict(facts: dict, ref: str) -> tuple[bool, str, str]:
    """(supports_hma, note, class name) for a resolved reference."""
    kind, _, target = ref.partition(":")
    if kind == "class":
        cls = _class(facts, target)
        return cls["supports_hma"], _class_note(facts, target), cls["name"]
    if kind == "external":
        if target not in known_external():
            raise WheelError("facts.unknown_external",
                             f"{target} is defined outside vLLM and its HMA support is not known; add it, with the "
                             "source of the answer, to hma_policy/authoring/wheel/external.json")
        supports, why = known_external()[target]
        return supports, f"{target}: {why}", target.rsplit(".", 1)[1]
    raise WheelError("facts.invalid", f"a registration resolves to nothing known: {target}")


def _cond_text(cond: dict) -> str:
    if "not" in cond:
        return "not " + _cond_text(cond["not"])
    if "env" in cond:
        test = cond["test"]
        if test == "equals":
            return f"env {cond['env']} == {cond['value']!r}"
        if test == "present":
            return f"env {cond['env']} present"
        if test == "vllm_envs":
            return f"envs.{cond['env']} true"
        return f"env {cond['env']} set"
    if "imports" in cond:
        return "importable: " + ", ".join(cond["imports"])
    return cond.get("expr", "?")


def _assumed(cond: dict) -> bool | None:
    """How the registry reads a non-env condition: True/False, or None for an env test.

    A guarded import is taken to succeed: a deployment that names the
    connector has its package installed (the connector module itself imports
    it), and that is the case the registry describes; the fallback is noted.
    """
    if "not" in cond:
        inner = _assumed(cond["not"])
        return None if inner is None else not inner
    if "env" in cond:
        return None
    if "imports" in cond:
        return True
    raise WheelError("facts.unknown_switch", f"a name switch on an unreadable condition: {cond.get('expr')}")


def _when(conds: list[dict]) -> dict:
    """Engine facts for a conjunction of env tests (facts.unknown_switch if none exists)."""
    when = {}
    for cond in conds:
        inner = positive(cond)
        fact = ENGINE_ENV_FACTS.get(inner["env"])
        if fact is None or inner["test"] not in ("set", "vllm_envs"):
            raise WheelError("facts.unknown_switch", f"a name switch on {_cond_text(cond)}: the engine has no fact for it")
        when[fact] = "not" not in cond
    return when


def _case_id(entry: str, class_name: str, conds: list[dict], used: set) -> str:
    """'upstream' for LMCacheMPConnector -> LMCacheMPConnectorUpstream; else the env variable."""
    if class_name.startswith(entry) and class_name != entry:
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", class_name[len(entry):]).lower()
    else:
        base = "_".join(positive(c)["env"].lower() for c in conds)
    case_id, n = base, 2
    while case_id in used:
        case_id, n = f"{base}_{n}", n + 1
    used.add(case_id)
    return case_id


def _entry(facts: dict, reg: dict) -> list[str]:
    """The YAML lines of one registered connector."""
    alternatives = reg["resolves"]
    # Walk the alternatives first match first: one that depends on an env
    # variable becomes a case, the first one that holds without any env
    # condition is the entry's default. Import guards are read by _assumed.
    # A condition that negates an earlier case's whole condition is implied
    # by first-match order (the `else` of an `if`), so it is dropped.
    cases: list[tuple[list[dict], dict]] = []
    default_index = None
    for index, alt in enumerate(alternatives):
        env_conds, holds = [], True
        for cond in alt["when"]:
            assumed = _assumed(cond)
            if assumed is None:
                if not ("not" in cond and [cond["not"]] in [c for c, _ in cases]):
                    env_conds.append(cond)
            elif not assumed:
                holds = False
        if not holds:
            continue
        if env_conds:
            cases.append((env_conds, alt["ref"]))
        else:
            default_index = index
            break
    if default_index is None:
        raise WheelError("facts.invalid", f"{reg['name']}: no alternative holds by default")
    default = alternatives[default_index]
    supports, note, class_name = _verdict(facts, plain(default["ref"]))
    if class_name != reg["class_name"]:
        note = f"alias of {class_name}; " + note
    # The default rests on an import succeeding: say what vLLM uses otherwise.
    if any("imports" in positive(c) for c in default["when"]):
        for alt in alternatives[default_index + 1:]:
            if any("imports" in positive(c) for c in alt["when"]):
                note += f"; if that import fails, {_verdict(facts, plain(alt['ref']))[1]}"
                break
    lines = [f"  {reg['name']}:", f"    supports_hma: {_yaml_bool(supports)}",
             f"    module_path: {reg['module_path']}"]
    if reg["class_name"] != reg["name"]:
        lines.append(f"    class: {reg['class_name']}")
    lines.append(f"    note: {_yaml_str(note)}")
    if cases:
        lines.append("    cases:")
        used: set[str] = set()
        for conds, ref in cases:
            c_supports, c_note, c_class = _verdict(facts, plain(ref))
            when = _when(conds)
            lines += [f"      - id: {_case_id(reg['name'], c_class, conds, used)}",
                      "        when: {" + ", ".join(f"{k}: {_yaml_bool(v)}" for k, v in when.items()) + "}",
                      f"        supports_hma: {_yaml_bool(c_supports)}",
                      f"        note: {_yaml_str(' and '.join(_cond_text(c) for c in conds) + ': ' + c_note)}"]
    return lines


def _unregistered(facts: dict) -> list[tuple[str, str]]:
    """Connector classes of the kv_connector tree that no registration reaches.

    Only leaf classes count (a class no other connector derives from) that a
    package re-exports in its __init__: that is how vLLM ships a connector
    meant to be used by module path (e.g. UMBPStoreConnector, exported by
    kv_connector/v1/umbp/__init__.py). Helper and base classes inside a
    connector's own module are left out.
    """
    reached = {alt["ref"]["class"] for reg in facts["registrations"] for alt in reg["resolves"] if "class" in alt["ref"]}
    bases = {r[len("class:"):] for c in facts["classes"].values() for r in c["base_refs"] if r.startswith("class:")}
    out = []
    for key, exported in sorted(facts.get("exports", {}).items()):
        cls = facts["classes"].get(key)
        if cls and cls["connector"] and key not in reached and key not in bases and cls["name"] not in CONNECTOR_BASES:
            out.append((key, exported))
    return out


def render_registry(facts: dict) -> str:
    """The registry YAML for these facts (see the module docstring).

    Raises WheelError: facts.invalid, facts.unknown_external, facts.unknown_switch."""
    _check(facts)
    wheel = facts["wheel"]
    lines = [
        # where the registry is bundled (rules/registries/), for editors; `rules init` re-points it
        "# yaml-language-server: $schema=../../schemas/rules.schema.json",
        "#",
        f"# Generated by `hma-policy registry from-wheel` from {wheel['file']}",
        f"# (sha256 {wheel['sha256']}).",
        "# Do not edit by hand: regenerate with `hma-policy registry from-wheel WHEEL`",
        "# (or `hma-policy registry render --from-facts FACTS`).",
        "#",
        f"# The connectors vLLM {facts['vllm_version']} registers in KVConnectorFactory, in registration",
        "# order, and whether each class inherits SupportsHMA (read from the class bases;",
        "# every note shows the class and, when another class declares SupportsHMA, that one).",
    ]
    if facts.get("marker") is None:
        lines.append("# This release has no SupportsHMA class: no connector supports HMA.")
    lines += ["kind: registry", f"vllm_version: {_yaml_str(facts['vllm_version'])}", "connectors:"]
    seen = set()
    for reg in facts["registrations"]:
        if reg["name"] in seen:  # vLLM raises on a second registration of a name
            raise WheelError("facts.invalid", f"{reg['name']} is registered twice")
        seen.add(reg["name"])
        lines += _entry(facts, reg)
    unregistered = _unregistered(facts)
    if unregistered:
        lines.append("  # Shipped with vLLM but not registered: reachable only by module path.")
        for key, module_path in unregistered:
            cls = facts["classes"][key]
            if cls["name"] in seen:
                continue
            seen.add(cls["name"])
            lines += [f"  {cls['name']}:", "    registered: false",
                      f"    supports_hma: {_yaml_bool(cls['supports_hma'])}",
                      f"    module_path: {module_path}",
                      f"    note: {_yaml_str(_class_note(facts, key) + '; not in the factory registry')}"]
    return "\n".join(lines) + "\n"
