"""Jupyter notebooks (``*.ipynb``): the Python of their code cells, read as
a Python launcher is (python.py). Each line of a cell stands at the line of
the notebook's JSON that holds it (nbformat writes one source line a JSON
line), so that a launch is reported where the notebook's text has it. A
line of IPython's own syntax is the Python IPython makes of it
(IPython.core.inputtransformer2): ``!cmd`` is ``get_ipython().system('cmd')``,
``x = !cmd`` ``x = get_ipython().getoutput('cmd')``, ``%name args``
``get_ipython().run_line_magic('name', 'args')``, and a ``%%bash`` (``%%sh``,
``%%script bash``) cell ``get_ipython().run_cell_magic('bash', '', 'cell')``
at its first line; so a shell command a cell runs, and a ``!pip install
vllm==X`` pin, are read as a launcher's (python.py). Other cell magics and
help queries (``obj?``) are left out. A ``%%writefile NAME`` cell writes
the file NAME (a Dockerfile, a script: GoogleCloudPlatform/generative-ai's
Cloud Run notebook writes its vLLM image's Dockerfile so), which is read as
that file, its lines where the notebook has them. A notebook that is not
JSON, or holds no code cell, is no source."""

from __future__ import annotations

import ast
import json
import re
from typing import Any, NamedTuple

from .context import Ctx

__all__ = ["Notebook", "Written", "read_notebook", "without_outputs"]

# Cell magics whose cell is a shell script, as IPython's run_cell_magic is given them: (name, line).
_SHELL_CELLS = re.compile(r"%%(?:(bash|sh)|(script)[ \t]+(bash|sh))[ \t]*$")
# A shell escape assigned to a name (`files = !ls`), and a line magic (`%pip install x`).
_CAPTURED = re.compile(r"^([ \t]*[A-Za-z_][\w.]*[ \t]*=[ \t]*)!(.*)$")
_LINE_MAGIC = re.compile(r"%([A-Za-z_]\w*)[ \t]*(.*)$")
# A cell that writes a file: `%%writefile [-a|--append] NAME`.
_WRITEFILE = re.compile(r"%%writefile(?:[ \t]+(?:-a|--append))?[ \t]+(\S+)[ \t]*$")


class Written(NamedTuple):
    """A file a ``%%writefile`` cell writes: its name, its text, and the notebook's line of the cell's first."""

    name: str
    text: str
    line: int


class Notebook(NamedTuple):
    """A notebook's code cells: their Python, each line at the notebook's line (None: no code), and the
    files its cells write."""

    code: str | None
    files: tuple[Written, ...]


def _joined(lines: list[str]) -> list[str]:
    """The cell's lines with a shell escape (also one assigned, `x = !cmd`)
    or line magic continued by a trailing backslash joined onto its first
    line, as IPython joins them (`!bash run.sh \\` then its arguments), the
    lines it takes left empty."""
    out = list(lines)
    for index in range(len(out)):
        if not (out[index].lstrip().startswith(("!", "%")) or _CAPTURED.match(out[index])):
            continue
        parts, taken = [out[index]], index + 1
        while parts[-1].endswith("\\") and taken < len(out):  # (parts joined once: linear in the cell)
            parts[-1] = parts[-1][:-1]
            parts.append(out[taken].strip())
            out[taken] = ""
            taken += 1
        out[index] = " ".join(parts)
    return out


def _cleaned(lines: list[str]) -> list[str]:
    """A cell's lines as IPython's cleanup transforms leave them: the first
    line's indentation removed from every line that starts with it
    (`leading_indent`: a cell written ` !cmd` runs `!cmd`). (Its leading
    blank lines, which `leading_empty_lines` drops, are skipped by the caller,
    which keeps their places.)"""
    first = next((text for text in lines if text.strip()), "")
    indent = first[:len(first) - len(first.lstrip())]
    return [text[len(indent):] if text.startswith(indent) else text for text in lines] if indent else lines


def _parses(code: str) -> bool:
    """Whether a cell's Python parses on its own (with a top-level ``await``, which IPython runs)."""
    try:
        compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (null bytes; nested deeper than the parser goes)
        return False
    return True


def _python(text: str) -> str | None:
    """A source line as the Python IPython runs for it (the line itself for
    Python); None for a line left out (a help query, a blank line)."""
    stripped = text.strip()
    lead = text[:len(text) - len(text.lstrip())]
    if not stripped or stripped.startswith("?") or (stripped.endswith("?") and not stripped.startswith("#")):
        return None  # (a help query: `?obj`, `obj?`, `obj??`)
    if stripped.startswith("!"):
        run, command = ("getoutput", stripped[2:]) if stripped.startswith("!!") else ("system", stripped[1:])
        return f"{lead}get_ipython().{run}({command!r})"
    if stripped.startswith("%"):
        magic = _LINE_MAGIC.match(stripped)
        return f"{lead}get_ipython().run_line_magic({magic[1]!r}, {magic[2]!r})" if magic else None
    captured = _CAPTURED.match(text)
    return f"{captured[1]}get_ipython().getoutput({captured[2]!r})" if captured else text


