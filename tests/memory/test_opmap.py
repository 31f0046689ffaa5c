"""OpMap: ingest capture files, reverse lookups, broken stores, and the `ops` commands."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.errors import BadInputError, Location, MemoryStoreError, MissingPathError
from testcurator.memory.opmap import OpMap
from testcurator.plugin.oprecord import OpRecord
from testcurator.vocab import normalize_op, op_base


def rec(node: str, generic: str, dtype: str | None, aten: tuple[str, ...], source: str = "captured",
        op: str | None = None) -> OpRecord:
    return OpRecord(node, generic, source, device="cpu", dtype=dtype, op=op, aten=aten, outcome="passed")


RECORDS = [
    rec("t.py::TestFooCPU::test_fn_add_cpu_float32", "TestFoo::test_fn", "float32",
        ("aten::add.Tensor", "aten::empty.memory_format"), op="add"),
    rec("t.py::TestFooCPU::test_fn_add_cpu_float16", "TestFoo::test_fn", "float16",
        ("aten::add.Tensor", "aten::add.Scalar"), op="add"),
    rec("t.py::TestFooCPU::test_fn_abs_cpu_float16", "TestFoo::test_fn", "float16", ("aten::abs",), op="abs"),
    rec("t.py::TestBarCPU::test_sum_cpu", "TestBar::test_sum", None, ("aten::sum", "aten::add_.Tensor")),
    rec("t.py::TestFooCPU::test_fn_add_cpu_float32", "TestFoo::test_fn", "float32", ("aten::add",),
        source="static", op="add"),
]


def write_jsonl(path: Path, records: list[OpRecord]) -> Path:
    path.write_text("".join(r.to_json() + "\n" for r in records))
    return path


@pytest.fixture
def opmap(tmp_path: Path) -> OpMap:
    m = OpMap(tmp_path / "state")
    m.ingest(write_jsonl(tmp_path / "ops.jsonl", RECORDS))
    yield m
    m.close()


@pytest.mark.parametrize(
    ("name", "normalized", "base"),
    [
        ("aten::add.Tensor", "aten::add.Tensor", "aten::add"),
        ("aten.add.Tensor", "aten::add.Tensor", "aten::add"),
        ("aten.relu.default", "aten::relu", "aten::relu"),
        ("aten::relu", "aten::relu", "aten::relu"),
        ("prims.convert_element_type.default", "prims::convert_element_type", "prims::convert_element_type"),
    ],
)
def test_normalize_op(name: str, normalized: str, base: str) -> None:
    assert normalize_op(name) == normalized
    assert op_base(name) == base


@pytest.mark.parametrize(
    ("query", "dtype", "expected"),
    [
        ("aten::add", None, {("test_fn_add_cpu_float32", "captured"), ("test_fn_add_cpu_float16", "captured"),
                             ("test_fn_add_cpu_float32", "static")}),
        ("aten::add", "float16", {("test_fn_add_cpu_float16", "captured")}),
        ("aten::add", "torch.float32", {("test_fn_add_cpu_float32", "captured"), ("test_fn_add_cpu_float32", "static")}),
        ("aten::add.Scalar", None, {("test_fn_add_cpu_float16", "captured")}),
        ("aten.add.Tensor", None, {("test_fn_add_cpu_float32", "captured"), ("test_fn_add_cpu_float16", "captured")}),
        ("aten::add_", None, {("test_sum_cpu", "captured")}),
        ("abs", None, {("test_fn_abs_cpu_float16", "captured")}),

        ("add", "float32", {("test_fn_add_cpu_float32", "captured"), ("test_fn_add_cpu_float32", "static")}),
        ("aten::mul", None, set()),
    ],
)
def test_tests_for(opmap: OpMap, query: str, dtype: str | None, expected: set[tuple[str, str]]) -> None:
    hits = opmap.tests_for(query, dtype=dtype)
    assert {(h.nodeid.rsplit("::", 1)[1], h.source) for h in hits} == expected


def test_a_dtype_pair_instance_is_an_instance_of_each_member(tmp_path: Path) -> None:
    pair = rec("t.py::TestBarCPU::test_set_cpu_complex64_float16", "TestBar::test_set", "complex64_float16", ("aten::abs",))
    m = OpMap(tmp_path / "state")
    m.ingest(write_jsonl(tmp_path / "ops.jsonl", [*RECORDS, pair]))
    try:
        assert {h.nodeid for h in m.tests_for("aten::abs", dtype="complex64")} == {pair.nodeid}
        assert pair.nodeid in {h.nodeid for h in m.tests_for("aten::abs", dtype="float16")}
        assert m.tests_for("aten::abs", dtype="float32") == []
    finally:
        m.close()


def test_hit_carries_identity_and_matching_overloads(opmap: OpMap) -> None:
    (hit,) = opmap.tests_for("aten::add", dtype="float16")
    assert (hit.generic, hit.device, hit.dtype, hit.op) == ("TestFoo::test_fn", "cpu", "float16", "add")
    assert hit.aten == ("aten::add.Scalar", "aten::add.Tensor")


def test_ops_for_test(opmap: OpMap) -> None:
    uses = {u.aten: (u.sources, u.instances) for u in opmap.ops_for_test("TestFoo::test_fn")}
    assert uses["aten::add.Tensor"] == (("captured",), 2)
    assert uses["aten::add"] == (("static",), 1)
    assert "aten::sum" not in uses


def test_reingest_replaces_by_nodeid(opmap: OpMap, tmp_path: Path) -> None:
    before = opmap.counts()
    opmap.ingest(write_jsonl(tmp_path / "again.jsonl", RECORDS))
    assert opmap.counts() == before
    changed = rec("t.py::TestBarCPU::test_sum_cpu", "TestBar::test_sum", None, ("aten::mul.Tensor",))
    opmap.ingest(write_jsonl(tmp_path / "changed.jsonl", [changed]))
    assert opmap.tests_for("aten::add_") == []
    assert [h.nodeid for h in opmap.tests_for("aten::mul")] == ["t.py::TestBarCPU::test_sum_cpu"]


def test_ingest_reads_worker_parts(tmp_path: Path) -> None:
    base = tmp_path / "ops.jsonl"
    write_jsonl(Path(f"{base}.gw0"), RECORDS[:2])
    write_jsonl(Path(f"{base}.gw1"), RECORDS[2:])
    m = OpMap(tmp_path)
    stats = m.ingest(base)  # FILE itself absent: its parts are enough
    assert (stats.files, stats.records, stats.captured, stats.static) == (2, 5, 4, 1)
    assert len(m.tests_for("aten::add")) == 3
    m.close()


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ops.jsonl"
    path.write_text(RECORDS[0].to_json() + "\n{not json\n" + RECORDS[1].to_json() + "\n")
    m = OpMap(tmp_path)
    with pytest.raises(BadInputError, match=r"ops\.jsonl:2: not valid JSON"):
        m.ingest(path)
    assert m.counts()["captured"] == 0  # nothing half-ingested
    m.close()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"generic": "A::b", "source": "captured"}, "missing field"),
        ({"nodeid": "x", "generic": "A::b", "source": "guessed"}, "source must be one of"),
        ({"nodeid": "x", "generic": "A::b", "source": "static", "aten": "aten::add"}, "aten must be a list"),
        ({"nodeid": "x", "generic": "A::b", "source": "captured", "rerun_s": "0.2"}, "rerun_s must be a number"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_invalid_records_are_rejected(tmp_path: Path, line: object, message: str) -> None:
    path = tmp_path / "ops.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(BadInputError, match=message):
        OpMap(tmp_path).ingest(path)


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ops.jsonl"
    path.write_text(RECORDS[0].to_json() + "\n" + RECORDS[1].to_json()[:30])
    m = OpMap(tmp_path)
    with pytest.warns(RuntimeWarning, match="truncated last line"):
        stats = m.ingest(path)
    assert (stats.records, stats.partial_lines) == (1, 1)
    m.close()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MissingPathError, match="capture file does not exist"):
        OpMap(tmp_path).ingest(tmp_path / "nope.jsonl")


def test_ingest_static_rejects_captured(tmp_path: Path) -> None:
    m = OpMap(tmp_path)
    assert m.ingest_static([RECORDS[4]]) == 1
    with pytest.raises(BadInputError, match="non-static"):
        m.ingest_static([RECORDS[0]])
    m.close()


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not sqlite at all" * 100)


def _old_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES (0)")
    conn.commit()
    conn.close()


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("damage", "why"),
    [(_garbage, "not a readable SQLite op map"), (_old_schema, "schema version 0, expected 3"),
     (_foreign_db, "no schema version")],
)
def test_unusable_store_raises_with_path_and_hint(tmp_path: Path, damage, why: str) -> None:
    damage(tmp_path / "ops.sqlite")
    with pytest.raises(MemoryStoreError, match=why) as info:
        OpMap(tmp_path).tests_for("aten::add")
    assert str(tmp_path / "ops.sqlite") in str(info.value) and "hint:" in str(info.value)


def test_cli_ingest_and_tests_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "ops.jsonl", RECORDS)
    state = str(tmp_path / "state")
    assert main(["ops", "ingest", str(path), "--state-dir", state]) == 0
    assert "5 record(s)" in capsys.readouterr().out
    assert main(["ops", "tests-for", "aten::add", "--dtype", "float16", "--state-dir", state, "--format", "json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["nodeid"] for h in hits] == ["t.py::TestFooCPU::test_fn_add_cpu_float16"]
    assert main(["ops", "for-test", "TestBar::test_sum", "--state-dir", state]) == 0
    assert capsys.readouterr().out.split() == ["aten::add_.Tensor", "captured", "1", "aten::sum", "captured", "1"]
    assert main(["ops", "ingest", str(tmp_path / "missing.jsonl"), "--state-dir", state]) == 2


def test_cli_state_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TESTCURATOR_STATE_DIR", str(tmp_path / "env-state"))
    assert main(["ops", "ingest", str(write_jsonl(tmp_path / "ops.jsonl", RECORDS))]) == 0
    assert (tmp_path / "env-state" / "ops.sqlite").is_file()
    capsys.readouterr()
    assert main(["ops", "tests-for", "abs"]) == 0
    assert "test_fn_abs_cpu_float16" in capsys.readouterr().out


def test_reading_before_any_ingest_creates_nothing(tmp_path: Path) -> None:
    m = OpMap(tmp_path / "state")
    assert m.tests_for("aten::add") == [] and m.ops_for_test("A::test_b") == []
    assert not (tmp_path / "state").exists()


def test_a_batch_naming_one_record_twice_keeps_the_last(tmp_path: Path) -> None:
    first = rec("t.py::TestBarCPU::test_sum_cpu", "TestBar::test_sum", None, ("aten::sum",))
    last = rec("t.py::TestBarCPU::test_sum_cpu", "TestBar::test_sum", None, ("aten::mul.Tensor",))
    m = OpMap(tmp_path)
    m.ingest(write_jsonl(tmp_path / "twice.jsonl", [first, last, RECORDS[0]]))
    assert m.tests_for("aten::sum") == []
    assert [h.nodeid for h in m.tests_for("aten::mul")] == ["t.py::TestBarCPU::test_sum_cpu"]
    assert m.counts()["captured"] == 2
    m.close()


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_map_gains_the_call_tables_in_place(tmp_path: Path, version: int) -> None:
    from testcurator.memory import opmap as opmap_module

    missing = {1: opmap_module._CALLS + opmap_module._RAISED, 2: opmap_module._RAISED}[version]
    old = opmap_module._SCHEMA.replace(missing, "").replace(
        f"SELECT {opmap_module.SCHEMA_VERSION} WHERE", f"SELECT {version} WHERE")
    conn = sqlite3.connect(tmp_path / "ops.sqlite")
    conn.executescript(old)
    assert "record_raised" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.execute("INSERT INTO records (node_id, source, generic) VALUES ('t.py::T::test_a_cpu', 'captured', 'T::test_a')")
    conn.commit()
    conn.close()
    opmap = OpMap(tmp_path)
    assert opmap.calls() == {}  # readable, and the old records are still there
    assert opmap.counts()["captured"] == 1
    assert [i.raised for i in opmap.instance_calls()] == [()]
    assert opmap.conn.execute("SELECT version FROM schema_version").fetchone() == (opmap_module.SCHEMA_VERSION,)
    opmap.close()


def _dump(opmap: OpMap) -> tuple[list[tuple[object, ...]], ...]:
    """Everything the map holds, ids replaced by node id and source (ids are internal)."""
    conn = opmap.conn
    return (
        conn.execute("SELECT node_id, source, generic, device, dtype, op, module, outcome, error FROM records "
                     "ORDER BY node_id, source").fetchall(),
        conn.execute("SELECT r.node_id, r.source, o.aten, o.aten_base FROM record_ops o JOIN records r ON r.id = o.record_id "
                     "ORDER BY 1, 2, 3").fetchall(),
        conn.execute("SELECT r.node_id, r.source, c.call FROM record_calls c JOIN records r ON r.id = c.record_id "
                     "ORDER BY 1, 2, 3").fetchall(),
        conn.execute("SELECT call, example FROM call_examples ORDER BY call").fetchall(),
        conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name").fetchall(),
    )


def _many(n: int, tag: str) -> list[OpRecord]:
    return [OpRecord(f"t{i % 7}.py::TestFooCPU::test_fn_{i}_cpu_float32", f"TestFoo::test_fn_{i}", source,
                     device="cpu", dtype="float32", op="add", outcome="passed" if source == "captured" else None,
                     aten=(f"aten::op{i % 13}.Tensor", f"aten::{tag}{i % 5}"), calls=(f"aten::op{i % 13}.Tensor(float32)",),
                     examples={f"aten::op{i % 13}.Tensor(float32)": "{}"} if source == "captured" else {})
            for i in range(n) for source in ("static", "captured")]


@pytest.mark.parametrize("bulk", [0, 10**9], ids=["bulk", "row-wise"])
def test_a_bulk_ingest_stores_what_a_row_wise_one_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        bulk: int) -> None:
    """A large batch drops and rebuilds the secondary indexes; the map ends up the same,
    first ingest and re-ingest (replacing records) alike, and keeps every index."""
    import testcurator.memory.opmap as opmap_module

    monkeypatch.setattr(opmap_module, "BULK_RECORDS", bulk)
    bulk_map = OpMap(tmp_path / "a")
    for batch in (_many(300, "x"), _many(120, "y"), RECORDS):
        bulk_map.store(batch)
    monkeypatch.setattr(opmap_module, "BULK_RECORDS", 10**9)
    rowwise = OpMap(tmp_path / "b")
    for batch in (_many(300, "x"), _many(120, "y"), RECORDS):
        rowwise.store(batch)
    assert _dump(bulk_map) == _dump(rowwise)
    assert {name for name, _ in _dump(bulk_map)[-1]} >= set(opmap_module._INDEXES)
    assert bulk_map.tests_for("aten::y3") == rowwise.tests_for("aten::y3") != []


def test_a_bulk_ingest_that_fails_leaves_the_map_and_its_indexes_as_they_were(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import testcurator.memory.opmap as opmap_module

    monkeypatch.setattr(opmap_module, "BULK_RECORDS", 0)
    opmap = OpMap(tmp_path)
    opmap.store(_many(50, "x"))
    before = _dump(opmap)
    broken = _many(60, "z") + [OpRecord("t.py::T::test_bad", None, "captured")]  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):  # generic is NOT NULL: the last insert fails
        opmap.store(broken)
    assert _dump(opmap) == before


@pytest.mark.parametrize("rerun_s", [None, 0.25])
def test_a_records_rerun_time_round_trips_and_is_left_out_when_none(rerun_s: float | None) -> None:
    record = OpRecord("t.py::A::b", "A::b", "captured", outcome="failed", rerun_s=rerun_s)
    line = record.to_json()
    assert ("rerun_s" in json.loads(line)) is (rerun_s is not None)
    assert OpRecord.from_json(json.loads(line), Location("t.jsonl", 1)) == record
