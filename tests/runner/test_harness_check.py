"""A tree whose own pytest harness breaks pytest is bad input, named by file and line.

PyTorch's tree brings a ``pytest.ini`` and a ``test/conftest.py`` that imports a shard helper
from ``test/``; with a helper from another commit every pytest in the tree ended in 50 lines of
``INTERNALERROR>`` around ``pytest_shard_custom.py``, line 41: no option named 'print_items'.
Each case here is a minimal tree that breaks pytest one way; the check runs a real pytest.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.runner.preflight import check_harness
from testcurator.runner.pytest_fault import pytest_fault

from harness_files import PYTORCH_LIKE_INI

# The shard helper's mistake, reproduced: its option's dest is shard_verbose, its hook reads print_items.
SHARD_HELPER = textwrap.dedent('''\
    def add_options(parser):
        parser.getgroup("shard").addoption("--print-items", dest="shard_verbose", action="store_true")


    class ShardPlugin:
        def pytest_report_collectionfinish(self, config, items):
            if config.getoption("print_items"):
                return "items"
            return "Running items"
    ''')
SHARD_CONFTEST = textwrap.dedent('''\
    from shard_helper import ShardPlugin, add_options


    def pytest_addoption(parser):
        add_options(parser)


    def pytest_configure(config):
        config.pluginmanager.register(ShardPlugin(), "shardplugin")
    ''')

# (case, files of the tree, where the error points, what it says)
BROKEN = [
    ("conftest raises at import", {"test/conftest.py": "import os\n\nraise RuntimeError('boom at import')\n"},
     "test/conftest.py:3", "RuntimeError: boom at import"),
    ("conftest does not parse", {"test/conftest.py": "import os\ndef f(:\n    pass\n"},
     "test/conftest.py:2", "SyntaxError"),
    ("a helper's option lookup fails", {"test/conftest.py": SHARD_CONFTEST, "test/shard_helper.py": SHARD_HELPER},
     "test/shard_helper.py:7", "no option named 'print_items'"),
    ("ini addopts name an unknown option", {"pytest.ini": "[pytest]\naddopts =\n    -rEfX\n    --no-such-flag\n"},
     "pytest.ini:4", "unrecognized arguments: --no-such-flag"),
    ("ini does not parse", {"pytest.ini": "[pytest\naddopts = -q\n"}, "pytest.ini:1", ""),
]


def _tree(root: Path, files: dict[str, str]) -> Path:
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_one.py").write_text("def test_one():\n    pass\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(("files", "where", "says"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_a_harness_that_breaks_pytest_is_bad_input_named_by_file_and_line(
        tmp_path: Path, files: dict[str, str], where: str, says: str) -> None:
    tree, log = _tree(tmp_path / "tree", files), tmp_path / "state" / "harness.log"
    with pytest.raises(BadInputError) as info:
        check_harness(tree, env=dict(os.environ), log=log)
    message = str(info.value)
    assert message.startswith(f"{where}: ") and says in message.splitlines()[0]
    # Short: the one line that matters and where the rest is, never pytest's traceback.
    assert len(message.splitlines()) == 2 and "INTERNALERROR" not in message and str(log) in message
    assert log.is_file() and where.split(":")[0].split("/")[-1] in log.read_text(encoding="utf-8")


def test_a_sound_harness_passes_and_a_bare_tree_starts_no_pytest(tmp_path: Path) -> None:
    sound = _tree(tmp_path / "sound", {"pytest.ini": PYTORCH_LIKE_INI, "test/conftest.py": SHARD_CONFTEST.replace(
        "from shard_helper", "from good_helper"), "test/good_helper.py": SHARD_HELPER.replace("shard_verbose", "print_items")})
    check_harness(sound, env=dict(os.environ), log=tmp_path / "sound.log")
    assert "no tests collected" in (tmp_path / "sound.log").read_text(encoding="utf-8")
    bare = _tree(tmp_path / "bare", {})
    check_harness(bare, env=dict(os.environ), log=tmp_path / "bare.log")
    assert not (tmp_path / "bare.log").exists()


@pytest.mark.parametrize(("output", "expected"), [
    ('INTERNALERROR> Traceback (most recent call last):\n'
     'INTERNALERROR>   File "/venv/site-packages/_pytest/main.py", line 283, in wrap_session\n'
     'INTERNALERROR>     session.exitstatus = doit(config, session) or 0\n'
     'INTERNALERROR>   File "/tree/test/helper.py", line 12, in pytest_sessionfinish\n'
     'INTERNALERROR>     raise KeyError("x")\n'
     'INTERNALERROR>   File "/venv/site-packages/pluggy/_callers.py", line 5, in _multicall\n'
     "INTERNALERROR> KeyError: 'x'\n", "test/helper.py:12: KeyError: 'x' (in pytest_sessionfinish)"),
    ("ImportError while loading conftest '/tree/conftest.py'.\nconftest.py:7: in <module>\n    import nope\n"
     "E   ModuleNotFoundError: No module named 'nope'\n", "conftest.py:7: ModuleNotFoundError: No module named 'nope'"),
    ("ERROR: /tree/pytest.ini:3: unexpected line: 'x'\n", "pytest.ini:3: unexpected line: 'x'"),
    ("1 passed in 0.01s\n", None),
])
def test_pytest_output_is_read_down_to_the_line_that_broke_it(output: str, expected: str | None) -> None:
    problem = pytest_fault(output, Path("/tree"))
    assert (str(problem) if problem is not None else None) == expected
