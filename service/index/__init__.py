"""The index folder (layout, ``meta.json``, verification: :mod:`service.index.folder`) and its doc store."""

from service.index.folder import (
    FIELDS,
    INDEX_FORMAT,
    INDEX_VERSION,
    SCORINGS,
    BuildSettings,
    IndexFolder,
    IndexFormatError,
    IndexMeta,
    Layout,
    load_meta,
    sha256_file,
    update_meta,
    write_meta,
)
from service.index.store import (
    MISSING_DATE,
    DamagedRecordError,
    DocStore,
    DocStoreWriter,
    UnknownDocumentError,
)

__all__ = [
    "FIELDS",
    "BuildSettings",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "MISSING_DATE",
    "SCORINGS",
    "DamagedRecordError",
    "DocStore",
    "DocStoreWriter",
    "IndexFolder",
    "IndexFormatError",
    "IndexMeta",
    "Layout",
    "UnknownDocumentError",
    "load_meta",
    "sha256_file",
    "update_meta",
    "write_meta",
]
