"""Word-translation probabilities from aligned EP claims: IBM model 1, trained by EM.

The "sentences" are claims of EP grants that carry the same claim (same number) in the source
language and in English, plus the titles when both exist. Both sides are analysed with the
service's text pipeline (``get_analyzer(lang)``: stemmed, accent-folded index terms), so the model
translates *index terms* exactly as the query analyser produces them.

IBM model 1 (Brown et al. 1993) generates each target term e of a pair from one source term f of
the paired sentence or from a NULL word, with t(e|f); EM re-estimates t from expected alignment
counts. The implementation works on the unique (sentence, target term, source term) triples with
their counts, so every EM step is a handful of vectorised numpy operations.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from service.corpus.record import PatentRecord
from service.text.analysis import Analyzer, get_analyzer, stopwords

if TYPE_CHECKING:
    from service.text.compounds import CompoundSplitter

log = logging.getLogger(__name__)

NULL = "<null>"

SentencePair = tuple[list[str], list[str]]  # (source-language terms, target-language terms)


def aligned_pairs(
    records: Iterable[PatentRecord],
    src: str,
    tgt: str = "en",
    *,
    exclude_ids: Collection[str] = (),
    titles: bool = True,
    function_words: bool = False,
    splitters: Mapping[str, CompoundSplitter] | None = None,
) -> tuple[list[SentencePair], list[str]]:
    """Analysed (source, target) term lists of the claims (and titles) a record has in both languages.

    Claims are paired by claim number; titles (``titles=True``) are paired for every record that has
    both, grants or not. Reference signs, numbers and classification codes are dropped: they are the
    same in both languages (the query side passes them through untranslated) and would only attract
    alignments of the words around them. Records whose id is in ``exclude_ids`` are skipped (their
    text must not be seen when they are evaluation topics). ``function_words`` keeps stop words on
    both sides (stemmed like every term), so that words whose translation is a stop word ("worin" ->
    "wherein") can align to it instead of to content words. ``splitters``: compound splitters per
    language (the index's analysis: compounds give their term and their parts' terms). Returns the pairs
    and the ids used.
    """
    if src == tgt:
        raise ValueError(f"source and target language are both {src!r}")
    sp = splitters or {}
    if function_words or sp:
        a_src = Analyzer(src, remove_stopwords=not function_words, splitter=sp.get(src))
        a_tgt = Analyzer(tgt, remove_stopwords=not function_words, splitter=sp.get(tgt))
    else:
        a_src, a_tgt = get_analyzer(src), get_analyzer(tgt)
    excluded = set(exclude_ids)
    pairs: list[SentencePair] = []
    used: list[str] = []
    for rec in records:
        if rec.id in excluded:
            continue
        src_claims = {c.num: c.text for c in rec.claims.get(src, [])}
        tgt_claims = {c.num: c.text for c in rec.claims.get(tgt, [])}
        texts = [(src_claims[num], tgt_claims[num]) for num in sorted(src_claims.keys() & tgt_claims.keys())]
        if titles and src in rec.title and tgt in rec.title:
            texts.append((rec.title[src], rec.title[tgt]))
        n_before = len(pairs)
        for s_text, t_text in texts:
            s, t = _content(_split_terms(a_src, s_text)), _content(_split_terms(a_tgt, t_text))
            if s and t:
                pairs.append((s, t))
        if len(pairs) > n_before:
            used.append(rec.id)
    return pairs, used


def _split_terms(analyzer: Analyzer, text: str) -> list[str]:
    """Index terms, a split compound replaced by its parts (as in compound splitting for SMT: the model then
    learns the parts' translations instead of spreading each English word over the word and its parts)."""
    if analyzer.splitter is None:
        return analyzer(text)
    out: list[str] = []
    for whole, parts in analyzer.groups(text):
        out.extend(parts or (whole,))
    return out


def _content(terms: list[str]) -> list[str]:
    return [t for t in terms if not (t[0] == "(" or t[0].isdigit() or "/" in t)]


@dataclass
class IBM1Model:
    """t(target term | source term) estimated by IBM model 1 (the NULL word is ``NULL``)."""

    src_vocab: list[str]  # index 0 is NULL
    tgt_vocab: list[str]
    pair_src: np.ndarray  # int32 row per (source, target) pair that co-occurred in some sentence pair
    pair_tgt: np.ndarray
    prob: np.ndarray  # float64 t(tgt | src) for each pair; sums to 1 over the pairs of one source term
    src_counts: dict[str, int] = field(default_factory=dict)  # occurrences of each source term
    log_likelihood: list[float] = field(default_factory=list)  # per EM iteration (before its M-step)
    n_pairs: int = 0

    def table(self, *, min_prob: float = 0.0, min_count: int = 1) -> dict[str, dict[str, float]]:
        """``{source term: {target term: p}}`` without the NULL row, dropping p < ``min_prob``.

        Rows are renormalised after dropping; ``min_count`` skips source terms seen fewer times.
        """
        out: dict[str, dict[str, float]] = {}
        keep = np.flatnonzero((self.pair_src != 0) & (self.prob >= min_prob))
        for s, t, p in zip(
            self.pair_src[keep].tolist(), self.pair_tgt[keep].tolist(), self.prob[keep].tolist(), strict=True
        ):
            term = self.src_vocab[s]
            if self.src_counts.get(term, 0) >= min_count:
                out.setdefault(term, {})[self.tgt_vocab[t]] = p
        for row in out.values():
            total = sum(row.values())
            for t in row:
                row[t] /= total
        return out


def train_ibm1(
    pairs: Sequence[SentencePair],
    *,
    iterations: int = 10,
    null: bool = True,
    progress: bool | None = None,
) -> IBM1Model:
    """Train t(e|f) on (source terms f, target terms e) pairs with EM; deterministic.

    Initialisation is uniform (so the first E-step is co-occurrence counting); ``null`` adds the
    NULL source word to every sentence. ``progress`` shows a tqdm bar on stderr (None: when a TTY).
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    pairs = [(list(f), list(e)) for f, e in pairs if f and e]
    if not pairs:
        raise ValueError("no sentence pairs with text on both sides: nothing to train the translation model on")

    src_counts: Counter[str] = Counter()
    tgt_set: set[str] = set()
    for f, e in pairs:
        src_counts.update(f)
        tgt_set.update(e)
    src_vocab = [NULL, *sorted(src_counts)]
    tgt_vocab = sorted(tgt_set)
    s_id = {w: i for i, w in enumerate(src_vocab)}
    t_id = {w: i for i, w in enumerate(tgt_vocab)}

    # One row per (sentence, unique target term, unique source term): source count c_f,
    # target count c_e, the group (sentence, target term) the alignment posterior normalises over.
    rows_f: list[np.ndarray] = []
    rows_e: list[np.ndarray] = []
    rows_cf: list[np.ndarray] = []
    rows_ce: list[np.ndarray] = []
    rows_g: list[np.ndarray] = []
    group_len: list[float] = []  # sentence length (+1 for NULL) of each group, for the log-likelihood
    n_groups = 0
    for f, e in pairs:
        cf = Counter(s_id[w] for w in f)
        if null:
            cf[0] = 1
        ce = Counter(t_id[w] for w in e)
        fids = np.fromiter(sorted(cf), dtype=np.int64, count=len(cf))
        fcnt = np.array([cf[i] for i in fids], dtype=np.float64)
        eids = np.fromiter(sorted(ce), dtype=np.int64, count=len(ce))
        ecnt = np.array([ce[i] for i in eids], dtype=np.float64)
        nf, ne = len(fids), len(eids)
        rows_f.append(np.tile(fids, ne))
        rows_cf.append(np.tile(fcnt, ne))
        rows_e.append(np.repeat(eids, nf))
        rows_ce.append(np.repeat(ecnt, nf))
        rows_g.append(np.repeat(np.arange(n_groups, n_groups + ne), nf))
        group_len.extend([float(sum(cf.values()))] * ne)
        n_groups += ne
    f_arr = np.concatenate(rows_f)
    e_arr = np.concatenate(rows_e)
    cf_arr = np.concatenate(rows_cf)
    ce_arr = np.concatenate(rows_ce)
    g_arr = np.concatenate(rows_g)
    g_len = np.asarray(group_len)
    g_ce = np.zeros(n_groups)
    g_ce[g_arr] = ce_arr

    # distinct (f, e) parameters
    key = f_arr * len(tgt_vocab) + e_arr
    uniq, pid = np.unique(key, return_inverse=True)
    pair_src = (uniq // len(tgt_vocab)).astype(np.int32)
    pair_tgt = (uniq % len(tgt_vocab)).astype(np.int32)
    prob = np.full(len(uniq), 1.0 / len(tgt_vocab))
    log.info(
        "IBM1: %d sentence pairs, %d source x %d target terms, %d parameters",
        len(pairs),
        len(src_vocab) - 1,
        len(tgt_vocab),
        len(uniq),
    )

    lls: list[float] = []
    bar = tqdm(range(iterations), desc="IBM1 EM", unit="iter", disable=None if progress is None else not progress)
    for _ in bar:
        val = prob[pid] * cf_arr  # unnormalised alignment weight of f for one target occurrence
        z = np.bincount(g_arr, weights=val, minlength=n_groups)
        lls.append(float(np.sum(g_ce * np.log(z / g_len))))
        post = val / z[g_arr] * ce_arr  # expected count of (f aligned to e) in this sentence
        counts = np.bincount(pid, weights=post, minlength=len(uniq))
        totals = np.bincount(pair_src, weights=counts, minlength=len(src_vocab))
        prob = counts / totals[pair_src]
        bar.set_postfix(ll=f"{lls[-1]:.1f}")
    return IBM1Model(
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        pair_src=pair_src,
        pair_tgt=pair_tgt,
        prob=prob,
        src_counts=dict(src_counts),
        log_likelihood=lls,
        n_pairs=len(pairs),
    )


def trained_once(
    pairs: Sequence[SentencePair],
    *,
    iterations: int,
    progress: bool | None,
    models: dict[tuple[int, bytes], IBM1Model] | None,
) -> IBM1Model:
    """``train_ibm1`` on ``pairs``, or the model already trained on the same pairs (the same terms in the same
    order, found by a digest of them) with the same iterations in ``models``, which keeps what it trains."""
    if models is None:
        return train_ibm1(pairs, iterations=iterations, progress=progress)
    digest = hashlib.blake2b(repr(pairs).encode("utf-8"), digest_size=20).digest()
    key = (iterations, digest)
    if key not in models:
        models[key] = train_ibm1(pairs, iterations=iterations, progress=progress)
    else:
        log.info("IBM1: %d sentence pairs: the model trained for the other direction", len(pairs))
    return models[key]


def symmetrise(
    forward: dict[str, dict[str, float]],
    reverse: dict[str, dict[str, float]],
    *,
    weight: float = 0.5,
) -> dict[str, dict[str, float]]:
    """Combine t(e|f) with the reverse model t(f|e): p(e|f) ∝ t(e|f)^(1-w) * t(f|e)^w.

    ``forward`` maps source -> {target: p}, ``reverse`` maps target -> {source: p}. A pair the reverse
    model does not know gets probability 0 (rare target words aligned by chance drop out); a source term
    left without any pair keeps its forward distribution.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"symmetrisation weight must be in [0, 1], got {weight}")
    out: dict[str, dict[str, float]] = {}
    for f, row in forward.items():
        comb = {}
        for e, p in row.items():
            q = reverse.get(e, {}).get(f, 0.0)
            if q > 0.0:
                comb[e] = math.exp((1 - weight) * math.log(p) + weight * math.log(q))
        total = sum(comb.values())
        out[f] = {e: v / total for e, v in comb.items()} if total > 0 else dict(row)
    return out


