"""The first claims among a ranking result's claims topics: MRR and the share found first, per direction.

Usage: python scripts/first_claims.py RESULT.json [--systems fusion,cross-fitted]

RESULT.json is what ``priorart-lab experiment ranking --out`` writes (docs/results/ranking.json): its per-topic measures
of every system, cross-fitted by grant. The claims task's topics are every aligned claim of the held-out grants
(``claims:<grant>-<number>-<src>-<dst>``); this keeps claim 1, the figure issue 59 names ("first claims").
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

CLAIM = re.compile(r"claims:(.+)-(\d+)-(\w\w)-(\w\w)$")


def first_claims(per_query: dict[str, dict[str, dict[str, float]]], systems: list[str]) -> dict[str, Any]:
    """``{system: {direction or "all": {"topics", "mrr", "first"}}}`` over the claim-1 topics."""
    parts: dict[str, list[str]] = defaultdict(list)
    for qid in next(iter(per_query.values())):
        m = CLAIM.match(qid)
        if m and m.group(2) == "1":
            parts[f"{m.group(3)}-{m.group(4)}"].append(qid)
            parts["all"].append(qid)
    return {name: {part: {"topics": len(qids),
                          "mrr": sum(per_query[name][q]["mrr"] for q in qids) / len(qids),
                          "first": sum(per_query[name][q]["success@1"] for q in qids) / len(qids)}
                   for part, qids in sorted(parts.items())} for name in systems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--systems", default="fusion,cross-fitted")
    args = parser.parse_args()
    per_query = json.loads(args.result.read_text(encoding="utf-8"))["per_query"]
    for name, parts in first_claims(per_query, args.systems.split(",")).items():
        print(name)
        for part, v in parts.items():
            print(f"  {part:<6} {v['topics']:>5} topics  MRR {v['mrr']:.3f}  found first {v['first']:.3f}")


if __name__ == "__main__":
    main()
