"""Structure and CPU outcomes of the example upstream tree (examples/upstream).

The tree is collected and run in subprocesses with testcurator's own plugin disabled, and
a small recorder plugin (written to a temp dir) reports each item's identity through
``testcurator.names.identify`` plus what the source DECLARES: the @dtypes, @parametrize,
@ops and @modules arguments, evaluated in the test module's own namespace. Expectations
are derived from those declarations and from the real op_db/module_db, never hard-coded.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "examples" / "upstream"
CONFIG = REPO / "examples" / "configs" / "example.yaml"
RECORDER = "upstream_tree_recorder"

RECORDER_SOURCE = r'''
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from testcurator.names import dtype_name, identify

_items = {}
_declared = {}
_outcomes = {}


def _eval(node, ns):
    return eval(compile(ast.fix_missing_locations(ast.Expression(node)), "<decorator>", "eval"), ns)


def _eval_args(call, ns):
    return _eval(ast.Tuple(elts=list(call.args), ctx=ast.Load()), ns)


def _kw(call, name, ns, default=None):
    for kw in call.keywords:
        if kw.arg == name:
            return _eval(kw.value, ns)
    return default


def _expected_ops(call, ns):
    from torch.testing._internal.common_device_type import OpDTypes

    op_list = _eval(call.args[0], ns)
    dtypes = _kw(call, "dtypes", ns, OpDTypes.supported)
    allowed = _kw(call, "allowed_dtypes", ns)
    out = []
    for op in op_list:
        if dtypes is OpDTypes.none:
            chosen = [None]
        else:
            chosen = set(op.supported_dtypes("cpu"))
            if allowed is not None:
                chosen &= set(allowed)
        out += [[op.name, op.variant_test_name or None, d and dtype_name(d)] for d in chosen]
    return out


def _expected_modules(call, ns):
    allowed = _kw(call, "allowed_dtypes", ns)
    out = []
    for info in _eval(call.args[0], ns):
        chosen = set(info.supported_dtypes("cpu"))
        if allowed is not None:
            chosen &= set(allowed)
        out += [[info.name, dtype_name(d), bool(info.train_and_eval_differ)] for d in chosen]
    return out


def _declarations(module):
    # What each test's decorators declare, evaluated in the module's own namespace.
    ns = vars(module)
    tree = ast.parse(Path(module.__file__).read_text())
    found = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            if not fn.name.startswith("test"):
                continue
            decl = {"decorators": [], "params": {}}
            for dec in fn.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                name = ast.unparse(call.func if call else dec)
                decl["decorators"].append(name)
                if name == "dtypes":
                    decl["dtypes"] = [dtype_name(d) for d in _eval_args(call, ns)]
                elif name == "parametrize":
                    decl["params"][_eval(call.args[0], ns)] = len(list(_eval(call.args[1], ns)))
                elif name == "ops":
                    decl["ops"] = _expected_ops(call, ns)
                elif name == "modules":
                    decl["modules"] = _expected_modules(call, ns)
            found[f"{cls.name}::{fn.name}"] = decl
    return found


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        cls = getattr(item, "cls", None)
        rec = {"path": str(Path(item.path).relative_to(config.rootpath)), "cls": None}
        if cls is not None:
            # The class attribute, not item.obj: common_utils.TestCase.__init__ rewraps the
            # bound test method, which drops the param_kwargs that identify() reads.
            ident = identify(cls, item.name)
            rec.update(cls=cls.__name__, generic=ident.generic, device=ident.device,
                       dtype=ident.dtype, op=ident.op, op_variant=ident.op_variant,
                       module=ident.module, params=[list(p) for p in ident.params])
        _items[item.nodeid] = rec
        if rec["path"] not in _declared:
            _declared[rec["path"]] = _declarations(item.module)


def pytest_runtest_logreport(report):
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and _outcomes.get(report.nodeid) != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and report.nodeid not in _outcomes:
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session, exitstatus):
    data = {"items": _items, "declared": _declared, "outcomes": _outcomes}
    Path(os.environ["UPSTREAM_TREE_RECORD"]).write_text(json.dumps(data))
'''


def _run_tree(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    (tmp / f"{RECORDER}.py").write_text(RECORDER_SOURCE)
    record = tmp / "record.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp), env.get("PYTHONPATH")]))
    env["UPSTREAM_TREE_RECORD"] = str(record)
    # The expectations (and the config's xfail modes) are those of a CPU-only machine.
    env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:testcurator", "-p", RECORDER, *args, "test"]
    proc = subprocess.run(cmd, cwd=UPSTREAM, env=env, capture_output=True, text=True, timeout=300)
    assert record.exists(), f"recorder wrote nothing; rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads(record.read_text())


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proc, data = _run_tree(tmp_path_factory.mktemp("collect"), "--collect-only")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data["stdout_ids"] = [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln]
    return data


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proc, data = _run_tree(tmp_path_factory.mktemp("run"), "-rN")
    data["returncode"] = proc.returncode
    return data


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return yaml.safe_load(CONFIG.read_text())["test_suite_config"]


def _items_of(data: dict[str, Any], path: str) -> list[dict[str, Any]]:
    return [rec for rec in data["items"].values() if rec["path"] == path]


def _defs_by_class(path: Path) -> dict[str, set[str]]:
    tree = ast.parse(path.read_text())
    return {
        c.name: {f.name for f in c.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test")}
        for c in tree.body
        if isinstance(c, ast.ClassDef)
    }


def _config_modes(config: dict[str, Any]) -> dict[tuple[str, str], str]:
    modes = {}
    for entry in config["files"]:
        path = entry["path"].replace("${TORCH_ROOT}/", "")
        for test in entry.get("tests", []):
            for name in test["names"]:
                modes[(path, name)] = test["mode"]
    return modes


@pytest.mark.slow
def test_collect_only_lists_what_the_recorder_saw(collected: dict[str, Any]) -> None:
    assert sorted(collected["stdout_ids"]) == sorted(collected["items"])
    per_file = Counter(rec["path"] for rec in collected["items"].values())
    files = [str(path.relative_to(UPSTREAM)) for path in sorted(UPSTREAM.glob("test/**/test_*.py"))]
    assert set(per_file) <= set(files)  # the glob sees every file that collected something
    for rel in files:
        # onnx/ is a module-level skip unless the onnx packages are installed.
        if "onnx" not in rel:
            assert per_file[rel] > 0, f"{rel} collected nothing"
    assert 300 <= sum(per_file.values()) <= 900


@pytest.mark.parametrize("path", ["test/test_view_ops.py", "test/test_cuda_only.py"])
def test_device_generic_items_map_to_defs(collected: dict[str, Any], path: str) -> None:
    defs = _defs_by_class(UPSTREAM / path)
    items = [r for r in _items_of(collected, path) if r["device"] == "cpu"]
    assert items
    seen = set()
    for rec in items:
        cls, test = rec["generic"].split("::")
        assert test in defs.get(cls, set()), f"{rec['generic']} is not a def in {path}"
        assert rec["cls"] == f"{cls}CPU"
        seen.add(rec["generic"])
    # Device-generic classes: every template test has at least one CPU instance.
    generic_classes = {g.split("::")[0] for g in seen}
    assert seen == {f"{c}::{t}" for c in generic_classes for t in defs[c]}


def test_view_ops_instances_match_declared_dtypes_and_params(collected: dict[str, Any]) -> None:
    path = "test/test_view_ops.py"
    declared = collected["declared"][path]
    by_generic: dict[str, list[dict[str, Any]]] = {}
    for rec in _items_of(collected, path):
        by_generic.setdefault(rec["generic"], []).append(rec)
    assert by_generic and set(by_generic) == set(declared)
    for generic, recs in by_generic.items():
        decl = declared[generic]
        dtypes = decl.get("dtypes", [None])
        assert sorted({r["dtype"] or "" for r in recs}) == sorted({d or "" for d in dtypes}), generic
        assert len(recs) == len(dtypes) * math.prod(decl["params"].values()), generic
        assert all({k for k, _ in r["params"]} == set(decl["params"]) for r in recs), generic


def test_trap_pair_is_two_distinct_generic_names(collected: dict[str, Any]) -> None:
    names = {r["generic"] for r in _items_of(collected, "test/test_view_ops.py")}
    assert {"TestViewOps::test_storage_error", "TestViewOps::test_storage_error_no_attribute"} <= names


@pytest.mark.parametrize(("path", "kind"), [("test/test_ops.py", "ops"), ("test/test_nn_modules.py", "modules")])
def test_one_instance_per_declared_pair(collected: dict[str, Any], path: str, kind: str) -> None:
    declared = collected["declared"][path]
    actual: Counter[tuple[Any, ...]] = Counter()
    for rec in _items_of(collected, path):
        key = (rec["op"], rec["op_variant"]) if kind == "ops" else (rec["module"],)
        actual[(rec["generic"], *key, rec["dtype"])] += 1
    expected: Counter[tuple[Any, ...]] = Counter()
    for generic, decl in declared.items():
        for entry in decl[kind]:
            if kind == "ops":  # [op name, variant, dtype]
                expected[(generic, *entry)] += 1
            else:  # [module name, dtype, train/eval differ]: one instance per mode if they differ
                name, dtype, differ = entry
                expected[(generic, name, dtype)] += 2 if differ else 1
    assert actual == expected


@pytest.mark.slow
def test_cuda_only_file_only_skips_on_cpu(collected: dict[str, Any], ran: dict[str, Any]) -> None:
    ids = [n for n, r in collected["items"].items() if r["path"] == "test/test_cuda_only.py"]
    assert ids
    assert {ran["outcomes"][n] for n in ids} == {"skipped"}


def test_whole_tree_fails_exactly_the_configs_xfail_entries(
    collected: dict[str, Any], ran: dict[str, Any], config: dict[str, Any]
) -> None:
    modes = _config_modes(config)
    expected_fail = {key for key, mode in modes.items() if mode in ("xfail", "xfail_strict")}
    assert expected_fail, "the example config must use xfail modes"
    failed = {(ran["items"][n]["path"], ran["items"][n].get("generic")) for n, o in ran["outcomes"].items() if o == "failed"}
    assert failed == expected_fail
    assert ran["returncode"] == 1
    assert set(ran["outcomes"]) == set(collected["items"])


def test_config_names_exist_and_mandatory_entries_pass(ran: dict[str, Any], config: dict[str, Any]) -> None:
    outcomes: dict[tuple[str, str], set[str]] = {}
    for nodeid, outcome in ran["outcomes"].items():
        rec = ran["items"][nodeid]
        outcomes.setdefault((rec["path"], rec.get("generic")), set()).add(outcome)
    modes = _config_modes(config)
    assert "mandatory_success" in modes.values()  # so the loop below checks some run outcome
    for key, mode in modes.items():
        assert key in outcomes, f"config names {key}, which the tree does not have"
        if mode == "mandatory_success":
            assert "failed" not in outcomes[key] and "passed" in outcomes[key], key


def test_config_edits_name_members_of_the_slices(collected: dict[str, Any], config: dict[str, Any]) -> None:
    ops = {r["op"] for r in collected["items"].values() if r.get("op")}
    modules = {r["module"] for r in collected["items"].values() if r.get("module")}
    seen_edits = set()
    for entry in config["files"]:
        for test in entry.get("tests", []):
            for kind, edit in (test.get("edits") or {}).items():
                seen_edits.add(kind)
                for ref in edit.get("exclude", []) + edit.get("include", []):
                    pool = {"ops": ops, "modules": modules}.get(kind)
                    if pool is not None:
                        assert ref["name"] in pool, f"{kind} edit names {ref['name']}, not in the slice"
                    if kind == "params":  # a parameter edit names a value some instance has
                        values = {v for r in collected["items"].values() if r.get("generic") == test["names"][0]
                                  for k, v in r.get("params", []) if k == ref["name"]}
                        assert values, f"params edit names {ref['name']}, which {test['names'][0]} does not take"
    declared_ops = {o["name"] for o in config["global"]["supported_ops"]}
    assert declared_ops <= ops
    assert seen_edits == {"dtypes", "ops", "modules", "params"}


def test_config_validates_and_uses_every_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    from testcurator.config.schema import ConfigDocument
    from testcurator.vocab import MODES

    monkeypatch.setenv("TORCH_ROOT", str(UPSTREAM))
    text = CONFIG.read_text()
    doc = ConfigDocument.model_validate(yaml.safe_load(text)).test_suite_config
    modes = {t.mode for f in doc.files for t in f.tests} | {f.unlisted_test_mode for f in doc.files}
    assert modes == set(MODES)
    assert doc.labels and doc.global_ and doc.global_.supported_dtypes and doc.global_.supported_ops
    assert any(op.dtypes for op in doc.global_.supported_ops)
    assert any(f.global_ is not None for f in doc.files)
    assert any(t.reason for f in doc.files for t in f.tests)
    edits = [t.edits for f in doc.files for t in f.tests if t.edits]
    assert any(e.dtypes and e.dtypes.exclude for e in edits) and any(e.dtypes and e.dtypes.include for e in edits)
    # Every entry carries its reason as a comment on the line(s) above it.
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"^\s*- names:", line)]
    assert len(starts) == sum(len(f.tests) for f in doc.files)  # every entry found, none missed
    for i in starts:
        assert lines[i - 1].strip().startswith("#"), f"entry at line {i + 1} has no reason comment"
