"""Record how vLLM's pydantic reads a JSON value into an int, float or bool
field of a config class (lax mode: ``kv_port: "8000"`` is 8000): the data
behind hma_policy.core.lax and its differential test.

Run it with the Python of a release's scratch environment (tools/README.md),
which has the pydantic that release's vLLM runs on:

    /work/conformance-venvs/0.33.0/bin/python tools/pydantic_lax.py tests/pydantic_lax/cases.json

The values are curated edge cases and seeded random strings over the
characters that matter (digits, signs, `_`, `.`, exponents, the words of
infinity, NaN and the booleans, whitespace). Each is validated by
``pydantic.TypeAdapter(int | float | bool)``, exactly as a config field of
that type validates it; the output says what pydantic gave (``repr``) or that
it refused the value. The file is written atomically.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile

import pydantic
from pydantic import TypeAdapter

CURATED = ["80", " 80 ", "\t80\n", "+80", "-80", "8_0", "_80", "80_", "8__0", "80.0", "80.00", "80.", ".0", "80.5",
           "1e1", "0x10", "0o7", "0b1", "\u0668\u0660", "", " ", "00", "-0", "+-1", "9" * 30, "80 0", "inf", "nan",
           "1_000.5", "1e-1", "+1.5e3", " 1.5 ", "true", "True", "TRUE", "yes", "on", "1", "0", "t", "f", "y", "n",
           "no", "off", "false", " true ", "2", "INF", "Infinity", "-inf", "+inf", "NaN", "+nan", "-NaN", "iNf",
           "1E5", "1e", "e5", "1.e5", ".5e1", "1_0e1_0", "1_0.0_1", "0_0", "1e+5", "1e-05", "1.5_", "_1.5", "1._5",
           "1_.5", "1e_5", ".", "-.5", "+.5e-3", "1.5e+", "0x1p3", "1d5", "1f", "80.0_0", "8_0.0", "80.0e0", "-80.0",
           "+0.0", "0.000", "-00", "1_000_000", "80e0", "Yes", "oN", "OFF", "T", "F", "true ", "1.0", "0.0", "01",
           "tRuE", "truee", "i_nf", "+_1", "1_e5", "n_an", "in_finity", "-_1", "1e-_5", "1_0_", "\x0b80", "\x0c80",
           "\x1c80", "\x1f80", "\xa080", "\u202880", "\u300080", "\x8580", "\u180e80", "\u200b80", "\ufeff80",
           "80\u2029", "\u16808.5", "\u205f1e1", "\u202f0"]
NUMBERS = [80, -3, 0, 1, 2, 80.0, 80.5, -0.0, 0.0, 1.0, 2.0, 1e20, 9.223372036854776e18, -9.223372036854776e18,
           9.223372036854775e18, 2 ** 70, True, False, None]
ALPHABET = "0123456789_.+-eEinfatyoINFTY \t\xa0"


def values(seed: int, count: int) -> list[object]:
    rng = random.Random(seed)
    drawn = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7))) for _ in range(count)]
    return [*CURATED, *NUMBERS, *dict.fromkeys(drawn)]


def main() -> None:
    out = sys.argv[1]
    adapters = {"int": TypeAdapter(int), "float": TypeAdapter(float), "bool": TypeAdapter(bool)}
    cases = []
    for value in values(20261202, 4000):
        row: dict[str, object] = {"value": value}
        for kind, adapter in adapters.items():
            try:
                row[kind] = repr(adapter.validate_python(value))
            except pydantic.ValidationError:
                row[kind] = None
        cases.append(row)
    data = {"pydantic": pydantic.VERSION, "python": sys.version.split()[0], "cases": cases}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), prefix=".pydantic_lax.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=True, indent=0)
        handle.write("\n")
    os.replace(tmp, out)
    print(f"wrote {len(cases)} values to {out} (pydantic {pydantic.VERSION})")


if __name__ == "__main__":
    main()
