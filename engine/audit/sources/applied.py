"""Manifests a shell script applies: ``kubectl apply -f -`` reading a
here-document (``kubectl apply -f - <<EOF``, ``cat <<EOF | kubectl apply -f
-``), or ``kubectl apply -f FILE`` of a file the script wrote with one
(``cat > model.yaml <<EOF``). Their objects are read as a manifest file's
are (manifests.py), at the script's own lines.

The shell reader (shell_run.py) keeps each manifest as the script expands
it: a value the script does not set (``${MODEL}``) is an unresolved marker,
which no YAML parser takes. Each marker is swapped for a placeholder before
the text is parsed and put back in every string value after, as the Helm
template reader does with ``{{ ... }}``, so that the launch reports it as it
reports a variable in a command line. A manifest whose text is not the
file's own lines (``echo "$YAML" > m.yaml``) is not read: its objects would
have no line to stand at.
"""

from __future__ import annotations

from ...core import yamlsafe
from ...core.errors import Problem
from ...core.markers import held_markers, shown_held, unheld
from .context import Ctx
from .deployment import Deployment
from .detect import classify, mentions_vllm
from .manifests import manifest_file
from .marks import Lines, yaml_chunks
from .shell_state import Script

__all__ = ["applied_manifests"]


def applied_manifests(ctx: Ctx, scripts: list[Script]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of the manifests a script applies, in order, and the
    problems of those that cannot be read."""
    deployments: list[Deployment] = []
    problems: list[Problem] = []
    for script in scripts:
        first = script.line if script.in_file else script.file_line
        if first is None:  # (a text made at run time: no lines of the file to read it at)
            continue
        text, held = held_markers(script.text) or (script.text, [])
        chunks = yaml_chunks(text)
        if len(chunks) > ctx.limits.max_yaml_documents:
            problems.append(ctx.problem("input.limit", f"the manifest applied at line {first} holds more than "
                                        f"{ctx.limits.max_yaml_documents} YAML documents", line=first))
            continue
        documents = []
        for start, body in chunks:
            try:
                value, where = yamlsafe.load(body, marks=True)
            except yamlsafe.YamlProblem as refused:
                if not mentions_vllm(body):
                    continue  # (another tool's broken manifest: skipped, as a broken file that never names vLLM is)
                line = first + start + (refused.line - 1 if refused.line else 0)
                problems.append(ctx.problem("input.parse", f"the manifest the script applies is not YAML the audit "
                                            f"reads (line {line}): {shown_held(refused.message, held)}", line=line))
                continue
            if classify(value, single=False) == "kubernetes":
                documents.append((first - 1 + start, unheld(value, held), Lines(body, first + start, where)))
        if documents:
            found = manifest_file(ctx, documents)
            deployments += found.deployments
            problems += found.problems
    return deployments, problems
