"""Paired randomisation (permutation) test between two systems on a per-query measure.

Under the null hypothesis the two systems are exchangeable on every query, so each per-query
difference may have its sign flipped. The statistic is the absolute mean difference (two-sided).
When all ``2**n`` sign patterns fit in the permutation budget they are enumerated (exact test);
otherwise ``permutations`` random patterns are drawn with a fixed seed and the p-value is
``(count + 1) / (permutations + 1)``, counting the observed arrangement once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from training.evaluation.measures import EvalReport

_CHUNK = 2048


def _paired(a: Mapping[str, float] | Sequence[float], b: Mapping[str, float] | Sequence[float]) -> np.ndarray:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            only_a = sorted(set(a) - set(b))[:3]
            only_b = sorted(set(b) - set(a))[:3]
            raise ValueError(
                f"the two runs are scored on different queries (only in a: {only_a}, only in b: {only_b}); "
                "evaluate both against the same qrels"
            )
        keys = sorted(a)
        return np.array([a[k] for k in keys], dtype=np.float64) - np.array([b[k] for k in keys], dtype=np.float64)
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        raise TypeError("pass two mappings (query id -> value) or two sequences, not one of each")
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    return np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)


def format_p(p: float) -> str:
    """A p-value as the docs and the experiments' tables print it: 4 decimals below 0.001, 3 below 0.1, else 2."""
    return f"{p:.4f}" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def randomisation_test(
    per_query_a: Mapping[str, float] | Sequence[float],
    per_query_b: Mapping[str, float] | Sequence[float],
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided p-value of the paired randomisation test on the mean per-query difference."""
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    diff = _paired(per_query_a, per_query_b)
    n = diff.size
    if n == 0:
        raise ValueError("no queries to compare")
    if not np.all(np.isfinite(diff)):
        raise ValueError("per-query values must be finite numbers")
    observed = abs(diff.mean())
    threshold = observed - 1e-12 * max(1.0, observed)  # float noise must not turn a tie into a miss

    if n < 63 and 2**n <= permutations:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)[None, :] & 1
        signs = 1.0 - 2.0 * patterns
        hits = int(np.count_nonzero(np.abs(signs @ diff) / n >= threshold))
        return hits / 2**n

    rng = np.random.default_rng(seed)
    hits = 0
    left = permutations
    while left:
        size = min(left, _CHUNK)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, n))
        hits += int(np.count_nonzero(np.abs(signs @ diff) / n >= threshold))
        left -= size
    return (hits + 1) / (permutations + 1)


def compare_reports(
    a: EvalReport,
    b: EvalReport,
    measures: Iterable[str] | None = None,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """p-value of each measure (default: all measures both reports have) between two evaluations."""
    names = list(measures) if measures is not None else [m for m in a.aggregate if m in b.aggregate]
    return {m: randomisation_test(a.measure(m), b.measure(m), permutations=permutations, seed=seed) for m in names}
