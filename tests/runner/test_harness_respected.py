"""PyTorch's own harness loaded beside ours changes no outcome.

Every pytest testcurator starts in an upstream tree reads the tree's ``pytest.ini`` and its
``conftest.py`` files. PyTorch's ini says ``xfail_strict = True`` and ``addopts = -rEfX
--tb=native --capture=sys -p no:warnings --assert=plain``; its conftest adds options and a
JUnit reporter of its own (``--junit-xml-reruns``). A minimal reproduction of what matters
(not PyTorch's files) is written here, and the same tests run with it and without it:
the config's non-strict xfail stays non-strict, the strict one stays strict, the op capture
records the same calls, and the tree's reporter writes its XML beside ours.
"""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from testcurator.runner.command import RunSpec, pytest_argv, reference_env, run_logged, tree_options
from testcurator.runner.execute import execute

from harness_files import PYTORCH_LIKE_INI

QUIET_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio")
# What PyTorch's test/conftest.py does that could meet ours: options of its own, and a JUnit
# reporter (a LogXML of its own, registered when --junit-xml-reruns is given, not on workers).
PYTORCH_LIKE_CONFTEST = textwrap.dedent('''\
    import pytest
    from _pytest.junitxml import LogXML

    xml_key = pytest.StashKey["LogXML"]()


    def pytest_addoption(parser):
        parser.getgroup("general").addoption("--sc", action="store", default=None, dest="stepcurrent")
        parser.getgroup("terminal reporting").addoption("--junit-xml-reruns", dest="xmlpath_reruns", default=None)


    def pytest_configure(config):
        path = config.option.xmlpath_reruns
        if path and not hasattr(config, "workerinput"):
            config.stash[xml_key] = LogXML(path, None)
            config.pluginmanager.register(config.stash[xml_key])


    def pytest_unconfigure(config):
        xml = config.stash.get(xml_key, None)
        if xml:
            del config.stash[xml_key]
            config.pluginmanager.unregister(xml)
    ''')
TESTS = textwrap.dedent('''\
    import sys
    import warnings


    def test_xfail_that_passes():
        print("to stdout")
        sys.stderr.write("to stderr\\n")


    def test_xfail_that_fails():
        assert 1 == 2, "one is not two"


    def test_strict_that_passes():
        warnings.warn("careful", UserWarning)


    def test_plain():
        pass
    ''')
CONFIG = textwrap.dedent('''\
    test_suite_config:
      files:
        - path: ${TORCH_ROOT}/test/test_things.py
          unlisted_test_mode: mandatory_success
          tests:
            - names: [test_xfail_that_passes, test_xfail_that_fails]
              mode: xfail
              reason: fails on the device
            - names: [test_strict_that_passes]
              mode: xfail_strict
              reason: fails on the device, strictly
    ''')
# What the config decides, whatever the tree's xfail_strict says.
EXPECTED = {
    "test/test_things.py::test_xfail_that_passes": ("xpassed", None),
    "test/test_things.py::test_xfail_that_fails": ("xfailed", None),
    "test/test_things.py::test_strict_that_passes": ("failed", "unexpected_pass"),
    "test/test_things.py::test_plain": ("passed", None),
}
CAPTURED = textwrap.dedent('''\
    import warnings

    import torch


    def test_adds():
        x = torch.ones(3)
        assert (x + x).sum().item() == 6


    def test_warns_and_prints():
        warnings.warn("careful")
        print("hello")
        torch.zeros(2).mul_(2)
    ''')


def _tree(root: Path, harness: bool, tests: str) -> Path:
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_things.py").write_text(tests, encoding="utf-8")
    if harness:
        (root / "pytest.ini").write_text(PYTORCH_LIKE_INI, encoding="utf-8")
        (root / "test" / "conftest.py").write_text(PYTORCH_LIKE_CONFTEST, encoding="utf-8")
    return root


def _outcomes(tmp_path: Path, harness: bool, extra: tuple[str, ...] = ()) -> dict[str, tuple[str, str | None]]:
    tree = _tree(tmp_path / ("with" if harness else "without"), harness, TESTS)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    spec = RunSpec(out_dir=tree.parent / f"out-{tree.name}", config=config, torch_root=tree, timeout=60, retries=0,
                   extra_args=QUIET_PLUGINS + extra)
    return {r.nodeid: (r.outcome, r.failure_class) for r in execute(spec).records}


def test_the_configs_modes_decide_with_the_trees_harness_as_without_it(tmp_path: Path) -> None:
    assert _outcomes(tmp_path, harness=False) == EXPECTED
    # xfail_strict = True in the tree's ini: a non-strict entry still passes as xpassed.
    assert _outcomes(tmp_path, harness=True) == EXPECTED


def test_the_trees_junit_reporter_writes_beside_ours(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.xml"
    assert _outcomes(tmp_path, harness=True, extra=("--junit-xml-reruns", str(theirs))) == EXPECTED
    ours = tmp_path / "out-with" / "junit.xml"
    names = [{case.get("name") for case in ET.parse(path).getroot().iter("testcase")} for path in (theirs, ours)]
    assert names[0] == names[1] == {nodeid.split("::")[-1] for nodeid in EXPECTED}


def _captured(tmp_path: Path, harness: bool) -> dict[str, tuple[tuple[str, ...], str]]:
    tree = _tree(tmp_path / ("with" if harness else "without"), harness, CAPTURED)
    out = tree.parent / f"{tree.name}.ops.jsonl"
    argv = pytest_argv(f"--curate-capture-ops={out}", *tree_options(tree, tree.parent), "test/test_things.py")
    assert run_logged(argv, cwd=tree, env=reference_env(), log=tree.parent / f"{tree.name}.log") == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return {r["nodeid"]: (tuple(r["aten"]), r["outcome"]) for r in records if r["source"] == "captured"}


@pytest.mark.slow
def test_the_op_capture_records_the_same_calls_under_the_trees_addopts(tmp_path: Path) -> None:
    # -p no:warnings and --capture=sys: the capture records what the tests dispatch, not their output.
    without, with_harness = _captured(tmp_path, harness=False), _captured(tmp_path, harness=True)
    assert with_harness == without
    assert "aten::add.Tensor" in without["test/test_things.py::test_adds"][0]
    assert "aten::mul_.Tensor" in without["test/test_things.py::test_warns_and_prints"][0]
