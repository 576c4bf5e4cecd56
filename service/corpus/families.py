"""Families and duplicates: publications of one family, application or priority collapse into one result.

Two publications belong together when they share any of (what the records hold; the response says which
keys grouped each member):

- ``family``: the same ``family_id`` (a reader that knows the family fills it; none of the real data does);
- ``publication number``: the same country and number, other kind (EP A1 and its B1, US A1 and B1 of one
  number are the same application published twice);
- ``priority``: a shared priority claim (``priority_ids``): the members of a simple family claim the same one.

Groups are the connected components over the result list (union-find), so A1-B1-priority chains join.
The best-ranked member represents its group; the others are listed under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from service.corpus.ids import normalise_pub_id
from service.corpus.record import PatentRecord

KEYS = ("family", "publication number", "priority")


@dataclass
class Group:
    """One result with the members collapsed into it and why each joined."""

    head: int  # index into the records given
    members: list[int] = field(default_factory=list)
    reasons: dict[int, list[str]] = field(default_factory=dict)


def _keys(rec: PatentRecord) -> list[tuple[str, str]]:
    out = [("publication number", f"{rec.country}{rec.number.lstrip('0')}")]
    if rec.family_id:
        out.append(("family", rec.family_id))
    out += [("priority", normalise_pub_id(p)) for p in rec.priority_ids if p.strip()]
    return out


def group(records: Sequence[PatentRecord]) -> list[Group]:
    """Groups of ``records`` (in rank order), each headed by its best-ranked member."""
    parent = list(range(len(records)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    keys = [_keys(rec) for rec in records]
    first: dict[tuple[str, str], int] = {}
    for i, mine in enumerate(keys):
        for key in mine:
            j = first.setdefault(key, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)  # the better-ranked one stays the root
    groups: dict[int, Group] = {}
    for i in range(len(records)):
        root = find(i)
        if i == root:
            groups[i] = Group(head=i)
            continue
        g = groups[root]  # (the root ranks before its members: its group exists)
        g.members.append(i)
        why = sorted({kind for kind, _ in set(keys[root]) & set(keys[i])}, key=KEYS.index)
        g.reasons[i] = why or ["linked through another member"]
    return list(groups.values())


__all__ = ["KEYS", "Group", "group"]
