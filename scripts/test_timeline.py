"""Sum up a test run's timeline (``PRIORART_TEST_TIMELINE=FILE bash scripts/test.sh``, see tests/conftest.py).

Usage: python scripts/test_timeline.py FILE [--top N]

Prints, per worker, its busy seconds, when it finished and its idle time from the first test's start, and the N
files that took longest (the sum of their tests' seconds, and when each started and ended on its worker).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{args.file}: no tests")
    t0 = min(r["start"] for r in rows)
    end = max(r["end"] for r in rows)
    print(f"{len(rows)} tests, {end - t0:.0f} s from the first start to the last end")
    by_worker: dict[str, list[dict[str, float]]] = defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    for worker, mine in sorted(by_worker.items()):
        busy = sum(r["end"] - r["start"] for r in mine)
        last = max(r["end"] for r in mine) - t0
        print(f"{worker}: {len(mine)} tests, busy {busy:.0f} s, done at {last:.0f} s, idle {last - busy:.0f} s "
              f"before that and {end - t0 - last:.0f} s after")
    files: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        key = (r["test"].split("::", 1)[0], r["worker"])
        f = files.setdefault(key, [0.0, r["start"], r["end"]])
        f[0] += r["end"] - r["start"]
        f[1], f[2] = min(f[1], r["start"]), max(f[2], r["end"])
    print(f"\n{'seconds':>8} {'from':>6} {'to':>6}  worker file")
    for (name, worker), (secs, first, last) in sorted(files.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{secs:8.1f} {first - t0:6.0f} {last - t0:6.0f}  {worker} {name}")


if __name__ == "__main__":
    main()
