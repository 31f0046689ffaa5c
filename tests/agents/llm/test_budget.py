"""The LLM's time budget and measured speed (agents/llm_budget.Pace), on a clock the test holds."""

from __future__ import annotations

import pytest

from testcurator.agents.llm.budget import MIN_OUTPUT_PER_ITEM, Pace


def _measured(budget_s: float | None, tokens_per_s: float = 2.0, prompt_tokens_per_s: float = 50.0) -> Pace:
    pace = Pace(budget_s=budget_s)
    pace.observe(prompt_tokens=500, first_token_s=500 / prompt_tokens_per_s, completion_tokens=100,
                 generation_s=100 / tokens_per_s)
    return pace


def test_rates_are_cumulative_over_answers() -> None:
    pace = _measured(None, tokens_per_s=2.0)
    assert pace.tokens_per_s == pytest.approx(2.0) and pace.prompt_tokens_per_s == pytest.approx(50.0)
    pace.observe(prompt_tokens=500, first_token_s=5.0, completion_tokens=300, generation_s=50.0)
    assert pace.tokens_per_s == pytest.approx(400 / 100) and pace.prompt_tokens_per_s == pytest.approx(1000 / 15)


def test_overlapping_requests_spend_the_budget_once() -> None:
    pace = Pace(budget_s=100.0)
    pace.start(0.0)
    pace.start(5.0)
    pace.stop(10.0)
    assert pace.spent_s(12.0) == pytest.approx(12.0)  # one still in flight: the clock runs
    pace.stop(20.0)
    assert pace.spent_s(99.0) == pytest.approx(20.0) and pace.left_s(99.0) == pytest.approx(80.0)


@pytest.mark.parametrize("spent, prompt_tokens, max_tokens, admitted", [
    (0.0, 500, 100, True),     # 10 s reading + 50 s writing of 100 left
    (50.0, 500, 100, False),   # 60 s expected, 50 left: an answer cut off by the budget is worth nothing
    (50.0, 100, 50, True),     # 2 + 25 s
    (100.0, 1, 1, False),      # nothing left
])
def test_a_request_is_sent_only_when_its_expected_time_fits(spent: float, prompt_tokens: int, max_tokens: int,
                                                           admitted: bool) -> None:
    pace = _measured(100.0)
    pace.start(0.0)
    pace.stop(spent)
    assert pace.admits(prompt_tokens, max_tokens, clock=spent) is admitted


def test_before_the_first_answer_any_request_fits_a_budget_not_spent() -> None:
    pace = Pace(budget_s=10.0)
    assert pace.admits(10**6, 10**6, clock=0.0)
    assert Pace(budget_s=None).admits(10**6, 10**6, clock=0.0)


def test_answers_are_planned_as_long_as_the_budget_left_pays_for() -> None:
    assert Pace(budget_s=None).output_per_item(40, 300, 200, clock=0.0) == 200  # no budget: as configured
    assert Pace(budget_s=900.0).output_per_item(40, 300, 200, clock=0.0) == 200  # not measured yet
    fast = _measured(900.0, tokens_per_s=30.0)
    assert fast.output_per_item(40, 300, 200, clock=0.0) == 200
    # 2 tokens/s, 40 items of 300 prompt tokens (240 s reading): (900 - 240) * 2 / 40 = 33 tokens each,
    # below what one decision needs: the floor, and the budget decides fewer items.
    slow = _measured(900.0, tokens_per_s=2.0)
    assert slow.output_per_item(40, 300, 200, clock=0.0) == MIN_OUTPUT_PER_ITEM
    assert slow.output_per_item(5, 300, 200, clock=0.0) == 200  # (900 - 30) * 2 / 5 = 348: as planned
    assert slow.output_per_item(12, 300, 200, clock=0.0) == 138  # (900 - 72) * 2 / 12: shorter answers


def test_batches_are_small_on_a_slow_endpoint_under_a_budget() -> None:
    assert Pace(budget_s=None).items_per_batch(100, 20) == 20
    assert _measured(900.0, tokens_per_s=1.5).items_per_batch(100, 20) == 1  # 120 s pays for 180 tokens
    assert _measured(900.0, tokens_per_s=10.0).items_per_batch(100, 20) == 12
    assert _measured(900.0, tokens_per_s=100.0).items_per_batch(100, 20) == 20


def test_a_share_of_the_budget_admits_only_within_that_share() -> None:
    pace = _measured(100.0)  # 2 tokens/s, 50 prompt tokens/s
    pace.start(0.0)
    pace.stop(5.0)
    assert pace.admits(50, 6, clock=5.0, share=0.1)         # 5 s spent + 1 s reading + 3 s writing <= 10 s
    assert not pace.admits(50, 20, clock=5.0, share=0.1)    # 5 + 1 + 10 = 16 s of a 10 s share
    assert pace.admits(50, 20, clock=5.0)                   # the whole budget pays for it


def test_the_first_item_goes_alone_only_under_a_budget_before_any_answer() -> None:
    assert Pace(budget_s=900.0).measuring_first([1, 2, 3]) == ([1], [2, 3])
    assert Pace(budget_s=None).measuring_first([1, 2, 3]) == ([], [1, 2, 3])
    assert _measured(900.0).measuring_first([1, 2, 3]) == ([], [1, 2, 3])
    assert Pace(budget_s=900.0).measuring_first([]) == ([], [])
