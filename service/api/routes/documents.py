"""GET /documents/{id} and GET /codes (classification autocomplete)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from service.api.deps import EngineDep
from service.corpus.ids import normalise_pub_id

router = APIRouter(tags=["documents"])
_ID_RE = re.compile(r"^[A-Z]{2}[A-Z0-9]{1,20}$")


@router.get("/documents/{doc_id}", summary="The structured record of one publication")
def document(doc_id: str, engine: EngineDep) -> dict[str, Any]:
    norm = normalise_pub_id(doc_id)
    if not _ID_RE.match(norm):  # ids are country + number + kind; nothing else reaches the store
        raise HTTPException(404, f"no document {doc_id!r}: publication ids look like EP0640886B1")
    record = engine.document(norm)
    if record is None:
        raise HTTPException(404, f"no document {norm} in this index")
    return record.model_dump(mode="json")


@router.get("/codes", summary="Classification code autocomplete (codes and titles)")
def codes(
    engine: EngineDep,
    q: str = Query(..., min_length=1, max_length=100, description="code prefix or title words"),
    limit: int = Query(10, ge=1, le=100),
) -> dict[str, Any]:
    return {"results": engine.suggest_codes(q, limit)}
