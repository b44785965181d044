"""BLEU (Papineni et al. 2002) and CodeBLEU's keyword-weighted BLEU (Ren et al. 2020, eq. 2).

Sentence BLEU as NLTK computes it, with its `auto_reweigh`: orders longer than the candidate are
dropped, so identical code scores 1.0 at any length (BLEU-4 proper gives 3 identical tokens
0.56). Smoothing, keyword weights and tokens: docs/code-quality.md, 'CodeBLEU'."""

from __future__ import annotations

import keyword
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from stream_app.code_quality.code_bleu.python_grammar import python_tokens

MAX_ORDER: Final = 4
SMOOTHING_EPSILON: Final = 0.1
KEYWORD_WEIGHT: Final = 1.0
OTHER_WEIGHT: Final = 0.2
PYTHON_KEYWORDS: Final = frozenset(keyword.kwlist) | {"match", "case", "type"}
_GENERIC_TOKEN: Final = re.compile(r"\w+|[^\w\s]")


def tokenize_code(code: str, language: str = "python") -> list[str]:
    """Code tokens without whitespace and comments: Python's own tokens, as 3.11 gives them on
    every version (`a+b` and `a + b` agree, a string literal is one token); other languages, and
    code that is not Python 3.11, by a regex."""
    if language == "python":
        tokens = python_tokens(code)
        if tokens is not None:
            return tokens
    return _GENERIC_TOKEN.findall(code)


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(
    candidate: Sequence[str],
    reference: Sequence[str],
    max_order: int = MAX_ORDER,
    unigram_weights: Mapping[str, float] | None = None,
) -> float:
    """Sentence BLEU of a token sequence against one reference. `unigram_weights` maps a token to
    its weight in the unigram precision (others weigh 1)."""
    if not candidate:
        return 1.0 if not reference else 0.0
    orders = range(1, min(max_order, len(candidate)) + 1)
    log_sum = 0.0
    for n in orders:
        cand = _ngrams(candidate, n)
        ref = _ngrams(reference, n)
        if n == 1 and unigram_weights is not None:

            def w(gram: tuple[str, ...]) -> float:
                return unigram_weights.get(gram[0], 1.0)

            matched = math.fsum(w(g) * min(c, ref[g]) for g, c in cand.items())
            total = math.fsum(w(g) * c for g, c in cand.items())
        else:
            matched = float(sum(min(c, ref[g]) for g, c in cand.items()))  # ints
            total = float(sum(cand.values()))  # ints
        if n == 1 and matched == 0:
            return 0.0  # nothing in common
        # Orders never exceed the candidate's length, so `total` counts at least one n-gram.
        precision = (matched if matched else SMOOTHING_EPSILON) / total
        log_sum += math.log(precision) / len(orders)
    c, r = len(candidate), len(reference)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return min(1.0, brevity * math.exp(log_sum))


def keyword_weights(tokens: Sequence[str], language: str = "python") -> dict[str, float]:
    """Per-token weights of the weighted BLEU: keywords count more than identifiers."""
    keywords = PYTHON_KEYWORDS if language == "python" else frozenset()
    return {t: KEYWORD_WEIGHT if t in keywords else OTHER_WEIGHT for t in set(tokens)}


def calculate_ngram_match(
    candidate: str, reference: str, n: int = MAX_ORDER, language: str = "python"
) -> float:
    """BLEU up to n-grams of order n (CodeBLEU's n-gram match for n = 4)."""
    return bleu(tokenize_code(candidate, language), tokenize_code(reference, language), n)


def calculate_weighted_ngram_match(
    candidate: str, reference: str, n: int = MAX_ORDER, language: str = "python"
) -> float:
    """BLEU with keywords weighing 5x other tokens in the unigram precision. For a language without
    a keyword list every token weighs the same, and this equals the n-gram match."""
    cand = tokenize_code(candidate, language)
    if language != "python":
        return bleu(cand, tokenize_code(reference, language), n)
    return bleu(cand, tokenize_code(reference, language), n, keyword_weights(cand, language))
