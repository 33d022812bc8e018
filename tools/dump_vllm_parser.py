"""Write every option string of a vLLM release's `vllm serve` parser, built
by the release's own code, as JSON: what tests/vllm_releases/parsers/ holds.

Run it with the Python of a virtual environment where the release is
installed on CPU (docs/vllm-releases.md, "Running an old release's real code
on CPU"); nothing is started, only the parser is built, as
vllm/entrypoints/cli/main.py builds it:

    VLLM_TARGET_DEVICE=cpu VENV/bin/python tools/dump_vllm_parser.py OUT.json    # 0.33.0
    FORCE_CPU_PLATFORM=1 VENV/bin/python tools/dump_vllm_parser.py OUT.json      # releases without that variable

The option strings are the keys of the parser's registry of option strings,
not only each action's visible ones: 0.33.0 hides `--no-enable-x` from them.
"""

import importlib.metadata
import json
import os
import sys

if os.environ.get("FORCE_CPU_PLATFORM"):  # as vllm/entrypoints/cli/main.py does for `vllm bench`
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform
    platforms.current_platform = CpuPlatform()

import vllm.entrypoints.cli.serve as serve  # noqa: E402

try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:  # before 0.12.0 it is in vllm.utils
    from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]


def main(out: str) -> None:
    version = importlib.metadata.version("vllm")
    top = FlexibleArgumentParser(description="vLLM CLI")
    top.add_argument("-v", "--version", action="version", version=version)
    subparsers = top.add_subparsers(required=False, dest="subparser")
    command = next(c for c in serve.cmd_init() if c.name == "serve")
    parser = command.subparser_init(subparsers)
    registered = sorted(parser._option_string_actions)
    data = {"vllm_version": version, "python": sys.version.split()[0], "allow_abbrev": parser.allow_abbrev,
            "long_options": [o for o in registered if o.startswith("--")],
            "short_options": [o for o in registered if not o.startswith("--")]}
    with open(out + ".part", "w", encoding="utf-8") as handle:  # written whole, then put in place
        handle.write(json.dumps(data, indent=1) + "\n")
    os.replace(out + ".part", out)


if __name__ == "__main__":
    main(sys.argv[1])
