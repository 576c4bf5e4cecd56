"""``priorart build``: corpus JSONL -> index folder (doc store, one sparse index per language, tables).

One streaming pass over the corpus writes the doc store and accumulates the postings of every indexed
language; the sparse indexes are then finished one language at a time and ``meta.json`` is written
last. The folder is built beside the target under a temporary name and renamed when complete, so a
crashed build never leaves a folder that looks finished.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from service.corpus.jsonl import read_corpus
from service.corpus.record import LANGS, PatentRecord
from service.index.store import FIELDS, META_FILE, SCORINGS, DocStoreWriter, validate_settings, write_meta
from service.retrieval.sparse import SparseIndexBuilder
from service.retrieval.translate import TranslationTable
from service.text.analysis import TOKEN_RE, Analyzer, get_analyzer, normalise

log = logging.getLogger(__name__)

DEFAULT_INDEX_LANGS = ("en", "de", "fr")


class BuildError(ValueError):
    """Bad build input or options (the message says what to change)."""


@dataclass
class BuildReport:
    """What a build did and what it cost."""

    index_dir: str
    n_docs: int
    seconds: float
    docs_per_s: float
    cpu_s: float  # user + system CPU time of the build (wall time suffers on a shared machine)
    peak_rss_mb: float
    index_bytes: int
    langs: dict[str, dict[str, Any]] = field(default_factory=dict)
    translation: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux ``ru_maxrss`` is KiB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _parse_list(value: str | Sequence[str], allowed: Sequence[str], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else [v.strip() for v in value]
    items = [v for v in items if v]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise BuildError(f"invalid {what} {bad or value!r}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def _copy_tables(translation_dir: Path, dest: Path) -> list[dict[str, Any]]:
    if not translation_dir.is_dir():
        raise BuildError(f"translation folder {translation_dir} does not exist")
    found = sorted(translation_dir.glob("*-en.json"))
    if not found:
        raise BuildError(f"no <src>-en.json translation tables in {translation_dir}")
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for path in found:
        try:
            table = TranslationTable.load(path)
        except ValueError as exc:
            raise BuildError(str(exc)) from exc
        if table.src not in LANGS or table.src == "en" or table.tgt != "en" or path.name != f"{table.src}-en.json":
            raise BuildError(
                f"{path}: table translates {table.src}->{table.tgt}; expected <de|fr>-en named <src>-en.json"
            )
        shutil.copyfile(path, dest / path.name)
        out.append(
            {
                "src": table.src,
                "tgt": table.tgt,
                "file": f"translation/{path.name}",
                "entries": len(table),
                "sources": table.sources,
            }
        )
    return out


class CachedAnalyzer:
    """``Analyzer`` output with one dict lookup per token: each distinct surface token is analysed once.

    Tokens are split exactly as ``service.text.analysis.tokenize`` does before it removes the spaces
    inside classification codes; each distinct token is then passed through the analyzer itself, so
    the terms are the analyzer's (a test compares both on real patents). ``max_memo`` bounds memory.
    """

    def __init__(self, analyzer: Analyzer, max_memo: int = 2_000_000) -> None:
        self.analyzer = analyzer
        self.max_memo = max_memo
        self._memo: dict[str, str] = {}  # token -> term, "" when the analyzer drops the token

    def __call__(self, text: str) -> list[str]:
        memo = self._memo
        tokens = TOKEN_RE.findall(normalise(text))
        try:
            terms = [memo[t] for t in tokens]
        except KeyError:
            overflow: dict[str, str] = {}
            for t in set(tokens).difference(memo):
                alone = self.analyzer(t)
                if len(alone) > 1:  # never seen; keep exactness by analysing the whole text
                    return self.analyzer(text)
                if len(memo) < self.max_memo:
                    memo[t] = alone[0] if alone else ""
                else:
                    overflow[t] = alone[0] if alone else ""
            if overflow:
                terms = [overflow[t] if t in overflow else memo[t] for t in tokens]
            else:
                terms = [memo[t] for t in tokens]
        return [t for t in terms if t]


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_index(
    corpus: str | Path | Iterable[PatentRecord],
    out_dir: str | Path,
    *,
    index_langs: str | Sequence[str] = DEFAULT_INDEX_LANGS,
    fields: str | Sequence[str] = FIELDS,
    scoring: str = "bm25",
    k1: float = 1.2,
    b: float = 0.75,
    epsilon: float = 0.25,
    translation_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
) -> BuildReport:
    """Build an index folder from a corpus JSONL path (or an iterable of records).

    ``overwrite`` replaces an existing index folder (only one with a ``meta.json`` or an empty one).
    ``progress``: tqdm bar on stderr (default: when stderr is a terminal).
    """
    langs = _parse_list(index_langs, LANGS, "index language(s)")
    field_list = _parse_list(fields, FIELDS, "field(s)")
    if scoring not in SCORINGS:
        raise BuildError(f"unknown scoring {scoring!r}; choose from {', '.join(SCORINGS)}")
    settings = {
        "fields": field_list,
        "index_langs": langs,
        "scoring": scoring,
        "k1": float(k1),
        "b": float(b),
        "epsilon": float(epsilon),
    }
    try:
        validate_settings(settings)
    except ValueError as exc:
        raise BuildError(str(exc)) from exc
    out = Path(out_dir)
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"{out} exists and is not a folder")
        if any(out.iterdir()):
            if not overwrite:
                raise BuildError(f"{out} exists and is not empty; pass --force to replace it")
            if not (out / META_FILE).is_file():
                raise BuildError(f"{out} is not empty and holds no {META_FILE}: refusing to replace a non-index folder")
    records: Iterable[PatentRecord]
    if isinstance(corpus, str | Path):
        if not Path(corpus).is_file():
            raise BuildError(f"corpus file {corpus} does not exist")
        records = read_corpus(corpus)
    else:
        records = corpus

    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t0, c0 = time.perf_counter(), _cpu_s()
    try:
        analyzers = {lang: CachedAnalyzer(get_analyzer(lang)) for lang in langs}
        builders = {lang: SparseIndexBuilder(scoring=scoring, k1=k1, b=b, epsilon=epsilon) for lang in langs}
        fields_t = tuple(field_list)
        show = sys.stderr.isatty() if progress is None else progress
        with DocStoreWriter(tmp) as store:
            for rec in tqdm(records, desc="indexing", unit="doc", disable=not show, file=sys.stderr, mininterval=1):
                store.add(rec)
                have = rec.languages
                for lang in langs:
                    builders[lang].add(analyzers[lang](rec.text(lang, fields_t)) if lang in have else [])
            docstore = store.close()
        n_docs = docstore["n_docs"]
        if n_docs == 0:
            raise BuildError("the corpus holds no records")
        bm25: dict[str, Any] = {}
        for lang in langs:
            index = builders.pop(lang).finish()
            index.save(tmp / "bm25" / lang)
            bm25[lang] = {
                "dir": f"bm25/{lang}",
                "n_docs": index.n_docs,
                "n_terms": len(index.vocab),
                "nnz": int(index.params["nnz"]),
                "avgdl": index.avgdl,
            }
            log.info(
                "bm25/%s: %d documents with text, %d terms, %d postings",
                lang,
                index.n_docs,
                len(index.vocab),
                index.params["nnz"],
            )
            del index
        components: dict[str, Any] = {"docstore": docstore, "bm25": bm25}
        tables: list[dict[str, Any]] = []
        if translation_dir is not None:
            tables = _copy_tables(Path(translation_dir), tmp / "translation")
        components["translation"] = tables
        components["build"] = {"n_docs": n_docs, "corpus": str(corpus) if isinstance(corpus, str | Path) else None}
        write_meta(tmp, settings, components)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        seconds, cpu_s = time.perf_counter() - t0, _cpu_s() - c0
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuildReport(
        index_dir=str(out),
        n_docs=n_docs,
        seconds=seconds,
        docs_per_s=n_docs / seconds if seconds > 0 else float("inf"),
        cpu_s=cpu_s,
        peak_rss_mb=peak_rss_mb(),
        index_bytes=_dir_bytes(out),
        langs=bm25,
        translation=[t["file"] for t in tables],
    )
