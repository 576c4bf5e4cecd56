"""The search engine behind the API: loads one index folder and composes the pipeline from it.

Stages present depend on the folder: BM25 (+ translation tables) always; dense, rerank and learned
fusion weights when the index was built with ``--models``. Anything missing degrades visibly: the
response's ``notices`` say e.g. "no models in this index: BM25 only".
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from service import __version__
from service.api.schemas import PassageRequest, SearchRequest
from service.api.settings import Settings
from service.classification import ClassificationScheme
from service.corpus.record import PatentRecord
from service.index.store import UnknownDocumentError
from service.pipeline import COMPONENTS, FirstStageStep, FusionStep, Pipeline, Query, Stage
from service.retrieval import first_stage as fs_mod
from service.retrieval.first_stage import FirstStage

log = logging.getLogger(__name__)

DEFAULT_PASSAGE_PARAMS = {"alpha": 0.5, "beta": 0.5, "sigma": 1.0}
PASSAGE_DOCS = 1000
PASSAGE_K = 1500


class QueryError(ValueError):
    """A request the engine cannot answer as asked (unknown publication number, bad option)."""


class Engine:
    """One loaded index: the pipeline, the doc store, the classification scheme, passage ranking."""

    def __init__(self, index_dir: Path, settings: Settings, first_stage: FirstStage, pipeline: Pipeline,
                 notices: list[str], scheme: ClassificationScheme, device: str, extra: dict[str, Any]) -> None:
        self.index_dir = index_dir
        self.settings = settings
        self.first_stage = first_stage
        self.pipeline = pipeline
        self.notices = notices
        self.scheme = scheme
        self.device = device
        self.extra = extra
        self.loaded_at = time.time()
        from service.retrieval.passages import PassageRanker

        # PSQ tables let a de/fr query score English passages; the ranker caches parsed documents
        self._passages = PassageRanker(translations=first_stage.tables)
        self._warm_stop = threading.Event()
        self._warm_thread: threading.Thread | None = None
        self.warmup: dict[str, Any] = {"state": "off", "documents": 0}

    def warm_passages(self, limit: int | None = None, lang: str = "en", chunk: int = 16) -> int:
        """Parse documents into the passage cache (in small chunks, so queries are not held up)."""
        n = min(self.num_docs, limit if limit is not None else self._passages.cache_size)
        done = 0
        for start in range(0, n, chunk):
            if self._warm_stop.is_set():
                break
            recs = [self.first_stage.docs.get_row(r) for r in range(start, min(n, start + chunk))]
            done += self._passages.prepare(recs, lang)
        return done

    def start_warming(self) -> None:
        """Warm the passage cache in a background thread (cold documents cost ~10 ms each to parse)."""
        limit = min(self.settings.passage_warmup_docs, self._passages.cache_size)
        if limit <= 0:
            return

        self.warmup = {"state": "running", "documents": 0}  # before the thread starts: no window shows "off"

        def _run() -> None:
            started = time.perf_counter()
            n = self.warm_passages(limit)
            self.warmup = {"state": "done", "documents": n, "seconds": round(time.perf_counter() - started, 1)}
            log.info("passage cache warmed: %d documents in %.1f s", n, time.perf_counter() - started)

        self._warm_thread = threading.Thread(target=_run, name="passage-warmup", daemon=True)
        self._warm_thread.start()

    def close(self) -> None:
        self._warm_stop.set()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, index_dir: str | Path, *, settings: Settings | None = None) -> Engine:
        """Load and verify an index folder; raises ``IndexFormatError`` with a clear message if unusable."""
        settings = settings or Settings(index_dir=Path(index_dir))
        index_dir = Path(index_dir)
        first = FirstStage.load(index_dir)
        notices: list[str] = []
        stages: list[Stage] = [FirstStageStep(first)]
        weights: dict[str, float] = {"bm25": 1.0}
        weight_source = "default (BM25 only)"
        device = "cpu"
        extra: dict[str, Any] = {}
        models = _load_model_stages(index_dir, settings)
        if models is None:
            notices.append("no models in this index: BM25 only (build with --models for dense + rerank)")
        else:
            stages.extend(models["stages"])
            weights = models["weights"]
            weight_source = models["weight_source"]
            device = models["device"]
            extra = models.get("extra", {})
            notices.extend(models.get("notices", []))
        from service.retrieval.ltr_stages import load_ltr_stages

        ltr = load_ltr_stages(index_dir, linear_weights=weights, linear_source=weight_source)
        if ltr is None:
            stages.append(FusionStep(weights, weight_source))
            notices.append("no ltr models in this index: fusion 'linear' only (priorart train-ltr ... --install)")
        else:
            stages.extend(ltr)  # ends with the CombineStep, named "fusion"
        scheme = _load_scheme(settings, first)
        return cls(index_dir, settings, first, Pipeline(stages), notices, scheme, device, extra)

    @property
    def num_docs(self) -> int:
        return len(self.first_stage.docs)

    def describe(self) -> str:
        return f"{self.num_docs} documents, stages {' -> '.join(self.pipeline.names)}, device {self.device}"

    # ------------------------------------------------------------------ queries
    def _query(self, req: SearchRequest, depth: int) -> Query:
        return Query(
            text=req.query.strip(),
            lang=None if req.lang == "auto" else req.lang,
            codes=list(req.codes),
            code_level=None if req.code_filter == "none" else req.code_filter,
            before=req.before,
            k=req.k,
            depth=max(depth, req.k),
            translate=req.translate,
            weights=req.weights,
            fusion=req.fusion,
        )

    def _run(self, query: Query) -> tuple[Any, list[dict[str, Any]]]:
        if query.fusion not in (None, "linear") and self.pipeline.stages[-1].name == "fusion" and \
                isinstance(self.pipeline.stages[-1], FusionStep):
            raise QueryError(f"fusion {query.fusion!r} needs ltr models in the index; this one has 'linear' only")
        try:
            return self.pipeline.run(query)
        except UnknownDocumentError as exc:
            raise QueryError(str(exc)) from exc
        except fs_mod.QueryError as exc:
            raise QueryError(str(exc)) from exc

    def search(self, req: SearchRequest) -> dict[str, Any]:
        """Run the pipeline; the result is the JSON body of ``POST /search``."""
        started = time.perf_counter()
        depth = min(req.depth or self.settings.default_depth, self.settings.max_depth)
        query = self._query(req, depth)
        cands, trace = self._run(query)
        results = []
        for i, row in enumerate(cands.rows):
            rec = self.first_stage.docs.get_row(int(row))
            comps: dict[str, float | None] = {
                name: (float(cands.normalised[name][i]) if name in cands.normalised else None) for name in COMPONENTS
            }
            comps["fused"] = float(cands.fused[i]) if cands.fused is not None else None
            results.append({
                "id": rec.id,
                "title": _title(rec, query.resolved_lang),
                "score": float(cands.fused[i]) if cands.fused is not None else 0.0,
                "components": comps,
                "matched_terms": cands.matched_terms.get(int(row), []) if req.explain else [],
                "route": cands.routes.get(int(row)),
                "codes": [*rec.ipc, *rec.cpc][:12],
                "publication_date": rec.publication_date,
            })
        if req.explain:
            for t in trace:
                if t["name"] == "bm25":
                    t["detail"] = query.info
                elif t["name"] == "fusion":
                    t["detail"] = {"weights": cands.weights}
        return {
            "results": results,
            "stages": trace,
            "took_ms": (time.perf_counter() - started) * 1000.0,
            "query": query.info,
            "notices": self.notices + list(query.info.get("notes", [])),
        }

    def passages(self, req: PassageRequest) -> dict[str, Any]:
        """Rank passages of the top documents in context (QSF variants)."""
        started = time.perf_counter()
        depth = min(req.depth or PASSAGE_DOCS, self.settings.max_depth)
        query = self._query(req, depth)
        query.k = depth  # passages need the whole candidate list, not the top k documents
        cands, trace = self._run(query)
        params = {
            "alpha": req.alpha if req.alpha is not None else DEFAULT_PASSAGE_PARAMS["alpha"],
            "beta": req.beta if req.beta is not None else DEFAULT_PASSAGE_PARAMS["beta"],
            "sigma": req.sigma if req.sigma is not None else DEFAULT_PASSAGE_PARAMS["sigma"],
        }
        t0 = time.perf_counter()
        lang = query.resolved_lang or "en"
        readable = {lang} | ({"en"} if lang in self.first_stage.tables else set())
        docs: list[tuple[PatentRecord, float]] = []
        skipped = 0
        for r, s in zip(cands.rows, cands.fused if cands.fused is not None else [], strict=True):
            rec = self.first_stage.docs.get_row(int(r))
            if readable & set(rec.languages):
                docs.append((rec, float(s)))
            else:
                skipped += 1
        notes = list(query.info.get("notes", []))
        if skipped:
            notes.append(f"{skipped} candidate documents have no text in {', '.join(sorted(readable))}: "
                         "their passages are not ranked")
        text = query.resolved_text or query.text
        if not docs:
            hits = []
        else:
            try:
                hits = self._passages.rank(text, lang, docs, variant=req.variant, k=req.k, langs=readable,
                                           alpha=params["alpha"], beta=params["beta"], sigma=params["sigma"])
            except ValueError as exc:
                raise QueryError(str(exc)) from exc
        titles = {rec.id: _title(rec, query.resolved_lang) for rec, _ in docs}
        trace.append({"name": "passages", "ms": (time.perf_counter() - t0) * 1000.0, "candidates": len(hits),
                      "detail": {"variant": req.variant, **params, "documents": len(docs)}})
        results = [{
            "doc_id": h.doc_id,
            "passage_id": h.passage_id,
            "section_path": list(h.section_path),
            "text": h.text,
            "score": float(h.score),
            "components": {k: float(v) for k, v in h.components.items()},
            "highlights": [tuple(s) for s in h.highlights],
            "title": titles.get(h.doc_id),
            "lang": h.lang,
        } for h in hits]
        return {
            "results": results,
            "stages": trace,
            "took_ms": (time.perf_counter() - started) * 1000.0,
            "query": query.info,
            "notices": self.notices + notes,
        }

    # ------------------------------------------------------------------ lookups
    def document(self, doc_id: str) -> PatentRecord | None:
        try:
            row = self.first_stage.docs.find(doc_id)
        except UnknownDocumentError:
            return None
        return None if row is None else self.first_stage.docs.get_row(row)

    def suggest_codes(self, q: str, limit: int) -> list[dict[str, Any]]:
        return [{"code": m.code, "title": m.title, "level": m.level} for m in self.scheme.search(q, limit)]

    def health(self) -> dict[str, Any]:
        meta = self.first_stage.meta
        return {
            "version": __version__,
            "index": {
                "path": str(self.index_dir),
                "format_version": meta.version,
                "created": meta.created,
                "settings": meta.settings,
                "components": sorted(meta.components),
            },
            "documents": self.num_docs,
            "stages": self.pipeline.names,
            "stage_details": {s.name: s.describe() for s in self.pipeline.stages},
            "device": self.device,
            "models": self.extra.get("models"),
            "notices": self.notices,
            "passage_warmup": self.warmup,
            "loaded_at": self.loaded_at,
        }


def _title(rec: PatentRecord, lang: str | None) -> str | None:
    if lang and lang in rec.title:
        return rec.title[lang]
    if "en" in rec.title:
        return rec.title["en"]
    return next(iter(rec.title.values()), None)


def _load_scheme(settings: Settings, first: FirstStage) -> ClassificationScheme:
    """The CPC scheme from settings (titles), else a title-less tree of the codes seen in the index."""
    if settings.cpc_titles is not None:
        try:
            return ClassificationScheme.load(settings.cpc_titles)
        except (OSError, ValueError) as exc:
            log.warning("CPC titles %s unreadable (%s): code suggestions without titles", settings.cpc_titles, exc)
    codes: set[str] = set()
    for lvl in ("subgroup", "main_group"):
        vocab = first.docs.code_vocabulary(lvl)
        codes.update(vocab)
    return ClassificationScheme.from_codes(sorted(codes))


def _load_model_stages(index_dir: Path, settings: Settings) -> dict[str, Any] | None:
    """Dense + rerank stages and fusion weights from ``models/`` in the index, or None when absent."""
    if not (index_dir / "models" / "meta.json").exists():
        return None
    from service.retrieval.model_stages import load_model_stages  # onnxruntime/faiss imported only here

    return load_model_stages(index_dir, settings)

