from __future__ import annotations

import hashlib

import pytest

from testcurator.errors import CuratorError
from testcurator.prompts import PromptError, available_prompts, load_prompt

EXPECTED_FIELDS = {
    "scope": {"backend", "candidates"},
    "bucket": {"backend", "tests"},
    "refine": {"backend", "tests"},
    "summary": {"tests"},
    "reask": {"problems"},
}


@pytest.mark.parametrize(("name", "fields"), sorted(EXPECTED_FIELDS.items()))
def test_prompt_fields_and_hash(name: str, fields: set[str]) -> None:
    prompt = load_prompt(name)
    assert prompt.fields == fields
    assert prompt.hash == hashlib.sha256(prompt.text.encode()).hexdigest()
    assert prompt.system and prompt.user


def test_every_shipped_prompt_loads() -> None:
    assert set(EXPECTED_FIELDS) <= set(available_prompts())


def test_render_fills_fields_and_json_encodes() -> None:
    messages = load_prompt("bucket").render({"backend": {"name": "dev"}, "tests": [{"test": "TestA::test_b"}]})
    assert [m["role"] for m in messages] == ["system", "user"]
    assert '"name": "dev"' in messages[1]["content"]
    assert "TestA::test_b" in messages[1]["content"]
    assert "$" not in messages[1]["content"]


def test_render_missing_field_is_a_prompt_error() -> None:
    with pytest.raises(PromptError, match="missing fields: tests"):
        load_prompt("bucket").render({"backend": {}})


@pytest.mark.parametrize("name", ["nonexistent", "../bucket", "Bucket", ""])
def test_unknown_prompt_is_a_curator_error(name: str) -> None:
    with pytest.raises(CuratorError):
        load_prompt(name)
