"""Fixtures for the agents tests: a local OpenAI-compatible server and fast settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# fake_openai is a helper module beside this file, not an installed package.
sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI  # noqa: E402

from testcurator.config.llm import LLMSettings  # noqa: E402


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llm_settings(fake_openai: FakeOpenAI) -> LLMSettings:
    # Few and fast retries. The timeout is wide: on a loaded machine a local answer can take
    # far longer than usual, and one that timed out would be retried and shift a scripted
    # sequence; a timeout is tested with fake_openai.hung(), which never answers.
    return LLMSettings(base_url=fake_openai.base_url, model="fake-model", idle_timeout=30.0, budget_s=0,
                       max_tries=3, max_retries=1, retry_backoff=0.01, batch_size=4, concurrency=1)
