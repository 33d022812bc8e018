"""Jupyter notebooks (``*.ipynb``): the Python of their code cells, read as
a Python launcher is (python.py). Each line of a cell stands at the line of
the notebook's JSON that holds it (nbformat writes one source line a JSON
line), so that a launch is reported where the notebook's text has it; a
line of IPython's own syntax (``!pip install ...``, ``%time``, a
``%%bash`` cell) is left out. A notebook that is not JSON, or holds no code
cell, is no source."""

from __future__ import annotations

import json
from typing import Any

from .context import Ctx

__all__ = ["notebook_text"]

# Lines IPython runs itself: shell escapes, line magics, help queries; a cell magic takes the whole cell.
_IPYTHON = ("!", "%", "?")


def notebook_text(ctx: Ctx) -> str | None:
    """The Python a notebook's code cells hold, each line at the line of the
    notebook where it is written (None: not a notebook)."""
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
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        written = "".join(source) if isinstance(source, list) and all(isinstance(s, str) for s in source) \
            else source if isinstance(source, str) else ""
        code = written.split("\n")
        if code and code[0].lstrip().startswith("%%"):
            continue  # (a cell magic: the cell is another language's, or IPython's)
        for text in code:
            if not text.strip() or text.lstrip().startswith(_IPYTHON):
                continue
            # (nbformat writes a source line as a JSON string of its own, with its newline but the last;
            # each search goes on from the last line found, so a notebook is read in linear time)
            encoded = json.dumps(text, ensure_ascii=False)[:-1]
            found = next((i for i in range(at, len(lines)) if encoded + '\\n"' in lines[i]
                          or encoded + '"' in lines[i]), None) if placed else None
            if found is None:  # (written some other way: each line after the last one placed, from here on)
                placed = False
                if at < len(out):
                    out[at] = text
                else:
                    out.append(text)
                at += 1
                continue
            out[found] = text
            at = found + 1
    return "\n".join(out) if any(out) else None

