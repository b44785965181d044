"""CodeBLEU (Ren et al. 2020, arXiv 2009.10297) for Python, on the standard library only.

The weighted mean of the components of `ngram_matcher`, `ast_matcher` and `dataflow_analyzer`,
renormalized over those defined for the pair: an undefined one is None and left out (the
`codebleu` package counts an undefined dataflow match as 1.0). Definitions, and where scores
differ from that package: docs/code-quality.md, 'CodeBLEU'."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from schemas.code_quality import SemanticClosenessMetrics
from stream_app.code_quality.code_bleu.ast_matcher import calculate_ast_match, extract_subtrees
from stream_app.code_quality.code_bleu.dataflow_analyzer import (
    DataflowEdge,
    calculate_dataflow_match,
    extract_dataflows,
)
from stream_app.code_quality.code_bleu.ngram_matcher import (
    calculate_ngram_match,
    calculate_weighted_ngram_match,
    tokenize_code,
)

DEFAULT_WEIGHTS: Final[Mapping[str, float]] = {
    "ngram": 0.25,
    "weighted_ngram": 0.25,
    "ast": 0.25,
    "dataflow": 0.25,
}


def calculate_code_bleu(
    candidate: str,
    reference: str,
    weights: Mapping[str, float] | None = None,
    language: str = "python",
) -> SemanticClosenessMetrics:
    """CodeBLEU of generated code against a reference. Deterministic; identical code scores 1.0."""
    w = dict(DEFAULT_WEIGHTS if weights is None else weights)
    if set(w) != set(DEFAULT_WEIGHTS) or any(v < 0 for v in w.values()):
        raise ValueError(f"weights need the keys {sorted(DEFAULT_WEIGHTS)}, each >= 0")
    python = language == "python"
    components: dict[str, float | None] = {
        "ngram": calculate_ngram_match(candidate, reference, language=language),
        "weighted_ngram": calculate_weighted_ngram_match(candidate, reference, language=language),
        "ast": calculate_ast_match(candidate, reference) if python else None,
        "dataflow": calculate_dataflow_match(candidate, reference) if python else None,
    }
    available = {k: v for k, v in components.items() if v is not None and w[k] > 0}
    total_weight = math.fsum(w[k] for k in available)
    if total_weight == 0:
        raise ValueError("no component with a positive weight is defined for this pair")
    score = math.fsum(w[k] * v for k, v in available.items()) / total_weight
    ngram, weighted = components["ngram"], components["weighted_ngram"]
    assert ngram is not None
    assert weighted is not None
    return SemanticClosenessMetrics(
        code_bleu=min(max(score, 0.0), 1.0),
        ngram_match=ngram,
        weighted_ngram_match=weighted,
        ast_match=components["ast"],
        dataflow_match=components["dataflow"],
        language=language,
    )


__all__ = [
    "DEFAULT_WEIGHTS",
    "DataflowEdge",
    "calculate_ast_match",
    "calculate_code_bleu",
    "calculate_dataflow_match",
    "calculate_ngram_match",
    "calculate_weighted_ngram_match",
    "extract_dataflows",
    "extract_subtrees",
    "tokenize_code",
]
