"""The memory stage's hand-off to the bucket stage: typed evidence, gathered and round-tripped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.memory.evidence import TestEvidence, gather, read_evidence, write_evidence
from testcurator.plugin.oprecord import OpRecord
from testcurator.vocab import TestKey

OPS = "test/test_ops.py"
RECORDS = [
    OpRecord(f"{OPS}::TestCommonCPU::test_out_add_cpu_float32", "TestCommon::test_out", "static", "cpu", "float32", "add",
             aten=("aten::add",)),
    OpRecord(f"{OPS}::TestCommonCPU::test_out_add_cpu_float32", "TestCommon::test_out", "captured", "cpu", "float32",
             "add", aten=("aten::add.out", "aten::empty"), outcome="passed"),
    OpRecord(f"{OPS}::TestCommonCPU::test_out_mul_cpu_int64", "TestCommon::test_out", "captured", "cpu", "int64", "mul",
             aten=("aten::mul.out",), outcome="failed", failure="AssertionError: Tensor-likes are not equal!"),
    OpRecord(f"{OPS}::test_plain", "test_plain", "static"),
]


def test_gather_folds_instances_into_one_record_per_generic_test() -> None:
    evidence = gather(RECORDS)
    assert list(evidence) == [TestKey(OPS, "", "test_plain"), TestKey(OPS, "TestCommon", "test_out")]
    out = evidence[TestKey.parse(f"{OPS}::TestCommon::test_out")]
    assert out.ops == ("add", "mul") and out.dtypes == ("float32", "int64") and out.modules == ()
    # Static records name the OpInfo's aten op; only captured ones say what ran on CPU.
    assert out.aten == ("aten::add.out", "aten::empty", "aten::mul.out")
    assert out.cpu == {f"{OPS}::TestCommonCPU::test_out_add_cpu_float32": "passed",
                       f"{OPS}::TestCommonCPU::test_out_mul_cpu_int64": "failed"}
    assert len(out.instances) == 2
    assert out.cpu_failure == "AssertionError: Tensor-likes are not equal!"
    assert out.cpu_failed == (("int64", "mul", ""),)  # what a rule needs to tell whether an edit leaves it out
    assert TestEvidence.from_json(json.loads(json.dumps(out.to_json()))) == out


def test_gather_keeps_the_calls_made_on_another_layout_by_op_and_marker() -> None:
    # The record's layouts were read where its calls were made (plugin/capture.py), by
    # callspec.layout_op; gather reads them, and imports no torch for them.
    rec = OpRecord("test/nn/test_embedding.py::TestEmbeddingNNDeviceTypeCPU::test_bag_cpu_float32",
                   "TestEmbeddingNNDeviceType::test_bag", "captured", "cpu", "float32", aten=("aten::_embedding_bag_backward",), outcome="passed",
                   calls=("aten::_embedding_bag_backward[sparse_coo](float32,int64)", "aten::_indices[sparse_coo](float32)"),
                   layouts=("aten::_indices[sparse_coo]",))
    assert OpRecord.from_json(json.loads(rec.to_json()), "x") == rec
    [evidence] = gather([rec]).values()
    assert evidence.layouts == ("aten::_indices[sparse_coo]",)
    assert evidence.aten == ("aten::_embedding_bag_backward",)
    assert TestEvidence.from_json(json.loads(json.dumps(evidence.to_json()))) == evidence


def test_gather_lists_each_member_of_a_dtype_pair() -> None:
    """Rails and bucket rules read evidence dtypes one by one: a pair is two dtypes."""
    pair = OpRecord("test/test_view_ops.py::TestViewOpsCPU::test_set_cpu_complex64_float32", "TestViewOps::test_set",
                    "static", "cpu", "complex64_float32")
    [evidence] = gather([pair]).values()
    assert evidence.dtypes == ("complex64", "float32")


def test_write_then_read_round_trips_and_keeps_the_file_format(tmp_path: Path) -> None:
    path = write_evidence(tmp_path / "evidence.json", gather(RECORDS))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(data[f"{OPS}::TestCommon::test_out"]) == ["aten", "cpu", "cpu_failed", "cpu_failure", "dtypes",
                                                            "instances", "layouts", "modules", "ops"]
    assert "cpu_failure" not in data[f"{OPS}::test_plain"]  # only when a CPU instance failed
    assert read_evidence(path) == gather(RECORDS)


def test_missing_evidence_is_empty_and_broken_evidence_is_bad_input(tmp_path: Path) -> None:
    assert read_evidence(tmp_path / "absent.json") == {}
    (tmp_path / "evidence.json").write_text("{", encoding="utf-8")
    with pytest.raises(BadInputError, match="evidence.json:1:2"):
        read_evidence(tmp_path / "evidence.json")
    assert TestEvidence() == TestEvidence.from_json({})


def test_evidence_is_written_one_test_per_line_with_the_same_json_value(tmp_path: Path) -> None:
    evidence = gather(RECORDS)
    path = write_evidence(tmp_path / "evidence.json", evidence)
    text = path.read_text(encoding="utf-8")
    # The value the indented form had (keys sorted at every level), in the same key order...
    before = json.dumps({str(k): v.to_json() for k, v in evidence.items()}, indent=1, sort_keys=True)
    assert json.loads(text) == json.loads(before)
    assert list(json.loads(text)) == list(json.loads(before))
    # ...compact: one line per test between the braces, each a whole "key": value pair.
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and len(lines) == len(evidence) + 2
    assert [json.loads("{" + line.rstrip(",") + "}") for line in lines[1:-1]] == [
        {k: v} for k, v in json.loads(before).items()]
    assert read_evidence(path) == evidence
    assert write_evidence(tmp_path / "empty.json", {}).read_text(encoding="utf-8") == "{}\n"
