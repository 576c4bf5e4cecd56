"""Evaluation: measures (ir-measures + PRES, MAP(D), PREC(D)), randomisation test, TREC run/qrels/topics I/O."""

from training.evaluation.measures import MEASURE_NAMES, EvalReport, evaluate_run, pres
from training.evaluation.passages import PassageReport, evaluate_passages
from training.evaluation.significance import compare_reports, randomisation_test
from training.evaluation.trec import (
    Qrels,
    Run,
    Topic,
    TrecFormatError,
    read_qrels,
    read_run,
    read_topics,
    write_qrels,
    write_run,
    write_topics,
)

__all__ = [
    "MEASURE_NAMES",
    "EvalReport",
    "PassageReport",
    "Qrels",
    "Run",
    "Topic",
    "TrecFormatError",
    "compare_reports",
    "evaluate_passages",
    "evaluate_run",
    "pres",
    "randomisation_test",
    "read_qrels",
    "read_run",
    "read_topics",
    "write_qrels",
    "write_run",
    "write_topics",
]
