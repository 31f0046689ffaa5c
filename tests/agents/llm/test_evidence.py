"""What the model reads of a request (agents/llm/evidence.py): the same facts, fewer tokens."""

from __future__ import annotations

import json

import pytest

from testcurator.agents.brain import BucketRequest, ExecutionRecord, RefineRequest, request_json
from testcurator.agents.llm.evidence import ERROR_CHARS, bucket_view, fold_gaps, short_error, view
from testcurator.memory.capability import ProbedInstance, ProbeEvidence

DISPATCH = ("NotImplementedError: Could not run 'aten::native_batch_norm' with arguments from the 'dev' backend. "
            "This could be because the operator doesn't exist for this backend, or was omitted during the selective build. " * 3)
PROBE = ProbeEvidence(
    gaps={"aten::abs(float64)": ("unsupported_dtype", "NotImplementedError: \"abs\" not implemented for 'Double'"),
          "aten::native_layer_norm(float32)": ("missing_kernel", DISPATCH),
          "aten::native_layer_norm(float32,float32)": ("missing_kernel", DISPATCH),
          "aten::native_layer_norm(float64)": ("missing_kernel", DISPATCH)},
    instances=(ProbedInstance("float32", None, "nn.LayerNorm", ("aten::native_layer_norm(float32)",)),
               ProbedInstance("float32", None, "nn.ReLU", ()),
               ProbedInstance("float64", None, "nn.ReLU", ("aten::abs(float64)",))),
    works=12)
REQUEST = BucketRequest("TestM::test_forward", "test/test_m.py", "0123abcd", summary="forward of each module",
                        aten_ops=("aten::abs", "aten::native_layer_norm"), dtypes=("float32", "float64"),
                        modules=("nn.LayerNorm", "nn.ReLU"), probe=PROBE, cpu_outcomes=("passed", "passed", "failed"),
                        cpu_failure="AssertionError: Tensor-likes are not close!")


def test_the_probe_is_folded_per_op_with_its_dtypes_and_the_errors_first_sentence() -> None:
    shown = bucket_view(REQUEST)["probe"]
    assert shown["gaps"] == {
        "aten::abs": "unsupported_dtype (float64)",  # the status says it: no message
        "aten::native_layer_norm": "missing_kernel (float32, float64): Could not run 'aten::native_batch_norm' with "
                                   "arguments from the 'dev' backend",
    }
    assert shown["instances_with_gaps"] == {"dtype float32": "1 of 2", "dtype float64": "1 of 1",
                                            "module nn.LayerNorm": "1 of 1", "module nn.ReLU": "1 of 2"}
    assert shown["calls_working"] == 12 and "calls_not_probed" not in shown


def test_the_view_keeps_the_facts_and_drops_what_only_the_machinery_reads() -> None:
    shown = bucket_view(REQUEST)
    assert "content_hash" not in shown and "similar" not in shown and "ops" not in shown  # empty or machinery-only
    assert shown["cpu_outcomes"] == "1 failed, 2 passed" and shown["cpu_failure"].startswith("AssertionError")
    assert {k: shown[k] for k in ("test", "file", "summary", "aten_ops", "dtypes", "modules")} == {
        k: v for k, v in request_json(REQUEST).items() if k in ("test", "file", "summary", "aten_ops", "dtypes", "modules")}
    # What the model reads is a fraction of the whole request (the repeated dispatcher message).
    assert len(json.dumps(shown)) < len(json.dumps(request_json(REQUEST))) / 2


def test_a_refine_request_shows_its_bucket_evidence_viewed_and_its_results_whole() -> None:
    record = ExecutionRecord("test_forward_nn_ReLU_dev_float64", ("failed",), "float64", failure_class="dtype_unsupported")
    shown = view(RefineRequest(REQUEST, None, (record,)))
    assert shown["request"] == bucket_view(REQUEST)
    assert shown["executions"] == request_json(RefineRequest(REQUEST, None, (record,)))["executions"]


@pytest.mark.parametrize("status, error, expected", [
    ("unsupported_dtype", "NotImplementedError: anything", ""),
    ("error", "RuntimeError: Attempted to set the storage. More text here.", "Attempted to set the storage"),
    ("crash", "", ""),
    ("wrong_result", "torch.testing.AssertionError: Tensor-likes are not close!\nMismatched elements: 3", "Tensor-likes are not close!"),
])
def test_an_error_is_cut_to_its_first_sentence(status: str, error: str, expected: str) -> None:
    assert short_error(status, error) == expected


def test_a_long_first_sentence_is_cut_with_an_ellipsis() -> None:
    cut = short_error("error", "RuntimeError: " + "x" * 500)
    assert len(cut) == ERROR_CHARS and cut.endswith("...")


def test_an_op_failing_two_ways_keeps_both() -> None:
    folded = fold_gaps({"aten::mm(float64,float64)": ("unsupported_dtype", ""), "aten::mm(float32,float32)": ("wrong_result", "off by one")})
    assert folded == {"aten::mm": "wrong_result (float32): off by one; unsupported_dtype (float64)"}  # in call order
