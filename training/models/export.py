"""ONNX export of every online model (opset 17, dynamic batch and length axes).

Graph signatures (what :mod:`service.retrieval.encoders` feeds):

- encoders: inputs ``ids`` int64 [batch, length], ``lengths`` int64 [batch] -> ``vector`` float32
  [batch, dim]; the embedding table is inside the graph. Dual-encoder graphs output the scaled vector
  ``v / (|v| + l)``.
- ranker MLPs: ``query``, ``doc`` (text or meta ranker) or ``query_text``, ``doc_text``, ``query_meta``,
  ``doc_meta`` (joint) float32 [batch, dim] -> ``score`` float32 [batch]; the interaction features
  (:func:`training.models.rankers.mlp_features`) are computed inside the graph.

:func:`export_dual` and :func:`export_ranker` write one model's graphs and return the relative paths
that go into ``meta.json``'s ``components``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from training.models.dual import DualEncoder
from training.models.rankers import Ranker, mlp_features

OPSET = 17
_ENC_AXES = {"ids": {0: "batch", 1: "length"}, "lengths": {0: "batch"}, "vector": {0: "batch"}}


class ScaledEncoder(nn.Module):
    """A dual-encoder side followed by ``v / (|v| + l)``."""

    def __init__(self, encoder: nn.Module, smooth_l: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.smooth_l = smooth_l

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        v = self.encoder(ids, lengths)
        return v / (v.norm(dim=-1, keepdim=True) + self.smooth_l)


class PairMLP(nn.Module):
    """Text-only or meta-only ranker head: ``S([query; doc])``."""

    def __init__(self, ranker: Ranker) -> None:
        super().__init__()
        self.mlp = ranker.mlp
        self.meta = ranker.kind == "meta"
        self.interactions = ranker.config.interactions

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        if self.meta:
            feats = mlp_features(None, None, query, doc, interactions=self.interactions)
        else:
            feats = mlp_features(query, doc, None, None, interactions=self.interactions)
        return self.mlp(feats)


class JointMLP(nn.Module):
    """Joint ranker head: ``S([q_text; d_text; q_meta; d_meta])``."""

    def __init__(self, ranker: Ranker) -> None:
        super().__init__()
        self.mlp = ranker.mlp
        self.interactions = ranker.config.interactions

    def forward(
        self, query_text: torch.Tensor, doc_text: torch.Tensor, query_meta: torch.Tensor, doc_meta: torch.Tensor
    ) -> torch.Tensor:
        feats = mlp_features(query_text, doc_text, query_meta, doc_meta, interactions=self.interactions)
        return self.mlp(feats)


def _export(
    module: nn.Module,
    args: tuple[torch.Tensor, ...],
    names: list[str],
    output: str,
    path: Path,
    axes: dict[str, dict[int, str]],
) -> None:
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval().cpu()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter announces its deprecation
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=names,
            output_names=[output],
            dynamic_axes=axes,
            do_constant_folding=True,
        )
    onnx.checker.check_model(onnx.load(str(path)))


def export_encoder(encoder: nn.Module, path: str | Path) -> None:
    """An ``(ids, lengths) -> vector`` module (CNN, mean or scaled encoder) as ONNX."""
    ids = torch.ones((2, 5), dtype=torch.long)
    lengths = torch.tensor([5, 3], dtype=torch.long)
    _export(encoder, (ids, lengths), ["ids", "lengths"], "vector", Path(path), _ENC_AXES)


def export_mlp(head: nn.Module, dims: list[int], names: list[str], path: str | Path) -> None:
    """A ranker head (``PairMLP`` / ``JointMLP``) as ONNX."""
    args = tuple(torch.zeros((2, d), dtype=torch.float32) for d in dims)
    axes = {n: {0: "batch"} for n in names} | {"score": {0: "batch"}}
    _export(head, args, names, "score", Path(path), axes)


def export_dual(model: DualEncoder, root: str | Path, sub: str = "dual") -> dict[str, object]:
    """``dual/query.<lang>.onnx`` per query language and ``dual/doc.onnx``; returns their relative paths."""
    root = Path(root)
    model = model.eval().cpu()
    queries = {}
    for lang in model.query_langs:
        rel = f"{sub}/query.{lang}.onnx"
        export_encoder(ScaledEncoder(model.query[lang], model.smooth_l), root / rel)
        queries[lang] = rel
    doc_rel = f"{sub}/doc.onnx"
    export_encoder(ScaledEncoder(model.doc, model.smooth_l), root / doc_rel)
    return {
        "query": queries,
        "doc": doc_rel,
        "dim": model.dim,
        "smooth_l": model.smooth_l,
        "similarity": "inner_product",
    }


def export_ranker(model: Ranker, root: str | Path, sub: str) -> dict[str, object]:
    """A ranker's encoders and MLP under ``<sub>/``; returns their relative paths (components entry)."""
    root = Path(root)
    model = model.eval().cpu()
    cfg = model.config
    if model.kind == "text":
        queries = {}
        for lang in model.query_langs:
            queries[lang] = f"{sub}/query.{lang}.onnx"
            export_encoder(model.query_text[lang], root / queries[lang])
        export_encoder(model.doc_text, root / f"{sub}/doc.onnx")
        export_mlp(PairMLP(model), [cfg.text_filters] * 2, ["query", "doc"], root / f"{sub}/mlp.onnx")
        return {"query": queries, "doc": f"{sub}/doc.onnx", "mlp": f"{sub}/mlp.onnx"}
    if model.kind == "meta":
        export_encoder(model.query_meta, root / f"{sub}/query.onnx")
        export_encoder(model.doc_meta, root / f"{sub}/doc.onnx")
        export_mlp(PairMLP(model), [cfg.meta_filters] * 2, ["query", "doc"], root / f"{sub}/mlp.onnx")
        return {"query": f"{sub}/query.onnx", "doc": f"{sub}/doc.onnx", "mlp": f"{sub}/mlp.onnx"}
    queries = {}
    for lang in model.query_langs:
        queries[lang] = f"{sub}/query_text.{lang}.onnx"
        export_encoder(model.query_text[lang], root / queries[lang])
    export_encoder(model.doc_text, root / f"{sub}/doc_text.onnx")
    export_encoder(model.query_meta, root / f"{sub}/query_meta.onnx")
    export_encoder(model.doc_meta, root / f"{sub}/doc_meta.onnx")
    export_mlp(
        JointMLP(model),
        [cfg.text_filters, cfg.text_filters, cfg.meta_filters, cfg.meta_filters],
        ["query_text", "doc_text", "query_meta", "doc_meta"],
        root / f"{sub}/mlp.onnx",
    )
    return {
        "query_text": queries,
        "doc_text": f"{sub}/doc_text.onnx",
        "query_meta": f"{sub}/query_meta.onnx",
        "doc_meta": f"{sub}/doc_meta.onnx",
        "mlp": f"{sub}/mlp.onnx",
    }
