"""`memory build --collect`: exact instances and the static @ops map, before any execution."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from testcurator.cli.main import main

TREE = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, ops
    from torch.testing._internal.common_methods_invocations import op_db

    OPS = [o for o in op_db if o.name in ("add", "abs") and not o.variant_test_name]

    class TestStatic(TestCase):
        @ops(OPS, allowed_dtypes=(torch.float32, torch.int64))
        def test_op(self, device, dtype, op):
            pass

        @parametrize("k", [1, 2, 3])
        @dtypes(torch.float16, torch.bfloat16)
        def test_grid(self, device, dtype, k):
            pass

        def test_plain(self, device):
            pass

    instantiate_device_type_tests(TestStatic, globals(), only_for="cpu")
    """
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("static")
    (root / "test").mkdir()
    (root / "test" / "test_static.py").write_text(TREE)
    state = root / ".state"
    rc = main(["memory", "build", "--torch-root", str(root), "--state-dir", str(state), "--no-embed", "--collect", "--format", "json"])
    assert rc == 0
    return root, state, {}


def _pytest_counts(root: Path) -> Counter[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:testcurator",
                           "test/test_static.py"], cwd=root, capture_output=True, text=True, timeout=300)
    counts: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        if "::" in line:
            name = line.split("::")[-1]
            counts[next(t for t in ("test_op", "test_grid", "test_plain") if name.startswith(t))] += 1
    return counts


@pytest.mark.slow
def test_collected_instances_match_pytest_collect_only(built: tuple[Path, Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    root, state, _ = built
    expected = _pytest_counts(root)
    assert expected == {"test_op": 4, "test_grid": 6, "test_plain": 1}
    for test, count in expected.items():
        capsys.readouterr()
        assert main(["memory", "show", f"TestStatic::{test}", "--state-dir", str(state), "--format", "json"]) == 0
        record = json.loads(capsys.readouterr().out)[0]
        assert sum(len(v) for v in record["collected"].values()) == count


def test_static_op_map_answers_before_execution(built: tuple[Path, Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    _, state, _ = built
    capsys.readouterr()
    assert main(["ops", "tests-for", "aten::abs", "--dtype", "int64", "--state-dir", str(state), "--format", "json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["nodeid"].rsplit("::", 1)[1] for h in hits] == ["test_op_abs_cpu_int64"]
    assert all(h["source"] == "static" for h in hits)
