"""One vocabulary of options: every command takes its options from ``cli/options.py``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from testcurator.cli.commands import bound
from testcurator.cli.main import app, main
from testcurator.cli.options import REGISTRY, STATE_DIR, TIMEOUT, TORCH_ROOT, WORKERS, Opt, OutDir


def commands() -> Iterator[tuple[str, Any]]:
    """(command path, click command) for every leaf command."""
    def walk(path: str, cmd: Any) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(f"{path} {name}", sub)
        else:
            yield path, cmd

    yield from walk("testcurator", typer.main.get_command(app))


ALL = list(commands())
PARAMS = [(path, p) for path, cmd in ALL for p in cmd.params]


def _matches(param: Any, opt: Opt) -> bool:
    if opt.argument != (param.param_type_name == "argument"):
        return False
    if opt.argument:
        return param.metavar == opt.metavar and param.help == opt.help
    opts, secondary = [], []
    for decl in opt.decls:
        first, _, second = decl.partition("/")
        opts.append(first)
        if second:
            secondary.append(second)
    return (sorted(param.opts) == sorted(opts) and param.secondary_opts == secondary and param.help == opt.help
            and (param.metavar or None) == opt.metavar and param.envvar == opt.envvar
            and bound(param, "min") == opt.min and bound(param, "max") == opt.max
            and param.hidden == opt.hidden)


def test_every_command_is_found() -> None:
    paths = {p for p, _ in ALL}
    assert {"testcurator validate", "testcurator exec", "testcurator run", "testcurator review", "testcurator upgrade",
            "testcurator enable-op", "testcurator memory build", "testcurator ops tests-for",
            "testcurator import skiplist", "testcurator export disabled-tests"} <= paths


@pytest.mark.parametrize(("path", "param"), PARAMS, ids=[f"{p} {x.name}" for p, x in PARAMS])
def test_every_parameter_is_a_registered_definition(path: str, param: Any) -> None:
    candidates = [o for variants in REGISTRY.values() for o in variants]
    assert any(_matches(param, o) for o in candidates), (
        f"{path}: {param.opts or param.name} is declared outside cli/options.py or differs from its definition there")


def test_shared_options_have_one_meaning_each() -> None:
    # Where two commands share an option name, it is the same definition unless the registry
    # lists a variant for a different meaning (--out DIR vs --out FILE).
    by_name: dict[str, set[int]] = {}
    for _, param in PARAMS:
        if param.param_type_name == "option":
            opt = next(o for v in REGISTRY.values() for o in v if _matches(param, o))
            by_name.setdefault(max(param.opts, key=len), set()).add(id(opt))
    shared = {name: ids for name, ids in by_name.items() if len(ids) > 1}
    assert set(shared) <= {"--out", "--backend", "--device", "--format", "--platform"}, shared
    for name in ("--torch-root", "--state-dir", "--workers", "--timeout", "--retries", "--embed", "--config"):
        assert len(by_name[name]) == 1, name


@pytest.mark.parametrize(("opt", "commands_min"), [(TORCH_ROOT, 8), (STATE_DIR, 9), (WORKERS, 4), (TIMEOUT, 4)])
def test_common_options_everywhere_with_env_and_bounds(opt: Opt, commands_min: int) -> None:
    users = [path for path, param in PARAMS if param.param_type_name == "option" and _matches(param, opt)]
    assert len(users) >= commands_min, users
    assert "testcurator exec" in users or opt is not STATE_DIR


def test_timeout_bounds_and_defaults_agree() -> None:
    timeouts = [p for _, p in PARAMS if "--timeout" in p.opts]
    assert {(bound(p, "min"), bound(p, "max"), p.default) for p in timeouts} == {(0, None, 300.0)}


HELP_PLACEHOLDERS = re.compile(r"<bool>|<list\[|<path>|<str>|<int|<float|\{[a-z_.]+\}")


@pytest.mark.parametrize("path", [p for p, _ in ALL] + ["testcurator", "testcurator memory", "testcurator ops"])
def test_help_has_no_type_placeholders(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path.split()[1:], "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Usage: {path} [OPTIONS]")
    assert not HELP_PLACEHOLDERS.search(out), HELP_PLACEHOLDERS.search(out)


def test_torch_root_env_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # memory build requires a torch root: $TORCH_ROOT satisfies it (the error is then about the path itself).
    monkeypatch.setenv("TORCH_ROOT", str(tmp_path / "no-such-tree"))
    assert main(["memory", "build", "--state-dir", str(tmp_path / "s"), "--no-embed"]) == 2
    err = capsys.readouterr().err
    assert "Missing option" not in err and "no-such-tree" in err


def test_deprecated_spellings_warn_and_still_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "a.yaml"
    cfg.write_text("test_suite_config:\n  files: []\n")
    out = tmp_path / "review.md"
    assert main(["review", str(cfg), str(cfg), "--format", "markdown", "-o", str(out)]) == 0
    assert "warning: -o/--output is deprecated; use --out" in capsys.readouterr().err
    assert out.read_text().startswith("## testcurator config review")


def test_exec_state_dir_supplies_the_torch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from testcurator.cli.groups.exec import _memory_torch_root

    tree = tmp_path / "upstream"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_a.py").write_text("def test_one():\n    pass\n")
    state = tmp_path / "state"
    monkeypatch.delenv("TESTCURATOR_STATE_DIR", raising=False)
    assert _memory_torch_root(state) is None  # no memory there yet
    assert main(["memory", "build", "--torch-root", str(tree), "--state-dir", str(state), "--no-embed"]) == 0
    assert _memory_torch_root(state) == tree.resolve()
    monkeypatch.setenv("TESTCURATOR_STATE_DIR", str(state))  # the environment variable says the same
    assert _memory_torch_root(None) == tree.resolve()


# Path-like placeholders that are not paths the caller names: relative to something else on
# purpose (the torch root, the backend repository), revision sides, or a word ('latest').
NOT_CALLER_PATHS = {"--test-file", "arg:OLD", "arg:NEW", "arg:RUN_DIR", "arg:[TEST]...", "--backend"}


def test_every_path_option_is_made_absolute_at_parse_time() -> None:
    """Issue 9: a relative --out once named files pytest (running in the torch root) could not find."""
    for key, opts in REGISTRY.items():
        for opt in opts:
            if (opt.metavar or "").rstrip(".") in ("DIR", "FILE", "PATH") and key not in NOT_CALLER_PATHS:
                assert opt.path, f"{key} ({opt.metavar}) is not made absolute"
    seen: list[Path] = []
    probe = typer.Typer()

    @probe.command()
    def record(out: OutDir = None) -> None:
        seen.append(out)

    assert CliRunner().invoke(probe, ["--out", "rel/out"]).exit_code == 0
    assert seen == [Path.cwd() / "rel" / "out"]
    # exec's --backend: a profile path is made absolute, a module name is kept.
    backend = next(o for o in REGISTRY["--backend"] if o.check is not None)
    assert backend.make().callback("json") == "json"
    with pytest.raises(typer.BadParameter, match="neither a backend profile"):
        backend.make().callback("no_such_module_anywhere")
