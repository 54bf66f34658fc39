"""Time of ``import factorgraph`` and where it goes.

Runs ``python -X importtime -c "import factorgraph"`` in fresh subprocesses (``--runs``, default 7) and prints

* the total: the median (and the spread) over the runs of the cumulative time of ``factorgraph``;
* by package: the median over the runs of the self times summed per top-level package (numpy, scipy,
  numba, the project's packages, ...);
* the heavy third-party imports and the first-party module that triggers each (median cumulative time).

The numbers depend on the machine and its load; compare two versions by running this script on each in
the same session.  Usage: ``python benchmarks/import_time.py [--runs N] [--module factorgraph]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("factorgraph", "distributions", "factors", "schedules")
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def one_run(module: str) -> list[tuple[int, int, int, str]]:
    """(self µs, cumulative µs, depth, name) of every import of one fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    rows = []
    for line in p.stderr.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return rows


def triggers(rows: list[tuple[int, int, int, str]]) -> dict[tuple[str, str], int]:
    """Third-party imports made directly by a first-party module: (module, importer) → cumulative µs.

    ``-X importtime`` prints an import after the imports it made, one level deeper: the importer of a row is
    the next row one level up."""
    out: dict[tuple[str, str], int] = {}
    for i, (_, cum, depth, name) in enumerate(rows):
        if name.split(".")[0] in FIRST_PARTY or depth == 0:
            continue
        for _, _, d, parent in rows[i + 1:]:
            if d == depth - 1:
                if parent.split(".")[0] in FIRST_PARTY:
                    out[(name, parent)] = cum
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--module", default="factorgraph")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    totals, packages, heavy = [], defaultdict(list), defaultdict(list)
    for _ in range(args.runs):
        rows = one_run(args.module)
        totals.append(next(c for _, c, d, n in rows if n == args.module and d == 0) / 1e6)
        per: dict[str, int] = defaultdict(int)
        for s, _, _, n in rows:
            per[n.split(".")[0]] += s
        for k, v in per.items():
            packages[k].append(v / 1e6)
        for k, v in triggers(rows).items():
            heavy[k].append(v / 1e6)
    med = statistics.median
    print(f"import {args.module}: median {med(totals):.3f} s over {args.runs} fresh interpreters "
          f"(min {min(totals):.3f} s, max {max(totals):.3f} s)")
    print("\nby package (median self time, s):")
    for k, v in sorted(packages.items(), key=lambda kv: -med(kv[1]))[: args.top]:
        print(f"  {k:28s} {med(v):7.3f}")
    print("\nthird-party imports made by first-party modules (median cumulative time, s):")
    for (name, parent), v in sorted(heavy.items(), key=lambda kv: -med(kv[1]))[: args.top]:
        print(f"  {med(v):7.3f}  {name:40s} <- {parent}")


if __name__ == "__main__":
    main()
