"""The index folder (layout, ``meta.json``, verification: :mod:`service.index.folder`) and its doc store."""

from service.index.folder import (
    FIELDS,
    INDEX_FORMAT,
    INDEX_VERSION,
    SCORINGS,
    IndexFolder,
    IndexFormatError,
    IndexMeta,
    Layout,
    load_meta,
    sha256_file,
    update_meta,
    validate_settings,
    write_meta,
)
from service.index.store import (
    MISSING_DATE,
    DocStore,
    DocStoreWriter,
    UnknownDocumentError,
    id_shaped,
    looks_like_pub_id,
    normalise_pub_id,
)

__all__ = [
    "FIELDS",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "MISSING_DATE",
    "SCORINGS",
    "DocStore",
    "DocStoreWriter",
    "IndexFolder",
    "IndexFormatError",
    "IndexMeta",
    "Layout",
    "UnknownDocumentError",
    "id_shaped",
    "load_meta",
    "looks_like_pub_id",
    "normalise_pub_id",
    "sha256_file",
    "update_meta",
    "validate_settings",
    "write_meta",
]
