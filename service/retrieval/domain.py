"""Domain-knowledge features of (query, document) pairs and the dense linear model over them (numpy only).

After Guo and Gomes (2009) and Schamoni et al. (2014, "DK"): a feature fires when a query and a
document share an aspect. Features (:data:`FEATURES`, in this order):

==============================  ================================================================
``codes_<level>_shared``        number of distinct IPC/CPC codes shared after truncating both sides
                                to ``level`` (section, class, subclass, main_group, subgroup;
                                :func:`service.codes.codes_at`)
``codes_<level>_any``           1 when that number is > 0
``doc_no_codes``                1 when the document has no code (a design patent): no match is no
                                evidence there
``applicants_shared``           applicants/assignees in common (:func:`normalise_name`)
``inventors_shared``            inventors in common
``citations_shared``            cited publications in common (:func:`normalise_ref`)
``query_cites_doc``             the query cites the document
``doc_cites_query``             the document cites the query's publication (number queries)
``doc_earlier``                 the document was published before the query's date
``years_apart``                 ``|date difference|`` in years (0 when a date is unknown)
``date_unknown``                1 when the query's or the document's date is unknown
``log_len_ratio``               ``ln((query terms + 1) / (document terms + 1))`` (document side of
                                :mod:`service.retrieval.wordpair`, whole text before the cap)
``abs_log_len_ratio``           its absolute value
``identical_terms``             distinct query terms that are also document terms (same string:
                                numbers, formulas, codes, names, cognates; the paper's "term identity")
``identical_terms_frac``        the same divided by the number of distinct query terms
==============================  ================================================================

What the query side knows: text always; codes when given (or, for a publication-number query, the
record's); applicants, inventors, citations, date and its own number when the query is a publication of
the index (then they are taken from the store's row). Features of a field the query lacks are 0.

Fast path. :class:`DomainStore` keeps, per index row, the document side of every feature as CSR arrays
of ids into sorted vocabularies (codes per level, applicants, inventors, cited publications), the
publication's own reference, its date, and it uses a :class:`~service.retrieval.wordpair.DocTermStore`
for the length and term-identity features. :meth:`DomainStore.features` is vectorised over candidate
rows (``np.isin`` + ``np.bincount`` over the gathered entries). A store built from a list of records
(:meth:`DomainStore.from_records`) runs exactly the same code, which training uses.

Model (:class:`DomainModel`, one JSON file): ``score = ((x - mean) / std) . w``, trained pairwise
(``training.ltr.domain``).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import CODE_LEVELS, codes_at, record_codes
from service.corpus.ids import normalise_pub_id
from service.corpus.record import PatentRecord
from service.index.store import EPOCH, MISSING_DATE
from service.retrieval.wordpair import DocTermStore, _bisect, gather_csr
from service.versioned import read_versioned

DOMAIN_FORMAT = "priorart-domain-model"
DOMAIN_VERSION = 1
DOMSTORE_FORMAT = "priorart-domain-store"
DOMSTORE_VERSION = 1

FEATURES: tuple[str, ...] = (
    *(f"codes_{lvl}_shared" for lvl in CODE_LEVELS),
    *(f"codes_{lvl}_any" for lvl in CODE_LEVELS),
    "doc_no_codes",
    "applicants_shared",
    "inventors_shared",
    "citations_shared",
    "query_cites_doc",
    "doc_cites_query",
    "doc_earlier",
    "years_apart",
    "date_unknown",
    "log_len_ratio",
    "abs_log_len_ratio",
    "identical_terms",
    "identical_terms_frac",
)
FIELDS: tuple[str, ...] = (*(f"codes.{lvl}" for lvl in CODE_LEVELS), "applicants", "inventors", "refs")
QUERY_META = ("codes", "applicants", "inventors", "citations", "date", "own_id")
"""Query-side metadata a query may carry (besides its text)."""

_LEGAL_FORMS = frozenset({
    "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "limited", "llc", "lp", "llp", "plc",
    "gmbh", "ag", "kg", "kgaa", "se", "sa", "sas", "sarl", "spa", "srl", "bv", "nv", "ab", "as", "oy", "oyj",
    "kk", "pty", "pte", "ug", "mbh", "eg", "ev", "the", "und", "and", "et", "cie",
})
_NAME_TOKEN = re.compile(r"[^\W_]+")
_REF_RE = re.compile(r"^([A-Z]{2})([A-Z]{0,2})(\d+)")


class DomainFormatError(ValueError):
    """A domain model or store that cannot be used (the message names the file)."""


def normalise_name(name: str) -> str:
    """A person's or organisation's name as a comparable key.

    Accents folded, case-folded, punctuation dropped, legal forms (Inc, GmbH, Co, Ltd, ...) and
    one-letter tokens (initials) dropped, the remaining tokens sorted, so ``'Landes, Greg M.'`` and
    ``'Greg Landes'`` meet, and so do ``'Samsung Electronics Co., Ltd.'`` and ``'SAMSUNG ELECTRONICS'``.
    Returns ``''`` when nothing is left.
    """
    text = unicodedata.normalize("NFKD", name.replace("ß", "ss")).casefold()
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    tokens = {t for t in _NAME_TOKEN.findall(text) if len(t) > 1 and t not in _LEGAL_FORMS}
    return " ".join(sorted(tokens))


def normalise_ref(pub_id: str) -> str | None:
    """Country + number without kind and leading zeros: ``'US 06,837,151 B2'`` -> ``'US6837151'``."""
    m = _REF_RE.match(normalise_pub_id(pub_id))
    if not m:
        return None
    country, prefix, digits = m.groups()
    return f"{country}{prefix}{digits.lstrip('0') or '0'}"


def _days(d: date | None) -> int:
    return (d - EPOCH).days if d is not None else MISSING_DATE


@dataclass
class QueryMeta:
    """What a query knows besides its text (see the module docstring)."""

    terms: list[str] = field(default_factory=list)  # distinct analysed terms (wordpair.query_terms)
    n_terms: int = 0  # analysed terms, with repetition
    codes: list[str] = field(default_factory=list)
    applicants: list[str] = field(default_factory=list)
    inventors: list[str] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)  # publication ids (any form)
    date: date | None = None
    own_id: str | None = None

    def restricted(self, fields: Iterable[str]) -> QueryMeta:
        """A copy that keeps only the metadata in ``fields`` (a subset of :data:`QUERY_META`)."""
        keep = set(fields)
        bad = keep - set(QUERY_META)
        if bad:
            raise ValueError(f"unknown query metadata {sorted(bad)}; valid: {', '.join(QUERY_META)}")
        return QueryMeta(
            terms=self.terms,
            n_terms=self.n_terms,
            codes=self.codes if "codes" in keep else [],
            applicants=self.applicants if "applicants" in keep else [],
            inventors=self.inventors if "inventors" in keep else [],
            citations=self.citations if "citations" in keep else [],
            date=self.date if "date" in keep else None,
            own_id=self.own_id if "own_id" in keep else None,
        )


def query_meta(
    text: str,
    lang: str,
    *,
    record: PatentRecord | None = None,
    codes: Sequence[str] = (),
    date_: date | None = None,
    max_terms: int | None = None,
) -> QueryMeta:
    """The query side from its text (and the record of a publication-number query, when there is one)."""
    from service.retrieval.encoders import QUERY_MAX_TERMS
    from service.text.analysis import get_analyzer

    all_terms = get_analyzer(lang)(text)
    cap = QUERY_MAX_TERMS if max_terms is None else max_terms
    meta = QueryMeta(terms=list(dict.fromkeys(all_terms[:cap])), n_terms=len(all_terms), codes=list(codes), date=date_)
    if record is not None:
        if not meta.codes:
            meta.codes = record_codes(record)
        meta.applicants = list(record.applicants)
        meta.inventors = list(record.inventors)
        meta.citations = [c.id for c in record.citations if c.id]
        meta.date = meta.date or record.publication_date
        meta.own_id = record.id
    return meta


# --------------------------------------------------------------------------------------------------
# the store
# --------------------------------------------------------------------------------------------------


def _csr(lists: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    vocab = sorted({x for xs in lists for x in xs})
    index = {x: i for i, x in enumerate(vocab)}
    indptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(xs) for xs in lists], out=indptr[1:])
    ids = np.fromiter((index[x] for xs in lists for x in xs), dtype=np.int32, count=int(indptr[-1]))
    return vocab, indptr, ids


@dataclass
class _Field:
    vocab: list[str]
    indptr: np.ndarray
    ids: np.ndarray

    def lookup(self, items: Iterable[str]) -> np.ndarray:
        out = {i for x in items if (i := _bisect(self.vocab, x)) is not None}
        return np.asarray(sorted(out), dtype=np.int32)


class DomainStore:
    """Per-row document side of the domain features (see the module docstring)."""

    def __init__(self, fields: dict[str, _Field], own_ref: np.ndarray, dates: np.ndarray, terms: DocTermStore) -> None:
        missing = [f for f in FIELDS if f not in fields]
        if missing:
            raise DomainFormatError(f"domain store lacks field(s) {missing}")
        n = len(terms)
        for name, f in fields.items():
            if len(f.indptr) != n + 1:
                raise DomainFormatError(f"domain store field {name!r} has {len(f.indptr) - 1} rows, terms have {n}")
        if len(own_ref) != n or len(dates) != n:
            raise DomainFormatError(f"domain store: {len(own_ref)} refs / {len(dates)} dates for {n} rows")
        self.fields = fields
        self.own_ref = own_ref
        self.dates = dates
        self.terms = terms

    def __len__(self) -> int:
        return len(self.dates)

    @classmethod
    def from_records(cls, records: Sequence[PatentRecord], terms: DocTermStore | None = None) -> DomainStore:
        """Build from records (row ``i`` = ``records[i]``); ``terms`` defaults to their term store."""
        if terms is None:
            terms = DocTermStore.from_records(records)
        if len(terms) != len(records):
            raise ValueError(f"term store has {len(terms)} rows for {len(records)} records")
        lists: dict[str, list[list[str]]] = {f: [] for f in FIELDS}
        own: list[str | None] = []
        for rec in records:
            codes = record_codes(rec)
            for lvl in CODE_LEVELS:
                lists[f"codes.{lvl}"].append(codes_at(codes, lvl))
            lists["applicants"].append(_names(rec.applicants))
            lists["inventors"].append(_names(rec.inventors))
            lists["refs"].append(_refs(c.id for c in rec.citations if c.id))
            own.append(normalise_ref(rec.id))
        # own references share the citation vocabulary so that "query cites doc" is one lookup
        ref_lists = lists["refs"]
        vocab = sorted({x for xs in ref_lists for x in xs} | {r for r in own if r})
        index = {x: i for i, x in enumerate(vocab)}
        fields: dict[str, _Field] = {}
        for name, ls in lists.items():
            if name == "refs":
                indptr = np.zeros(len(ls) + 1, dtype=np.int64)
                np.cumsum([len(xs) for xs in ls], out=indptr[1:])
                ids = np.fromiter((index[x] for xs in ls for x in xs), dtype=np.int32, count=int(indptr[-1]))
                fields[name] = _Field(vocab, indptr, ids)
            else:
                fields[name] = _Field(*_csr(ls))
        own_ref = np.asarray([index[r] if r else -1 for r in own], dtype=np.int32)
        dates = np.asarray([_days(r.publication_date) for r in records], dtype=np.int32)
        return cls(fields, own_ref, dates, terms)

    # ---- files ------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> dict[str, Any]:
        """Write the domain arrays (the term store is saved separately, :meth:`DocTermStore.save`)."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        for name, f in self.fields.items():
            np.save(d / f"domain.{name}.indptr.npy", f.indptr)
            np.save(d / f"domain.{name}.ids.npy", f.ids)
            (d / f"domain.{name}.vocab.json").write_text(json.dumps(f.vocab, ensure_ascii=False), encoding="utf-8")
        np.save(d / "domain.own_ref.npy", self.own_ref)
        np.save(d / "domain.dates.npy", self.dates)
        info = {"format": DOMSTORE_FORMAT, "version": DOMSTORE_VERSION, "rows": len(self),
                "fields": {n: {"vocab": len(f.vocab), "entries": int(len(f.ids))} for n, f in self.fields.items()}}
        (d / "domain.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        return info

    @classmethod
    def load(cls, folder: str | Path, terms: DocTermStore) -> DomainStore:
        d = Path(folder)
        read_versioned(d / "domain.json", DOMSTORE_FORMAT, DOMSTORE_VERSION, error=DomainFormatError,
                       fix="rerun `priorart train-ltr`")
        try:
            fields = {
                name: _Field(
                    json.loads((d / f"domain.{name}.vocab.json").read_text(encoding="utf-8")),
                    np.load(d / f"domain.{name}.indptr.npy"),
                    np.load(d / f"domain.{name}.ids.npy"),
                )
                for name in FIELDS
            }
            own_ref = np.load(d / "domain.own_ref.npy")
            dates = np.load(d / "domain.dates.npy")
        except (OSError, ValueError, KeyError) as exc:
            if isinstance(exc, DomainFormatError):
                raise
            raise DomainFormatError(f"domain store in {d} is unreadable: {exc}") from exc
        return cls(fields, own_ref, dates, terms)

    # ---- query side from a row --------------------------------------------------------------------

    def row_meta(self, row: int) -> dict[str, Any]:
        """Applicants, inventors, citations (normalised keys), date and own reference of a row."""

        def items(name: str) -> list[str]:
            f = self.fields[name]
            return [f.vocab[int(i)] for i in f.ids[int(f.indptr[row]) : int(f.indptr[row + 1])]]

        days = int(self.dates[row])
        ref = int(self.own_ref[row])
        return {
            "applicants": items("applicants"),
            "inventors": items("inventors"),
            "citations": items("refs"),
            "date": None if days == MISSING_DATE else date.fromordinal(EPOCH.toordinal() + days),
            "own_ref": self.fields["refs"].vocab[ref] if ref >= 0 else None,
        }

    # ---- features ---------------------------------------------------------------------------------

    def _shared(self, name: str, rows: np.ndarray, qids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = self.fields[name]
        n = len(rows)
        has = (f.indptr[rows + 1] - f.indptr[rows]) > 0
        if len(qids) == 0:
            return np.zeros(n), has
        pos, ids = gather_csr(f.indptr, f.ids, rows)
        hit = np.isin(ids, qids)
        return np.bincount(pos, weights=hit.astype(np.float64), minlength=n), has

    def features(self, query: QueryMeta, rows: np.ndarray) -> np.ndarray:
        """Feature matrix float64 ``[len(rows), len(FEATURES)]`` (columns in :data:`FEATURES` order)."""
        rows = np.asarray(rows, dtype=np.int64)
        n = len(rows)
        cols: dict[str, np.ndarray] = {}
        any_codes = np.zeros(n, dtype=bool)
        for lvl in CODE_LEVELS:
            name = f"codes.{lvl}"
            qids = self.fields[name].lookup(codes_at(query.codes, lvl))
            cnt, has = self._shared(name, rows, qids)
            any_codes |= has
            cols[f"codes_{lvl}_shared"] = cnt
            cols[f"codes_{lvl}_any"] = (cnt > 0).astype(np.float64)
        cols["doc_no_codes"] = (~any_codes).astype(np.float64)
        cols["applicants_shared"] = self._shared("applicants", rows, self.fields["applicants"].lookup(
            _names(query.applicants)))[0]
        cols["inventors_shared"] = self._shared("inventors", rows, self.fields["inventors"].lookup(
            _names(query.inventors)))[0]
        refs = self.fields["refs"]
        q_refs = refs.lookup(_refs(query.citations))
        cols["citations_shared"] = self._shared("refs", rows, q_refs)[0]
        cols["query_cites_doc"] = np.isin(self.own_ref[rows], q_refs).astype(np.float64) if len(q_refs) else np.zeros(n)
        own = normalise_ref(query.own_id) if query.own_id else None
        own_id = refs.lookup([own]) if own else np.zeros(0, dtype=np.int32)
        cols["doc_cites_query"] = (self._shared("refs", rows, own_id)[0] > 0).astype(np.float64)
        dd = self.dates[rows].astype(np.int64)
        if query.date is not None:
            qd = _days(query.date)
            known = dd != MISSING_DATE
            cols["doc_earlier"] = (known & (dd < qd)).astype(np.float64)
            cols["years_apart"] = np.where(known, np.abs(dd - qd) / 365.25, 0.0)
            cols["date_unknown"] = (~known).astype(np.float64)
        else:
            cols["doc_earlier"] = np.zeros(n)
            cols["years_apart"] = np.zeros(n)
            cols["date_unknown"] = np.ones(n)
        lr: np.ndarray = math.log(query.n_terms + 1) - np.log(self.terms.lengths[rows].astype(np.float64) + 1)
        cols["log_len_ratio"] = lr
        cols["abs_log_len_ratio"] = np.abs(lr)
        q_terms = self.terms.term_ids(query.terms)
        ident: np.ndarray
        if len(q_terms):
            pos, ids = self.terms.gather(rows)
            ident = np.bincount(pos, weights=np.isin(ids, q_terms).astype(np.float64), minlength=n)
        else:
            ident = np.zeros(n)
        cols["identical_terms"] = ident
        cols["identical_terms_frac"] = ident / max(1, len(set(query.terms)))
        return np.column_stack([cols[f] for f in FEATURES]) if n else np.zeros((0, len(FEATURES)))


def _names(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(k for n in names if (k := normalise_name(n))))


def _refs(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(r for i in ids if (r := normalise_ref(i))))


# --------------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------------


@dataclass
class DomainModel:
    """``score = ((x - mean) / std) . weights`` over :data:`FEATURES` (one JSON file)."""

    features: list[str]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, dtype=np.float64)
        self.std = np.asarray(self.std, dtype=np.float64)
        self.weights = np.asarray(self.weights, dtype=np.float64)
        k = len(self.features)
        if not (len(self.mean) == len(self.std) == len(self.weights) == k):
            raise DomainFormatError(f"domain model: {k} features but mean/std/weights of other lengths")
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise DomainFormatError(f"domain model names unknown features {unknown}; known: {', '.join(FEATURES)}")
        self._cols = [FEATURES.index(f) for f in self.features]
        self.std = np.where(self.std > 0, self.std, 1.0)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Scores of feature rows (``[n, len(FEATURES)]``, the store's column order)."""
        x = np.asarray(x, dtype=np.float64)[:, self._cols]
        return ((x - self.mean) / self.std) @ self.weights

    def to_json(self) -> dict[str, Any]:
        return {"format": DOMAIN_FORMAT, "version": DOMAIN_VERSION, "features": list(self.features),
                "mean": self.mean.tolist(), "std": self.std.tolist(), "weights": self.weights.tolist(),
                **self.info}

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> DomainModel:
        p = Path(path)
        data = read_versioned(p, DOMAIN_FORMAT, DOMAIN_VERSION, error=DomainFormatError,
                              fix="rerun `priorart train-ltr`")
        info = {k: v for k, v in data.items() if k not in ("format", "version", "features", "mean", "std", "weights")}
        return cls(list(data["features"]), data["mean"], data["std"], data["weights"], info)