def read_notebook(ctx: Ctx) -> Notebook | None:
    """The Python a notebook's code cells hold, each line at the line of the
    notebook where it is written, and the files they write (None: not a notebook)."""
    try:
        notebook: Any = json.loads(ctx.text)
    except (ValueError, RecursionError):
        return None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return None
    lines = ctx.text.split("\n")
    out: list[str] = [""] * len(lines)
    at = 0  # the notebook's line the search for the next source line starts at
    placed = True  # every line so far found where the notebook has it (else: each placed after the last)
    files: list[Written] = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        written = "".join(source) if isinstance(source, list) and all(isinstance(s, str) for s in source) \
            else source if isinstance(source, str) else ""
        written_lines = _cleaned(written.split("\n"))
        first = next((i for i, text in enumerate(written_lines) if text.strip()), 0)
        written_lines = [""] * first + written_lines[first:]  # (leading blank lines: their places kept)
        head = written_lines[first]
        writes = _WRITEFILE.match(head.strip())
        if writes is not None:  # (placed at the cell's first line, as a shell cell is)
            files.append(Written(writes[1], "\n".join(written_lines[first + 1:]) + "\n", -1))
            pythons: list[str | None] = [None] * first + [""] + [None] * (len(written_lines) - first - 1)
        elif head.lstrip().startswith("%%"):
            shell = _SHELL_CELLS.match(head.strip())
            if shell is None:
                continue  # (a cell magic of another language, or of IPython's own: not read)
            name, line = (shell[1], "") if shell[1] else (shell[2], shell[3])
            script = "\n".join(written_lines[first + 1:]) + "\n"
            # (the call stands at the cell's first line: each launch of its script is reported there)
            pythons = [None] * first + [f"get_ipython().run_cell_magic({name!r}, {line!r}, {script!r})"]
            pythons += [None] * (len(written_lines) - first - 1)
        else:
            pythons = [_python(text) for text in _joined(written_lines)]
            if not _parses("\n".join(p or "" for p in pythons)):
                continue  # (IPython runs each cell apart: one it cannot run stops no other)
        # A source written as one string (nbformat allows it) is on one line of the notebook: the
        # cell's lines are placed from that line on, one after another.
        whole = json.dumps(source, ensure_ascii=False) if isinstance(source, str) and "\n" in source.rstrip("\n") \
            else None
        start = next((i for i in range(at, len(lines)) if whole in lines[i]), None) if whole and placed else None
        for index, (text, python) in enumerate(zip(written_lines, pythons)):
            if python is None or (not python.strip() and writes is None):
                continue
            # (nbformat writes a source line as a JSON string of its own, with its newline but the last;
            # each search goes on from the last line found, so a notebook is read in linear time)
            encoded = json.dumps(text, ensure_ascii=False)[:-1]
            found = start + index if start is not None else \
                next((i for i in range(at, len(lines)) if encoded + '\\n"' in lines[i]
                      or encoded + '"' in lines[i]), None) if placed else None
            if found is not None and found >= len(out):
                out += [""] * (found + 1 - len(out))
            if found is None:  # (written some other way: each line after the last one placed, from here on)
                placed = False
                if at < len(out):
                    out[at] = python
                else:
                    out.append(python)
                found = at
            else:
                out[found] = python
            at = found + 1
            if writes is not None:  # (its first line's place found: the file's lines follow it)
                files[-1] = files[-1]._replace(line=found + 1)
                break
    return Notebook("\n".join(out) if any(out) else None, tuple(files))


def without_outputs(text: str) -> str:
    """A notebook's text with the lines of its cells' stored outputs blank
    (the line count kept): what a run printed once (vLLM's own log,
    `Namespace(... kv_transfer_config=None ...)`) is no option the notebook
    sets. Each output line is found as nbformat writes it, a JSON string of
    its own; ``text`` as it is where it is no notebook."""
    try:
        notebook: Any = json.loads(text)
    except (ValueError, RecursionError):
        return text
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    printed: set[str] = set()
    for cell in cells if isinstance(cells, list) else ():
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            if not isinstance(output, dict):
                continue
            data = output.get("data")
            for value in [output.get("text"), *(data.values() if isinstance(data, dict) else ())]:
                for line in value if isinstance(value, list) else [value] if isinstance(value, str) else ():
                    if isinstance(line, str):
                        printed.add(json.dumps(line, ensure_ascii=False))
    if not printed:
        return text
    return "\n".join("" if line.strip().rstrip(",") in printed else line for line in text.split("\n"))
