"""``priorart-lab experiment code-prediction``: how well the first stage's top documents predict a claim's codes.

Issue 33 item 2: a pasted claim brings no classification codes; :func:`service.retrieval.code_prediction.predict_codes`
votes them from the top documents of its search. Measured on the real data:

* topics: the first claim (reference signs stripped) of every publication with a subclass code, in each language it
  has claims in (EP grants: en, de, fr; US grants: en);
* the search: the engine's default pipeline on an index of every publication (tables as built by default), k deep
  enough that ``depth`` documents remain after the topic's own family (its publication, and A/B publications of one
  application) is removed: those share its codes by construction;
* predicted: the codes at ``subclass`` and ``main_group`` voted by the top ``depth`` documents (1 / rank each); and
  those of the code classifier of the CPC titles (:mod:`service.code_classifier`, row ``classifier``: the index's,
  built from the CPC title list; no document shaped it), from the claim's English image (a German or French claim
  through the index's tables);
* measured per language: P@1, the first predicted code is one of the publication's own codes at that level; S@3,
  one of the first three is; and for comparison the prior, the codes most frequent in the corpus (the topic's family
  left out), the ceiling (``reachable``: the share of topics with a code that another family holds at all), and
  how many topics got no prediction (no top document with a code at that level).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from service.codes import codes_at, record_codes
from service.corpus.record import PatentRecord, family_key
from service.retrieval.code_prediction import predict_codes
from service.text.analysis import SUPPORTED_LANGS
from training.tasks import strip_reference_signs

LEVELS = ("subclass", "main_group")
DEPTHS = (5, 10, 20)
PRIOR = "prior"
CLASSIFIER = "classifier"


@dataclass
class CodePredictionResult:
    topics: dict[str, int]  # language -> topics
    rows: dict[str, dict[str, dict[str, float]]]  # "level depth" or "level prior" -> language ("all" too) -> measure
    settings: dict[str, Any]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def topics_of(records: Sequence[PatentRecord]) -> list[tuple[PatentRecord, str, str]]:
    """(publication, language, first claim) for every publication with a subclass code, per claims language."""
    out = []
    for rec in sorted(records, key=lambda r: r.id):
        if not codes_at(record_codes(rec), "subclass"):
            continue
        for lang in SUPPORTED_LANGS:
            claims = rec.claims.get(lang)
            if claims:
                text = strip_reference_signs(min(claims, key=lambda c: c.num).text)
                if text.strip():
                    out.append((rec, lang, text))
    return out


def run_code_prediction(records: Sequence[PatentRecord], *, index_dir: Path | None = None,
                        depths: Sequence[int] = DEPTHS, progress: bool | None = None) -> CodePredictionResult:
    import time

    from service.engine import Engine
    from service.schema import SearchRequest
    from training.build import build_index

    t0 = time.perf_counter()
    topics = topics_of(records)
    if not topics:
        raise ExperimentError("no publication with a subclass code and claims: nothing to measure")
    by_id = {r.id: r for r in records}
    families: dict[str, list[PatentRecord]] = {}
    for rec in records:
        families.setdefault(family_key(rec), []).append(rec)
    corpus_counts = {level: Counter(c for r in records for c in codes_at(record_codes(r), level)) for level in LEVELS}
    deepest = max(depths)
    hits: dict[str, list[int]] = {}  # row -> per topic 1/0, measure by measure: "row|measure"
    langs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="priorart-code-prediction-") as tmp:
        idx = index_dir or Path(tmp) / "index"
        if index_dir is None:
            build_index(list(records), idx, progress=progress, ranker="none")
        engine = Engine.load(idx, verify=False)
        try:
            for rec, lang, text in tqdm(topics, desc="code-prediction topics", disable=None if progress is None
                                        else not progress):
                family = families[family_key(rec)]
                mates = {r.id for r in family}
                k = deepest + len(mates)
                # (the topic's vector kept in the vector cache: the experiment runs the same topics on other
                # indexes of the same documents, and again; a vector depends only on its text)
                res = engine.search(SearchRequest(query=text, lang=lang, k=k, collapse_families=False),
                                    remember_vector=True)
                ranked = [record_codes(by_id[h.id]) for h in res.results if h.id not in mates and h.id in by_id]
                classified = (engine.evidence.classify(engine.evidence.passage_query(text, lang)[0])
                              if engine.evidence.code_classifier is not None else None)
                langs.append(lang)
                for level in LEVELS:
                    own = set(codes_at(record_codes(rec), level))
                    # the prior without the topic's family: the corpus counts less the family's own codes
                    prior = corpus_counts[level].copy()
                    prior.subtract(c for r in family for c in codes_at(record_codes(r), level))
                    guesses = {f"{level} {PRIOR}": [c for c, n in prior.most_common(3) if n > 0]}
                    for depth in depths:
                        guesses[f"{level} top {depth}"] = [c for c, _ in predict_codes(ranked, level, depth=depth)][:3]
                    if engine.evidence.code_classifier is not None:
                        guesses[f"{level} {CLASSIFIER}"] = [c for c, _ in (classified or {}).get(level, [])][:3]
                    # the ceiling: a code of the topic's that another family holds (none other: nothing can find it)
                    hits.setdefault(f"{level} reachable|P@1", []).append(int(any(prior[c] > 0 for c in own)))
                    hits.setdefault(f"{level} reachable|S@3", []).append(hits[f"{level} reachable|P@1"][-1])
                    for row, codes in guesses.items():
                        hits.setdefault(f"{row}|P@1", []).append(int(bool(codes) and codes[0] in own))
                        hits.setdefault(f"{row}|S@3", []).append(int(bool(own & set(codes[:3]))))
                        hits.setdefault(f"{row}|none", []).append(int(not codes))
        finally:
            engine.close()
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for key, values in hits.items():
        row, measure = key.split("|")
        for lang in ("all", *SUPPORTED_LANGS):
            picked = [v for v, t in zip(values, langs, strict=True) if lang == "all" or t == lang]
            if picked:
                rows.setdefault(row, {}).setdefault(lang, {})[measure] = sum(picked) / len(picked)
    counts = Counter(langs)
    return CodePredictionResult(
        topics={"all": len(langs), **{lang: counts[lang] for lang in SUPPORTED_LANGS if counts[lang]}}, rows=rows,
        settings={"depths": list(depths), "levels": list(LEVELS), "index": str(index_dir) if index_dir else None},
        seconds=time.perf_counter() - t0)


def format_code_prediction(r: CodePredictionResult) -> str:
    langs = [lang for lang in ("all", *SUPPORTED_LANGS) if lang in r.topics]
    head = " | ".join(f"{lang} ({r.topics[lang]}) P@1 / S@3" for lang in langs)
    lines = [f"| prediction | {head} |", "|---|" + "---|" * len(langs)]
    for row, per in r.rows.items():
        cells = " | ".join(f"{per[lang]['P@1']:.3f} / {per[lang]['S@3']:.3f}" if lang in per else "–"
                           for lang in langs)
        lines.append(f"| {row} | {cells} |")
    return "\n".join(lines)
