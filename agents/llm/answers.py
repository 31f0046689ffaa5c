"""The answers the LLM brain asks for: pydantic models, reasoning before the verdict.

Their JSON Schema is what the endpoint is asked to follow (agents/llm/negotiate.py), and
what every answer is validated against before the rails look at it. Every string and list
list is bounded: a grammar-constrained server then cannot ramble an array past the
output-token cap (a 270M model filled ``exclude_dtypes`` until it was cut off, three tries
in a row), and an answer's size stays near what was planned (``output_tokens_per_item``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from testcurator.vocab import Mode

# Lists are bounded; strings are not: llama-cpp-python turns a maxLength into a grammar
# nested as deep as the length (600 levels for a reasoning), and strings end on their own.
Text = str
Facts = Annotated[list[str], Field(max_length=6)]
Names = Annotated[list[str], Field(max_length=16)]


class ScopeItem(BaseModel):
    path: str = Field(description="The candidate path exactly as given.")
    reasoning: Text
    evidence: Facts
    keep: bool
    needs_review: bool
    missing: Facts


class ScopeAnswer(BaseModel):
    decisions: list[ScopeItem]


class BucketItem(BaseModel):
    test: str = Field(description="The test name exactly as given (Class::test).")
    reasoning: Text
    evidence: Facts
    mode: Mode
    exclude_dtypes: Names
    exclude_ops: Names
    needs_review: bool
    missing: Facts


class BucketAnswer(BaseModel):
    decisions: list[BucketItem]


class SummaryItem(BaseModel):
    test: str
    reasoning: Text
    summary: Text


class SummaryAnswer(BaseModel):
    summaries: list[SummaryItem]
