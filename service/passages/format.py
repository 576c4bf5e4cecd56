"""On-disk format of the passage index: folder, format tag, version and file names (one place).

The passage index is one folder of plain ``.npy`` arrays and two UTF-8 blobs, written by
:class:`~service.passages.builder.PassageIndexBuilder` and read memory-mapped by
:class:`~service.passages.index.PassageIndex`. It is registered in the index's ``meta.json`` under
``components["passages"]`` (``{"format": PASSAGES_FORMAT, "version": PASSAGES_VERSION, "dir": ...}``).

Every array is *per collection of rows*: pointers are relative to the folder's own rows. Two arrays hold
the folder's collection statistics, the collection model of the passage LM (each term's count in its
language, and each language's number of tokens: every title, heading and passage counted); they add up
when folders are joined. A folder built for a batch of documents can therefore be concatenated with another
one (offset the pointers, merge the vocabularies, add the counts:
:func:`~service.passages.builder.concat_passage_indexes`).

====================  ==========  ===================================================================
file                  dtype       content (``n`` documents, ``U`` units, ``S`` sections, ``T`` term
                                  entries, ``P`` postings, ``V`` terms)
====================  ==========  ===================================================================
``docs.npy``          int64       ``(n + 1, 4)`` cumulative starts of each document's units,
                                  sections, term entries and postings
``doc_meta.npy``      uint8       ``(n, 4)``: language mask of the record (``PatentRecord.languages``),
                                  description language, abstract language mask, claims language mask
``doc_ids.bin/.npy``  bytes/i64   publication ids (UTF-8 blob + ``n + 1`` offsets)
``unit_tag.npy``      uint8       ``kind << 2 | language`` of each unit (title, heading, abstract,
                                  paragraph, claim)
``unit_len.npy``      uint        analysed length (number of index terms)
``unit_sec.npy``      int         section of the unit within its document (parent section for
                                  passages, own section for headings, -1 for titles)
``text.bin/.npy``     bytes/i64   unit texts (UTF-8 blob + ``U + 1`` offsets): passage text for the
                                  response and the highlights, headings for section paths, titles
``pid.bin/.npy``      bytes/i64   passage id suffix of each unit (``d/3.2/p4``; empty for non-passages)
``sec_parent.npy``    int         parent section within the document (-1: root)
``sec_depth.npy``     uint        edges from the root
``sec_kind.npy``      uint8       root, Abstract, Description, Claims, headed section
``sec_end.npy``       uint        pre-order end of the section's subtree (within the document)
``sec_unit.npy``      int         heading unit of a headed section (within the document), else -1
``sec_head_len.npy``  uint        analysed length of the headings from the root down to the section
``term_id.npy``       int32       per document, its distinct terms (``T`` entries, joint term ids)
``term_end.npy``      uint        per term entry, the end of its postings within the document
``post_unit.npy``     uint        per posting, the unit (within the document) holding the term
``post_count.npy``    uint        per posting, the term count in that unit
``vocab.bin/.npy``    bytes/i64   sorted ``lang \\0 term`` keys; a term's joint id is its rank
``vocab_cf.npy``      uint        per joint term id, its count in all the text of its language
``lang_tokens.npy``   int64       per language (en, de, fr), its number of tokens (analysed terms)
====================  ==========  ===================================================================

"uint"/"int" arrays use the smallest dtype that holds their values (uint8/16/32, int8/16/32).
"""

from __future__ import annotations

from service.index.folder import Layout

PASSAGES_DIR = Layout.PASSAGES  # the folder inside an index folder (named in service/index/folder.py)
PASSAGES_COMPONENT = "passages"
PASSAGES_FORMAT = "priorart-passages"
PASSAGES_VERSION = 2  # 2: vocab_cf and lang_tokens (the collection model)

DOCS = "docs.npy"
DOC_META = "doc_meta.npy"
DOC_IDS = "doc_ids"  # .bin + .npy
UNIT_TAG = "unit_tag.npy"
UNIT_LEN = "unit_len.npy"
UNIT_SEC = "unit_sec.npy"
TEXT = "text"  # .bin + .npy
PID = "pid"  # .bin + .npy
SEC_PARENT = "sec_parent.npy"
SEC_DEPTH = "sec_depth.npy"
SEC_KIND = "sec_kind.npy"
SEC_END = "sec_end.npy"
SEC_UNIT = "sec_unit.npy"
SEC_HEAD_LEN = "sec_head_len.npy"
TERM_ID = "term_id.npy"
TERM_END = "term_end.npy"
POST_UNIT = "post_unit.npy"
POST_COUNT = "post_count.npy"
VOCAB = "vocab"  # .bin + .npy
VOCAB_CF = "vocab_cf.npy"
LANG_TOKENS = "lang_tokens.npy"

DOC_COLUMNS = 4  # units, sections, term entries, postings

BLOBS = (DOC_IDS, TEXT, PID, VOCAB)
ARRAYS = (DOCS, DOC_META, UNIT_TAG, UNIT_LEN, UNIT_SEC, SEC_PARENT, SEC_DEPTH, SEC_KIND, SEC_END, SEC_UNIT,
          SEC_HEAD_LEN, TERM_ID, TERM_END, POST_UNIT, POST_COUNT)
COLLECTION = (VOCAB_CF, LANG_TOKENS)
"""The collection statistics (not per document: added up, not concatenated, when folders are joined)."""
SCORING_ARRAYS = (DOCS, DOC_META, UNIT_TAG, UNIT_LEN, UNIT_SEC, SEC_PARENT, SEC_DEPTH, SEC_KIND, SEC_END,
                  SEC_HEAD_LEN, TERM_ID, TERM_END, POST_UNIT, POST_COUNT)
"""The arrays a query reads for its candidates (the rest is read only for the returned passages; of the
collection statistics, one value per query term)."""


def files() -> list[str]:
    """Every file of a passage index folder, relative to it."""
    return [*ARRAYS, *COLLECTION, *(f"{b}.bin" for b in BLOBS), *(f"{b}.npy" for b in BLOBS)]
