"""The fast YAML path: PyYAML's C parser with positions, and plain data from its nodes."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap

import pytest

from testcurator.config.yamlio import compose, locate, to_data
from testcurator.errors import ConfigError


@pytest.mark.parametrize(("text", "data"), [
    ("a: 1\nb: '1'\nc: true\nd: ~\ne:\nf: 1.5\n", {"a": 1, "b": "1", "c": True, "d": None, "e": None, "f": 1.5}),
    ("a: [x, \"y\", -3, 0x1f, 2001-12-14, !!str 3]\n", {"a": ["x", "y", -3, 31, datetime.date(2001, 12, 14), "3"]}),
    ("base: &b {k: 1}\nuse:\n  <<: *b\n  j: 2\n", {"base": {"k": 1}, "use": {"k": 1, "j": 2}}),
])
def test_same_data_as_pyyaml(text: str, data: object) -> None:
    import yaml

    assert to_data(compose(text, "x.yaml"), "x.yaml") == data == yaml.safe_load(text)


def test_positions_are_one_based_and_point_at_keys_or_values() -> None:
    root = compose("top:\n  items:\n    - {name: a}\n    - name: b\n      extra: 1\n", "x.yaml")
    assert str(locate(root, ("top", "items", 1, "name"), "x.yaml")) == "x.yaml:4:13"
    assert str(locate(root, ("top", "items", 1, "extra"), "x.yaml", at_key=True)) == "x.yaml:5:7"
    assert str(locate(root, ("top", "items", 0, "missing"), "x.yaml")) == "x.yaml:3:7"  # as deep as it goes


@pytest.mark.parametrize(("text", "message"), [
    ("a: 1\na: 2\n", "x.yaml:2:1: key 'a' given twice (first at line 1)"),
    ("? [k]\n: 1\n", "x.yaml:1:3: a mapping key must be a plain value"),
    ("a: [1\n", "x.yaml:2:1: YAML syntax error"),
    ("a: 1\n---\nb: 2\n", "x.yaml:2:1: YAML syntax error: expected a single document in the stream, but found another"),
])
def test_problems_carry_their_position(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        to_data(compose(text, "x.yaml"), "x.yaml")
    assert str(err.value.problems[0]).startswith(message)


def test_works_when_yaml_nodes_was_imported_afresh() -> None:
    # pytest's in-process runs (pytester) drop and re-import modules: yaml.nodes then holds
    # other classes than those the C extension builds nodes from. PyYAML's own resolver,
    # comparing classes by identity, resolved no tag at all there.
    code = textwrap.dedent("""
        import sys
        import yaml
        for name in [m for m in sys.modules if (m.startswith("yaml") or m.startswith("testcurator")) and m != "yaml._yaml"]:
            del sys.modules[name]
        from testcurator.config.yamlio import compose, to_data
        import yaml.nodes
        node = compose("top:\\n  n: 1\\n  s: [a, b]\\n  m: {<<: {k: 2}}\\n", "x.yaml")
        assert type(node) is not yaml.nodes.MappingNode  # the C extension's own copy of the class
        print(to_data(node, "x.yaml"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{'top': {'n': 1, 's': ['a', 'b'], 'm': {'k': 2}}}"
