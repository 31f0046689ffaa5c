"""The brain registry: every brain the pipeline can ask, by name (``--brain``).

Apart from ``agents/brain.py``, the Protocol and the value types every brain imports, so
that no brain imports the module that imports it. The LLM brain gets the offline brain as
its fallback from here, never by importing it.
"""

from __future__ import annotations

from collections.abc import Callable

from testcurator.agents.brain import Brain, BrainSettings
from testcurator.errors import BadInputError


def _make_offline(settings: BrainSettings) -> Brain:
    from testcurator.agents.offline.brain import OfflineBrain

    return OfflineBrain(settings)


def _make_llm(settings: BrainSettings) -> Brain:
    # Imported when asked for: an offline run does not load the LLM client's libraries.
    from testcurator.agents.llm.brain import LLMBrain

    if settings.llm is None:
        raise BadInputError(
            "--brain llm needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL (and "
            "TESTCURATOR_LLM_MODEL) or llm.base_url / llm.model in the config")
    fallback = settings.fallback if settings.fallback is not None else make_brain("offline", settings)
    brain = LLMBrain(settings.llm, fallback=fallback, state_dir=settings.state_dir)
    if settings.say is not None:
        brain.say = settings.say
    return brain


BRAINS: dict[str, Callable[[BrainSettings], Brain]] = {
    "offline": _make_offline,
    "llm": _make_llm,
}


def make_brain(name: str, settings: BrainSettings) -> Brain:
    """The brain registered as ``name``; an unknown name is bad input (exit 2)."""
    try:
        factory = BRAINS[name]
    except KeyError:
        raise BadInputError(f"unknown brain {name!r} (expected one of: {', '.join(sorted(BRAINS))})") from None
    return factory(settings)
