"""Deterministic synthetic patents for the demo and for scale benchmarks (``priorart synth``).

Everything is made from the seed; nothing is read from disk, so demo data is self-contained.

The world
  * A CPC-shaped classification: sections A-H, classes (``H01``), subclasses (``H01F``), main groups
    (``H01F27/00``) and subgroups with dot levels (``H01F27/14``). Each main group is one *topic*.
    :meth:`SynthWorld.scheme_lines` writes it in the format of the CPC title list, so
    ``service.classification.ClassificationScheme`` can load it.
  * A trilingual lexicon of *concepts* (nouns, adjectives, verbs), each with an English, German and
    French surface form with plausible morphology (German nouns capitalised with a gender and a plural,
    French gender and agreement, verb participles). A core of real technical words (device /
    Vorrichtung / dispositif ...) heads the background vocabulary; the rest are pseudo-words built from
    syllables: 60 % cognates (one root, language-specific spelling and suffix: ``trombation`` /
    ``Trombierung`` / ``trombation``), 40 % unrelated per language (like screw / Schraube / vis).
  * Vocabularies with Zipfian rank frequencies: a background vocabulary, one per subclass (shared by
    its topics) and one per topic.
  * Applicants (with inventor pools) that favour a few topics each.

A document
  * picks a topic (Zipfian topic popularity) and an *invention signature*: a handful of concepts
    (mostly from its topic). With probability ``derive_rate`` it builds on recent documents of the
    same topic: it takes over most of one document's signature (cited with category ``X``) and part of
    another's (``Y``), and cites some further same-topic documents as background (``A``). Citations
    therefore point to real earlier ids, and the X/Y ones share specific vocabulary with the citing
    document -- that is what makes prior-art search on this data measurable (see :func:`synth_topics`).
  * English title, abstract, claims and a description tree (Technical field, Background, Summary,
    Brief description of the drawings, Detailed description with one subsection per embodiment).
    Words come from a mixture of the signature, the topic, the subclass and the background vocabulary.
  * With probability ``multilingual`` (a ``B1`` grant, the EP trilingual case) also German and French
    titles and claims, rendered from the same claim structure, so the claims are aligned claim by claim.
  * Dependent claims refer to earlier ones (``refs``) with "according to claim N" / "nach Anspruch N" /
    "selon la revendication N" (also "... claim 1 or 2", "any one of claims 1 to 3").
  * 1-4 CPC codes, the topic's dominating (first), sometimes a sibling topic's or another section's;
    IPC codes are the main groups of the CPC codes.
  * ids ``XS00000042A1``: ``XS`` lies in ISO 3166's user-assigned range (XA-XZ) and is used by no patent
    office, so synthetic documents are never mistaken for real publications. Numbers follow generation
    order; publication dates (Wednesdays) rise with the number from 1980 to 2024.

Modules: :mod:`~training.synth.lexicon` (the concepts and their word forms),
:mod:`~training.synth.templates` and :mod:`~training.synth.render` (template text and grammar),
:mod:`~training.synth.world` (classification, vocabularies, applicants),
:mod:`~training.synth.documents` (:class:`SynthGenerator`, :func:`generate`),
:mod:`~training.synth.writer` (:func:`write_synthetic`), :mod:`~training.synth.topics` (:func:`synth_topics`).

Same seed and parameters -> identical records (and byte-identical JSONL); generation streams with
memory bounded by the world's size (at most ``MAX_TOPICS`` topics), not by ``n``.
"""

from training.synth.documents import COUNTRY, END, START, SynthConfig, SynthGenerator, generate
from training.synth.topics import CITATION_GRADES, synth_topics
from training.synth.world import MAX_TOPICS, SynthTopic, SynthWorld, default_topics
from training.synth.writer import write_synthetic

__all__ = [
    "CITATION_GRADES",
    "COUNTRY",
    "END",
    "MAX_TOPICS",
    "START",
    "SynthConfig",
    "SynthGenerator",
    "SynthTopic",
    "SynthWorld",
    "default_topics",
    "generate",
    "synth_topics",
    "write_synthetic",
]
