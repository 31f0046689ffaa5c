"""Which draft tests are forked: the crash dtypes' instances, but for those known to make no crashing call."""

from __future__ import annotations

from pathlib import Path

from testcurator.memory.capability import ProbeEvidence
from testcurator.memory.opmap import InstanceCalls
from testcurator.pipelines.nightly.isolation import Isolation, crashing_ops, plan
from testcurator.vocab import TestKey

SEGV = "the process died (signal SIGSEGV)"
WHERE = "test/test_shape_ops.py::TestShapeOpsCPU::"


def _inst(test: str, dtype: str, calls: tuple[str, ...] = (), op: str | None = None) -> InstanceCalls:
    return InstanceCalls(f"{WHERE}{test}_cpu_{dtype}", f"TestShapeOps::{test}", "cpu", dtype, op, None, calls)


def _key(test: str, dtype: str) -> str:
    return f"test/test_shape_ops.py::TestShapeOps::{test}|op=|dtype={dtype}|module="


EVIDENCE = {TestKey.parse("test/test_shape_ops.py::TestShapeOps::test_nonzero"): ProbeEvidence(gaps={
    "aten::nonzero.out(float32,int64)": ("crash", SEGV),
    "aten::mm(float16,float16)": ("crash", "hang: no result after 60s"),
    "aten::frexp.Tensor_out(float32)": ("missing_kernel", "Could not run")})}


def test_only_the_ops_whose_replay_killed_the_process_count() -> None:
    assert crashing_ops(EVIDENCE) == {"aten::nonzero.out"}


def test_an_instance_known_to_make_no_crashing_call_runs_in_the_process() -> None:
    found = plan(EVIDENCE, [
        _inst("test_flip", "float32", ("aten::flip(float32)",)),
        # OpenReg: nonzero.out crashed at six dtypes in the probe and worked at int16, where
        # upstream test_nonzero crashed all the same: the op, not the dtype, marks it
        _inst("test_nonzero", "float32", ("aten::nonzero.out(float32,int64)",)),
        _inst("test_nonzero", "int16", ("aten::nonzero.out(int16,int64)",)),  # forked, though int16 is no crash dtype
        _inst("test_flip", "int8", ("aten::flip(int8)",)),  # not a crash dtype: never forked
        _inst("test_param", "float32", ("aten::add.Tensor(float32,float32)",)),
    ], [_inst("test_diag", "float32"),  # over the budget: its calls are not known
        _inst("test_param", "float32")])  # the same tier key as a known instance
    assert found == Isolation(frozenset({"float32", "int64"}), frozenset({_key("test_flip", "float32")}),
                              frozenset({_key("test_nonzero", "float32"), _key("test_nonzero", "int16")}))


def test_without_a_crash_nothing_is_isolated(tmp_path: Path) -> None:
    evidence = {key: ProbeEvidence(gaps={c: g for c, g in ev.gaps.items() if g[0] != "crash" or "hang" in g[1]})
                for key, ev in EVIDENCE.items()}
    found = plan(evidence, [_inst("test_flip", "float32", ("aten::flip(float32)",))], [])
    assert found == Isolation()
    assert found.write(tmp_path) == (None, None)
    assert list(tmp_path.iterdir()) == []


def test_the_files_list_the_keys_sorted(tmp_path: Path) -> None:
    iso = Isolation(frozenset({"float32"}), frozenset({_key("b", "float32"), _key("a", "float32")}),
                    frozenset({_key("c", "int8")}))
    known, also = iso.write(tmp_path)
    assert known.read_text() == f"{_key('a', 'float32')}\n{_key('b', 'float32')}\n"
    assert also.read_text() == f"{_key('c', 'int8')}\n"
