"""The dense stage's document encoding as a Ray Data job (``priorart build --ray`` without ``--shards``).

The build writes the doc store first; then, instead of encoding every document in its own process
(:meth:`service.index.components.DenseComponent`), the rows ``0..n-1`` become a Ray dataset whose batches go to a
pool of encoder actors (:class:`_Encoder`: each opens the doc store and the index's ``encoder/`` once, and encodes one
document a run as the local path does, so a row's vector is the same either way). The driver writes each batch's
vectors into the memory-mapped ``dense/vectors.npy`` at their rows, as they come. The index folder must be readable
by every node (as a sharded Ray build's output folder must be).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

BATCH = 64  # rows a task encodes at once (one document a run inside it)


class _Encoder:
    """A Ray Data actor: the doc store and the pretrained encoder of one index folder, opened once."""

    def __init__(self, folder: str, encoder: str, device: str) -> None:
        from service.index.store import DocStore
        from service.retrieval.pretrained import load_pretrained

        self.docs = DocStore.load(Path(folder))
        self.encoder = load_pretrained(encoder, device=device, threads=1)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = np.asarray(batch["id"], dtype=np.int64)
        vectors = self.encoder.encode_documents([self.docs.get_row(int(r)) for r in rows])
        return {"row": rows, "vector": vectors}


def encode_on_ray(folder: Path, encoder: Path, n: int, dim: int, out: np.ndarray, *, address: str = "local",
                  device: str = "auto", progress: bool = False) -> dict[str, Any]:
    """Encode rows ``0..n-1`` of ``folder``'s doc store into ``out`` (float32 [n, dim]) on Ray Data; what ran."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise RuntimeError("encoding on Ray needs Ray Data: pip install -e '.[ray]'") from exc
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, ignore_reinit_error=True, log_to_driver=False)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    actors = max(1, min(cpus, -(-n // BATCH)))
    ds = ray.data.range(n).map_batches(_Encoder, fn_constructor_args=(str(folder), str(encoder), device),
                                       batch_size=BATCH, batch_format="numpy", num_cpus=1, concurrency=actors)
    done = np.zeros(n, dtype=bool)
    with tqdm(total=n, desc="dense vectors (Ray Data)", unit="doc", disable=not progress, file=sys.stderr,
              mininterval=1) as bar:
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            rows = np.asarray(batch["row"], dtype=np.int64)
            out[rows] = np.asarray(batch["vector"], dtype=np.float32).reshape(len(rows), dim)
            done[rows] = True
            bar.update(len(rows))
    if not done.all():
        raise RuntimeError(f"Ray Data returned {int(done.sum())} of {n} documents' vectors")
    return {"engine": f"ray data ({address})", "actors": actors, "cpus": cpus}


__all__ = ["encode_on_ray"]