def train_aligned_table(
    records: Iterable[PatentRecord],
    src: str,
    tgt: str = "en",
    *,
    exclude_ids: Collection[str] = (),
    iterations: int = 10,
    symmetric: bool = True,
    min_prob: float = 1e-3,
    titles: bool = True,
    function_words: bool = True,
    min_content: float = 0.5,
    progress: bool | None = None,
    splitters: Mapping[str, CompoundSplitter] | None = None,
    models: dict[tuple[int, bytes], IBM1Model] | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """p(tgt term | src term) from the aligned claims of ``records``; returns the table and a summary.

    With ``symmetric`` a reverse model t(src|tgt) is trained too and combined (``symmetrise``).
    ``models``: the models trained so far (``trained_once``), shared by a build's directions: the reverse model of
    de-en is the forward model of en-de, trained once for both.
    With ``function_words`` the model is trained with stop words kept; the table then drops the rows
    of source stop words (queries never contain them), removes stop-word translations from the other
    rows, and drops a row altogether when less than ``min_content`` of its mass is left: the model
    says that word mostly translates to a function word, so it is better left untranslated.
    """
    pairs, used = aligned_pairs(
        records, src, tgt, exclude_ids=exclude_ids, titles=titles, function_words=function_words, splitters=splitters
    )
    if not pairs:
        raise ValueError(
            f"no {src}-{tgt} aligned claims found (need records with claims in both languages"
            f"{', after excluding ' + str(len(exclude_ids)) + ' ids' if exclude_ids else ''})"
        )
    fwd_model = trained_once(pairs, iterations=iterations, progress=progress, models=models)
    floor = min(min_prob, 1e-4)  # pairs this improbable in one direction cannot survive the combination
    table = fwd_model.table(min_prob=floor)
    if symmetric:
        rev_model = trained_once([(e, f) for f, e in pairs], iterations=iterations, progress=progress, models=models)
        table = symmetrise(table, rev_model.table(min_prob=floor))
    n_function = 0
    if function_words:
        src_stop, tgt_stop = _stem_set(src), _stem_set(tgt)
        content: dict[str, dict[str, float]] = {}
        for f, row in table.items():
            if f in src_stop:
                continue
            kept_row = {e: p for e, p in row.items() if e not in tgt_stop}
            if sum(kept_row.values()) < min_content:
                n_function += 1
                continue
            content[f] = kept_row
        table = content
    table = {s: kept for s, row in table.items() if (kept := _prune_row(row, min_prob))}
    summary: dict[str, Any] = {
        "documents": len(used),
        "document_ids": used,
        "sentence_pairs": len(pairs),
        "source_terms": len(table),
        "iterations": iterations,
        "symmetric": symmetric,
        "titles": titles,
        "function_words": function_words,
        "dropped_as_function_words": n_function,
        "log_likelihood": fwd_model.log_likelihood,
        "source_counts": fwd_model.src_counts,  # occurrences of each source term in the pairs (for the merge)
    }
    return table, summary


def _stem_set(lang: str) -> frozenset[str]:
    """Stop words of ``lang`` as index terms (stemmed, accent-folded): how they appear in training pairs."""
    plain = Analyzer(lang, remove_stopwords=False)
    return frozenset(plain.term(w) for w in stopwords(lang))


def _prune_row(row: dict[str, float], min_prob: float) -> dict[str, float]:
    kept = {t: p for t, p in row.items() if p >= min_prob}
    total = sum(kept.values())
    return {t: p / total for t, p in kept.items()} if total > 0 else {}
