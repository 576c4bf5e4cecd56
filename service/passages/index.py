"""The passage index of an index folder, memory-mapped: what the passage ranker reads at query time.

``PassageIndex.load(index_dir)`` maps the arrays of ``<index_dir>/passages/`` (format in
:mod:`service.passages.format`); nothing is parsed per document, nothing is warmed up: a fresh
process answers its first query at full speed (page cache permitting). ``PassageIndex.rank`` is the
one call the engine makes: the passages of the candidate rows, scored in context (QSF variants).
An index folder built before the passage index existed raises :class:`PassageIndexMissingError`
with the instruction to rebuild.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

import service.passages.format as fmt
from service.corpus.record import PatentRecord
from service.index.folder import IndexFolder, Layout
from service.passages.arrays import PassageArrays, PassageIndexError, PassageIndexMissingError
from service.passages.reader import PassageReader

if TYPE_CHECKING:
    from service.passages.builder import Analyze
    from service.passages.lm import QueryModels

__all__ = ["PassageIndex", "PassageIndexError", "PassageIndexMissingError", "PassageReader"]


class PassageIndex(PassageArrays, PassageReader):
    """The passage index of a build (or of the one segment of a compacted generation): its arrays, mapped; load,
    build in memory for tests; ranked through :class:`PassageReader`, the candidates read where they lie."""

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, folder: IndexFolder | str | Path, *, mmap: bool = True) -> PassageReader:
        """Map the passage index of an opened index folder (a path is opened without re-hashing its files); a
        generation of several segments maps each segment's (:class:`service.passages.segments.PassageGeneration`)."""
        if not isinstance(folder, IndexFolder):
            folder = IndexFolder.open(folder, verify=False)
        whole = folder.one_build
        if whole is None:
            return cls._load_live(folder)
        folder = whole
        index_dir = folder.root
        comp = folder.components.get(fmt.PASSAGES_COMPONENT)
        if comp is None:
            raise PassageIndexMissingError(
                f"the index {index_dir} has no passage index (built before passages were indexed at build "
                "time): /passages needs it; rebuild the index with `priorart build`"
            )
        if not isinstance(comp, dict) or comp.get("format") != fmt.PASSAGES_FORMAT:
            raise PassageIndexError(f"{index_dir}/meta.json: components.passages is not a {fmt.PASSAGES_FORMAT} entry")
        if comp.get("version") != fmt.PASSAGES_VERSION:
            raise PassageIndexError(
                f"{index_dir}: passage index format version {comp.get('version')!r}, this priorart reads version "
                f"{fmt.PASSAGES_VERSION}; rebuild the index with `priorart build`"
            )
        return cls.open(folder.path(str(comp.get("dir", Layout.PASSAGES))), mmap=mmap, info=comp)

    @classmethod
    def _load_live(cls, folder: IndexFolder) -> PassageReader:
        """The passage indexes of a generation's segments, each mapped where it lies and searched in place
        (:mod:`service.passages.segments`); deleted rows are never candidates, and their text leaves the collection
        model (as one build of the live documents has it)."""
        from service.passages.segments import PassageGeneration, open_part

        found = []
        for seg in folder.segments:
            comp = seg.folder.components.get(fmt.PASSAGES_COMPONENT)
            if not isinstance(comp, dict):
                raise PassageIndexMissingError(f"segment {seg.folder.root} has no passage index; /passages needs one "
                                               "in every segment (rebuild the index with `priorart build`)")
            found.append((seg.folder.path(str(comp.get("dir", Layout.PASSAGES))), comp, seg.deleted))
        if len(found) == 1 and not len(found[0][2]):  # one segment, nothing deleted: mapped as it lies
            return cls.open(found[0][0], mmap=True, info=found[0][1])
        return PassageGeneration([open_part(path, comp) for path, comp, _ in found],
                                 deleted=[gone for _, _, gone in found])

    @classmethod
    def from_records(cls, records: Iterable[PatentRecord], *,
                     analyzers: Mapping[str, Analyze] | None = None) -> PassageIndex:
        """An in-memory passage index of ``records`` (rows in their order), for tests and experiments."""
        from service.passages.builder import PassageIndexBuilder

        tmp = Path(tempfile.mkdtemp(prefix="priorart-passages-"))
        try:
            builder = PassageIndexBuilder(tmp / "passages", analyzers=analyzers)
            for rec in records:
                builder.add(rec)
            info = builder.finish()
            return cls.open(tmp / "passages", mmap=False, info=info)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def view(self, rows: npt.ArrayLike, models: QueryModels) -> tuple[PassageArrays, npt.NDArray[np.int64]]:
        """One build holds every candidate: itself, the rows as they are (checked by the ranker)."""
        return self, np.asarray(rows, dtype=np.int64).reshape(-1)

    @property
    def parts(self) -> list[PassageArrays]:  # type: ignore[override]
        """One segment: itself."""
        return [self]

    def locate(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        rows = np.asarray(rows, dtype=np.int64)
        return np.zeros(len(rows), dtype=np.int64), rows
