"""The draft does not retry the failures of tests its CPU capture saw fail (pipelines/nightly/steps.py)."""

from __future__ import annotations

from pathlib import Path

from testcurator.memory.evidence import TestEvidence, write_evidence
from testcurator.memory.stage import EVIDENCE
from testcurator.pipelines.nightly.steps import failing_on_cpu
from testcurator.pipelines.store import RunStore
from testcurator.vocab import TestKey


def test_only_tests_every_captured_instance_of_which_failed_on_cpu_are_settled(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    f = "test/test_testing.py"
    write_evidence(store.path(EVIDENCE), {
        TestKey.of(f, "TestOpInfoSampleFunctions::test_opinfo_sample_generators"):
            TestEvidence(cpu={"a_cpu_float32": "failed", "b_cpu_float32": "error", "c_cpu_bool": "skipped"}),
        TestKey.of(f, "TestTesting::test_skipped"): TestEvidence(cpu={"a": "skipped"}),
        TestKey.of(f, "TestTesting::test_partly"): TestEvidence(cpu={"a": "failed", "b": "passed"}),
        TestKey.of(f, "TestTesting::test_passes"): TestEvidence(cpu={"a": "passed"}),
        TestKey.of(f, "TestTesting::test_never_captured"): TestEvidence(),
    })
    assert failing_on_cpu(store) == {f"{f}::TestOpInfoSampleFunctions::test_opinfo_sample_generators"}
    assert failing_on_cpu(RunStore(tmp_path / "no_memory")) == frozenset()
