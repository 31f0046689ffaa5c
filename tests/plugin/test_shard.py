"""--curate-shard on real device-generic tests: disjoint shards, config skips cost nothing."""

from __future__ import annotations

import json
import re

import pytest

CONFIG = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test_foo.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [TestFoo::test_op]
          mode: skip
"""


def _ran(result: pytest.RunResult) -> dict[str, str]:
    out = {}
    for line in result.outlines:
        m = re.match(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _shard(pytester: pytest.Pytester, ref: str, *extra: str) -> pytest.RunResult:
    config = pytester.path / "curate.yaml"
    config.write_text(CONFIG)
    return pytester.runpytest("-p", "no:cacheprovider", f"--curate-config={config}",
                              f"--curate-torch-root={pytester.path}", f"--curate-shard={ref}", "-v", *extra)


def test_shards_are_disjoint_and_cover_everything(generic_file: pytest.Pytester) -> None:
    whole = generic_file.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    collected = {line for line in whole.outlines if "::" in line}
    per_shard = [_ran(_shard(generic_file, f"{k}/3")) for k in (1, 2, 3)]
    names = [n for shard in per_shard for n in shard]
    assert len(names) == len(set(names))  # disjoint
    assert set(names) == collected  # lossless
    # The skipped @ops instances are dealt round-robin, not balanced: each shard has some.
    skipped = [{n for n, o in shard.items() if o == "SKIPPED"} for shard in per_shard]
    assert all(skipped)
    assert sum(map(len, skipped)) == sum(1 for n in collected if "test_op_" in n)


def test_durations_drive_the_split(generic_file: pytest.Pytester) -> None:
    slow = "test_foo.py::TestFooCPU::test_bar_cpu_float32"
    durations = generic_file.path / ".test_durations"
    known = {line: 0.01 for line in generic_file.runpytest("--collect-only", "-q").outlines if "::" in line}
    known[slow] = 60.0
    durations.write_text(json.dumps(known))
    results = [_shard(generic_file, f"{k}/2", f"--curate-durations={durations}") for k in (1, 2)]
    alone = [r for r in results if slow in _ran(r)]
    assert len(alone) == 1
    assert [n for n, o in _ran(alone[0]).items() if o != "SKIPPED"] == [slow]
    assert "expected 60.0 s" in alone[0].stdout.str()


def test_each_shard_writes_its_plan(generic_file: pytest.Pytester) -> None:
    collected = {line for line in generic_file.runpytest("--collect-only", "-q").outlines if "::" in line}
    plans = []
    for k in (1, 2):
        out = generic_file.path / f"plan-{k}.json"
        ran = _ran(_shard(generic_file, f"{k}/2", f"--curate-shard-plan={out}"))
        plans.append(json.loads(out.read_text()))
        assert set(plans[-1]["kept"]) == set(ran) and plans[-1]["shard"] == f"{k}/2"
        assert set(plans[-1]["kept"]) | set(plans[-1]["deselected"]) == collected
        assert plans[-1]["collected"] == len(collected) and plans[-1]["durations_sha256"] is None
    assert plans[0]["collected_sha256"] == plans[1]["collected_sha256"]
    assert set(plans[0]["kept"]) == set(plans[1]["deselected"])


@pytest.mark.parametrize(("args", "message"), [
    (["--curate-shard=3/2"], "1 <= K <= N"),
    (["--curate-shard=x"], "expected K/N"),
    (["--curate-shard=1/2", "--curate-durations=nope.json"], "durations file does not exist"),
])
def test_bad_values_fail_at_parse_time(generic_file: pytest.Pytester, args: list[str], message: str) -> None:
    result = generic_file.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
