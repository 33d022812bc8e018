"""Helpers the benchmark scripts share."""

from __future__ import annotations


def rss_kib() -> int:
    """The process's resident set size in KiB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
