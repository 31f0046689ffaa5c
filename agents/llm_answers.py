"""The answers the LLM brain asks for: pydantic models, reasoning before the verdict.

Their JSON Schema is what the endpoint is asked to follow (agents/llm_negotiate.py), and
what every answer is validated against before the rails look at it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ScopeItem(BaseModel):
    path: str = Field(description="The candidate path exactly as given.")
    reasoning: str
    evidence: list[str]
    keep: bool
    needs_review: bool
    missing: list[str]


class ScopeAnswer(BaseModel):
    decisions: list[ScopeItem]


class BucketItem(BaseModel):
    test: str = Field(description="The test name exactly as given (Class::test).")
    reasoning: str
    evidence: list[str]
    mode: Literal["mandatory_success", "xfail", "xfail_strict", "skip"]
    exclude_dtypes: list[str]
    exclude_ops: list[str]
    needs_review: bool
    missing: list[str]


class BucketAnswer(BaseModel):
    decisions: list[BucketItem]


class SummaryItem(BaseModel):
    test: str
    reasoning: str
    summary: str


class SummaryAnswer(BaseModel):
    summaries: list[SummaryItem]
