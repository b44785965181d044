"""Results of the code-quality metrics (seed 004), as the library returns and the CLI prints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from schemas.common import OUTPUT_MODEL_CONFIG


class SemanticClosenessMetrics(BaseModel):
    """CodeBLEU and its four components, each within [0, 1]. A component is null where it is
    undefined (AST and dataflow for languages other than Python, a reference that does not parse,
    a reference with no dataflow); `code_bleu` is then the weighted mean of the others."""

    model_config = OUTPUT_MODEL_CONFIG

    code_bleu: float
    ngram_match: float
    weighted_ngram_match: float
    ast_match: float | None
    dataflow_match: float | None
    language: str = "python"


class FunctionalCorrectnessMetrics(BaseModel):
    """Generated code compared with a reference on test cases."""

    model_config = OUTPUT_MODEL_CONFIG

    tests_passed: int
    tests_total: int
    pass_rate: float = Field(
        description="tests_passed / tests_total; 0.0 when there is no test case."
    )
    errors: list[dict[str, Any]] = Field(
        default_factory=list,
        description="One entry per failed case: input, expected and actual, or the error "
        "(and, for a run that failed, its kind: exception, timeout, memory, crashed, "
        "output_limit or forbidden).",
    )
    sandbox: Literal["namespaces", "unsandboxed"] | None = Field(
        default=None,
        description="How the generated code ran: `namespaces` (the kernel sandbox), "
        "`unsandboxed` (the caller's explicit opt-in where the kernel refused the sandbox: "
        "resource limits only), or null for trusted callables compared in-process.",
    )
