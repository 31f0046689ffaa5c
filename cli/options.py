"""Every option and argument of the ``testcurator`` command, declared once.

One vocabulary across commands: the same name, short flag, bounds, help text, value
placeholder and environment variable wherever an option appears (``--torch-root`` always
honours ``$TORCH_ROOT``, ``--state-dir`` always ``$TESTCURATOR_STATE_DIR``, ``--timeout``
always accepts 0 for "no limit"...). Command modules import the ``Annotated`` aliases below
and never call ``typer.Option`` themselves; ``tests/cli/test_options.py`` walks the whole
command tree and fails when a parameter does not match its entry in :data:`REGISTRY`.

An option whose value means something different in two places (``--out`` is a folder for
``run`` and a file for ``review``) has one registered *variant* per meaning, under the same
name. Old spellings (``review --output/-o``, ``memory build -j/--jobs``, ``--json``) are
hidden, print a deprecation warning, and map onto the new option (:func:`take_deprecated`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from testcurator.cli.commands import usage_error
from testcurator.cli.paths import PathKind, check_path
from testcurator.memory.paths import STATE_DIR_ENV
from testcurator.vocab import HELD_BACK_MODES, MODES

TORCH_ROOT_ENV = "TORCH_ROOT"


@dataclass(frozen=True)
class Opt:
    """One option (or argument) as the user sees it."""

    decls: tuple[str, ...]  # ("-n", "--workers"); a flag pair is "--embed/--no-embed"
    help: str
    metavar: str | None = None  # the value's placeholder; None for flags
    envvar: str | None = None
    min: float | None = None
    max: float | None = None
    hidden: bool = False
    argument: bool = False
    choices: tuple[str, ...] = ()  # checked by a callback (a usage error, exit 2)
    path: bool = False  # a path: made absolute at parse time (relative to the caller's cwd)
    kind: PathKind | None = None  # what the path must name, checked at parse time (cli/paths.py)
    noun: str | None = None  # what the path is, in the message of that check ("torch root")
    check: Callable[[Any], Any] | None = None  # parse-time check and conversion of the value

    @property
    def key(self) -> str:
        """How the registry and the help refer to it: its longest spelling."""
        return max((d.split("/")[0] for d in self.decls), key=len) if self.decls else self.metavar or "?"

    def make(self) -> Any:
        callback = self.check or (_choice_check(self.choices) if self.choices else None)
        if self.path:
            callback = _absolute_paths(callback, self.kind, self.noun)
        if self.argument:
            return typer.Argument(help=self.help, metavar=self.metavar, callback=callback, show_default=False)
        return typer.Option(*self.decls, help=self.help, metavar="" if self.metavar is None else self.metavar,
                            envvar=self.envvar, show_envvar=self.envvar is not None, min=self.min, max=self.max,
                            hidden=self.hidden, callback=callback)


def _choice_check(choices: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        # A repeatable option's value is a list: every item must be a choice.
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item is not None and item not in choices:
                raise typer.BadParameter(f"{item!r} is not one of {', '.join(choices)}")
        return value

    return check


def _absolute_paths(then: Callable[[Any], Any] | None, kind: PathKind | None, noun: str | None) -> Callable[..., Any]:
    """Make a path value (or each of a list) absolute against the caller's cwd, at parse time:
    commands hand paths to processes that run elsewhere (pytest runs in the torch root);
    then check it against ``kind`` (:func:`testcurator.cli.paths.check_path`)."""
    def absolute(ctx: Any, param: Any, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            value = [_absolute(v) for v in value]
        else:
            value = _absolute(value)
        if kind is not None:
            default = ctx.get_parameter_source(param.name).name.startswith("DEFAULT")
            for item in value if isinstance(value, list) else [value]:
                if item not in (None, ""):
                    check_path(Path(item), kind, default=default, noun=noun)
        return then(value) if then is not None else value

    return absolute


def _absolute(value: Any) -> Any:
    if value is None or value == "":
        return value
    path = Path(str(value)).expanduser()
    absolute = path if path.is_absolute() else Path(os.path.abspath(path))
    return absolute if isinstance(value, Path) else str(absolute)


def _backend_value(value: Any) -> Any:
    """``--backend`` of exec: a backend profile (a YAML file), else a module that imports."""
    if value is None:
        return value
    text = str(value)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or path.is_file() or path.is_dir():
        if path.is_dir():
            raise typer.BadParameter(f"{text} is a folder; a backend profile (backend.yaml) or a module is expected")
        if not path.exists():
            raise typer.BadParameter(f"backend profile {text} does not exist")
        return str(path.resolve())
    import importlib.util

    module = text.partition(":")[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise typer.BadParameter(f"{text!r} is neither a backend profile (no such file) nor an importable module")
    return text


REGISTRY: dict[str, list[Opt]] = {}


def _opt(*decls: str, help: str, metavar: str | None = None, **kw: Any) -> Opt:
    opt = Opt(tuple(decls), help, metavar, **{"path": kw.get("kind") is not None, **kw})
    REGISTRY.setdefault(opt.key, []).append(opt)
    return opt


def _arg(metavar: str, help: str, **kw: Any) -> Opt:
    opt = Opt((), help, metavar, argument=True, **{"path": kw.get("kind") is not None, **kw})
    REGISTRY.setdefault(f"arg:{metavar}", []).append(opt)
    return opt


# --- where things are -----------------------------------------------------------------------
TORCH_ROOT = _opt("--torch-root", metavar="DIR", kind=PathKind.DIR_IN, noun="torch root", envvar=TORCH_ROOT_ENV,
                  help="Upstream PyTorch checkout (holds test/); also the value of ${TORCH_ROOT} in config paths.")
OLD_ROOT = _opt("--old-root", metavar="DIR", kind=PathKind.DIR_IN, noun="torch root",
               help="The upstream tree the config was made for.")
NEW_ROOT = _opt("--new-root", metavar="DIR", kind=PathKind.DIR_IN, noun="torch root",
               help="The upstream tree to move the config to.")
STATE_DIR = _opt("--state-dir", metavar="DIR", kind=PathKind.DIR_OUT, envvar=STATE_DIR_ENV,
                 help="Memory, caches and checkpoints (default: ./.testcurator).")
CONFIG = _opt("--config", metavar="PATH", kind=PathKind.PATH_IN, noun="config path",
              help="A config: one YAML file or a directory of them.")
BACKEND = _opt("--backend", metavar="FILE", kind=PathKind.FILE_IN, noun="backend profile",
               help="The backend profile (backend.yaml).")
# exec: the profile as everywhere else (module, device, python path, env); a bare importable
# module (no profile) is accepted for runs made without one.
BACKEND_EXEC = _opt("--backend", metavar="FILE", check=_backend_value,
                    help="The backend profile (backend.yaml): the module to import, the device, python_path and env "
                         "of the tests. A module name (dotted, or a .py path) is accepted in its place.")
# profile init: the backend named by its module (there is no profile yet), and its import path.
BACKEND_MODULE = _opt("--backend-module", metavar="MODULE[:FUNCTION]",
                      help="The backend's Python module (a dotted name); MODULE:FUNCTION also calls FUNCTION() "
                           "after the import, for a backend that registers its device there.")
PYTHON_PATH = _opt("--python-path", metavar="DIR", kind=PathKind.DIR_IN,
                   help="A folder that makes the backend module importable (repeatable); the profile names it "
                        "relative to its own folder.")
OUT_DIR = _opt("--out", metavar="DIR", kind=PathKind.DIR_OUT, help="Output folder (created if missing).")
OUT_RUNS = _opt("--out", metavar="DIR", kind=PathKind.DIR_IN, help="The --out folder of the runs, as `run` was given it.")
OUT_FILE = _opt("--out", metavar="FILE", kind=PathKind.FILE_OUT, help="Write to this file (atomically) instead of stdout.")
# Commands whose output is always a file (a workflow, a plan): where it goes.
OUT_TARGET = _opt("--out", metavar="FILE", kind=PathKind.FILE_OUT, help="The file to write (atomically).")
# ci github: a workflow goes to .github/workflows/, which a repository often does not have yet.
WORKFLOW_OUT = _opt("--out", metavar="FILE", kind=PathKind.FILE_OUT_MAKING,
                    help="The workflow file to write (atomically); missing folders are made, and said.")
MODEL_DIR = _opt("--model-dir", metavar="DIR", kind=PathKind.DIR_OUT, help="Where to assemble the GGUF model file (default: the package's cache).")
ROOTDIR = _opt("--rootdir", metavar="DIR", kind=PathKind.DIR_IN, help="pytest's rootdir and working directory (default: the torch root).")
REPO = _opt("--repo", metavar="DIR", kind=PathKind.DIR_IN, help="Git repository for REV:PATH sides (default: the current directory).")
RESULTS = _opt("--results", metavar="PATH", kind=PathKind.PATH_IN, help="JUnit XML, results.jsonl, or a folder of them (repeatable).")
FILES = _opt("--files", metavar="GLOB", help="Glob or path relative to the root (repeatable; default: test/**/test_*.py).")
LEVEL = _opt("--level", metavar="1|2|3", min=1, max=3,
              help="1: schema and paths; 2: also every named test, op and dtype against the upstream files (static); "
                   "3: also collect the files (no execution) and check the instantiated names.")
ALLOW_OUTSIDE_ROOT = _opt("--allow-outside-root",
                          help="Accept test paths that resolve outside the torch root (default: an error).")

# --- how to run -------------------------------------------------------------------------------
WORKERS = _opt("-n", "--workers", metavar="N", min=1,
               help="Parallel worker processes: pytest-xdist workers where tests run (memory build: parser processes; "
                    "the probe: replay processes).")
TIMEOUT = _opt("--timeout", metavar="SECONDS", min=0,
               help="Per-test limit: a test running longer is killed and recorded as timeout (0: no limit).")
MEMORY_LIMIT = _opt("--memory-limit-mb", metavar="MB", min=0,
                    help="Per-test memory: an allocation that would grow the process running a test by more than MB "
                         "fails that test, recorded as memory_limit (Linux; 0: no limit).")
RECYCLE = _opt("--recycle-mb", metavar="MB", min=0,
               help="A process that runs tests is replaced by a fresh fork of the collected session once it holds "
                    "more than MB of its own memory: what thousands of tests leave behind is let go (Linux; 0: tests "
                    "run in the process that collected them).")
RETRIES = _opt("--retries", metavar="N", min=0, help="Reruns of failing tests, to tell flaky from consistent failures.")
EXECUTE = _opt("--execute/--no-execute", help="Run the tests on the device and keep what the results say.")
RESUME = _opt("--resume", help="Continue the last run from its checkpoint.")
ACCEPT_REGRESSIONS = _opt("--accept-regressions", help="Write the changes refine proposes for tonight's regressions "
                          "(demotions, new exclusions); without it their standing entries stay, listed for review "
                          "(`testcurator accept` writes them later).")
WAIT = _opt("--wait", metavar="SECONDS", min=0, help="When another run holds the state directory or --out, wait up to "
            "SECONDS for it to end (default 0: refuse at once, exit 3, having written nothing).")
HISTORY_FILE = _opt("--file", metavar="TEST_FILE", help="An upstream test file, relative to the torch root "
                    "(test/test_ops.py): its passing, held-back and failing instances per run.")
HISTORY_TEST = _opt("--test", metavar="NAME", help="A test, file::Class::test as report.md names it: its outcome per run "
                    "and its last failure.")
LAST_RUNS = _opt("--last", metavar="N", min=1, help="Only the last N runs.")
KEEP_RUNS = _opt("--keep-runs", metavar="N", min=1, help="Runs whose per-instance outcomes the history keeps (default "
                 "60); older runs keep their identity and counts, and their run folders are removed.")
REUSE_WITHIN = _opt("--reuse-within", metavar="HOURS", min=0,
                   help="A run that would only repeat the last run of --out (same backend, torch, upstream tree, "
                        "testcurator, settings and configs; it ended with exit 0) within HOURS of its end runs "
                        "nothing and says so: that run's configs, report and verdict stand (default 12; 0: always "
                        "run).")
DRY_RUN = _opt("--dry-run", help="Print what would change; write nothing.")
FORCE = _opt("--force", help="Replace output files that already exist.")
QUIET = _opt("-q", "--quiet", help="No progress display.")
EMBED = _opt("--embed/--no-embed", help="Per-test embeddings for similarity search (the slow part of indexing).")
CAPTURE_OPS = _opt("--capture-ops/--no-capture-ops", help="Run the tests once on CPU to map them to the aten ops they call.")
CAPTURE_BUDGET = _opt("--capture-budget-s", metavar="SECONDS", min=0,
                     help="The most the CPU op capture may cost, in estimated CPU seconds (from earlier captures' "
                          "timings): over it, fewer kinds of each test are captured, said in the report (default: "
                          "300; no limit with --capture-all).")
CAPTURE_ALL = _opt("--capture-all", help="Capture every CPU instance the device instantiates, also those the backend "
                   "profile rules out (a dtype outside supported_dtypes, complex or quantized without the hook), and "
                   "with no default budget.")
PROBE = _opt("--probe/--no-probe", help="Replay the tests' captured aten calls on the device first (before bucketing; "
             "in enable-op, before admitting: the capability table), so decisions know which op x dtype calls it "
             "lacks (needs the CPU op capture: `run --capture-ops`, or `ops ingest`).")
REBUILD = _opt("--rebuild", help="Discard the index and build it from scratch.")
COLLECT = _opt("--collect", help="Also collect the files with pytest (no execution): exact instances and the static @ops map.")
DEVICE = _opt("--device", metavar="NAME", help="Device type to instantiate tests for (e.g. curatedev).")
SHARD = _opt("--shard", metavar="K/N", help="Run only shard K of N, split by recorded duration (one leg of a CI matrix).")
SHARDS = _opt("--shards", metavar="N", min=1,
              help="Split the tests into N shards balanced by recorded duration (ci github: one matrix leg each; "
                   "elsewhere: run them on --executor and merge).")
EXECUTOR = _opt("--executor", metavar="local|ray", choices=("local", "ray"),
                help="Where shards run: local processes, or a Ray cluster (RAY_ADDRESS, else a local one).")
LABELS = _opt("--labels", metavar="LABEL",
              help="Only the config's files carrying one of these labels (config or file `labels:`); repeatable or comma-separated.")
DISPATCH_LABELS = _opt("--dispatch-labels", metavar="LABEL[,LABEL]",
                       help="Config labels a relay dispatch (one PR) runs, e.g. trunk (default: every file of its tier).")
SCHEDULE_LABELS = _opt("--schedule-labels", metavar="LABEL[,LABEL]",
                       help="Config labels the nightly schedule runs (default: every file of its tier).")
GROUP = _opt("--group", metavar="NAME", help="Only the config's files of this feature group (see `testcurator shards plan`).")
TIER = _opt("--tier", metavar="L1|L2|L3", choices=("L1", "L2", "L3"),
            help="L1: the tiers file's fast checks; L2: the whole config; L3: also the held-back tests, as probes.")
TIERS_FILE = _opt("--tiers-file", metavar="FILE", kind=PathKind.FILE_IN, help="Written by `testcurator tiers` (default: tiers.json beside the config).")
PROFILE_DEPRECATED = _opt("--profile", metavar="FILE", hidden=True, kind=PathKind.FILE_IN, help="Deprecated: use --backend FILE.")
ALLOW_EMPTY = _opt("--allow-empty", help="Accept a run in which no test ran (otherwise exit 3: nothing was tested).")
DURATIONS = _opt("--durations", metavar="FILE", kind=PathKind.FILE_IN, help="pytest-split .test_durations to split by (added to the state dir's).")
REFRESH_SNAPSHOT = _opt("--refresh-snapshot",
                        help="Take a new durations snapshot for shards from the state dir "
                             "(shards plan, or a matrix's first leg only).")
DEVICES = _opt("--device", metavar="NAME",
               help="Device type whose name may end class names (e.g. curatedev); repeatable.")
TIMINGS_DEVICE = _opt("--device", metavar="NAME",
                      help="Cost tests by this device's recorded durations where known, other devices' elsewhere (e.g. curatedev).")
BUDGET_S = _opt("--budget-s", metavar="SECONDS", min=0, help="Time budget of tier L1.")
MAX_JOB_S = _opt("--max-job-s", metavar="SECONDS", min=1, help="Longest expected time of one job (shards per group follow).")
PREFIX = _opt("--prefix", metavar="NODEID", help="Only node ids starting with this (e.g. test/test_ops.py).")
RUN_UNRUN = _opt("--run-unrun", help="First run, on the device, the tests the draft did not execute (skipped ones).")

def _print_version(value: bool) -> bool:
    if value:
        from importlib.metadata import version

        typer.echo(f"testcurator {version('testcurator')}")
        raise typer.Exit()
    return value


VERSION = _opt("--version", check=_print_version, help="Print testcurator's version and exit.")

# --- the local LLM server ---------------------------------------------------------------------
PORT = _opt("--port", metavar="PORT", min=1, max=65535, help="Port to listen on.")
HOST = _opt("--host", metavar="ADDRESS", help="Address to bind (loopback by default).")
CONTEXT_TOKENS = _opt("--context-tokens", metavar="N", min=512, help="Context window of the model, in tokens (n_ctx).")
THREADS = _opt("--threads", metavar="N", min=1, help="CPU threads for generation (default: half the cores).")

# --- CI ---------------------------------------------------------------------------------------
RUNS_ON = _opt("--runs-on", metavar="LABEL",
               help="Runner label of a device host; repeatable (default: self-hosted and the device's name).")
EVENT_TYPE = _opt("--event-type", metavar="TYPE", help="repository_dispatch event type the relay sends.")
BRANCHES = _opt("--branches", metavar="REGEX", help="Base branches to test (a regular expression).")
LABEL = _opt("--label", metavar="NAME",
             help="PR label required ('' for none); waited for, since it may land after the dispatch.")
CRON = _opt("--cron", metavar="SCHEDULE", help="Nightly schedule, a cron expression (UTC).")
REQUIREMENT = _opt("--testcurator", metavar="REQUIREMENT", help="pip requirement that installs testcurator on the runners.")

# --- who decides ------------------------------------------------------------------------------
BRAIN = _opt("--brain", metavar="offline|llm", choices=("offline", "llm"),
             help="Who decides: offline rules (no network) or an LLM (needs OPENAI_BASE_URL or --llm-base-url).")
LLM_BASE_URL = _opt("--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL).")
LLM_MODEL = _opt("--llm-model", metavar="NAME", help="Model name (default: $TESTCURATOR_LLM_MODEL).")
LLM_BUDGET = _opt("--llm-budget-s", metavar="SECONDS", min=0,
                  help="The most seconds this run waits for the model (0: no limit); what the budget cannot pay for is "
                       "decided by the offline brain, said in the report (default: llm.budget_s, "
                       "$TESTCURATOR_LLM_BUDGET_S, else 900).")
EVAL_SOURCE = _opt("--source", metavar="stored|offline|llm", choices=("stored", "offline", "llm"),
                   help="Predictions to judge: the run's stored ones, or a brain asked again; repeatable "
                        "(default: stored and offline).")

# --- what comes out ---------------------------------------------------------------------------
FORMAT = _opt("--format", metavar="text|json", choices=("text", "json"), help="Output format.")
REVIEW_FORMAT = _opt("--format", metavar="terminal|markdown|html|json", choices=("terminal", "markdown", "html", "json"),
                     help="Output format.")
GAPS_FORMAT = _opt("--format", metavar="text|json|markdown|html", choices=("text", "json", "markdown", "html"),
                   help="Output format (html: one static page, the gaps against the dtypes).")
JSON_DEPRECATED = _opt("--json", hidden=True, help="Deprecated: use --format json.")
OUTPUT_DEPRECATED = _opt("-o", "--output", metavar="FILE", kind=PathKind.FILE_OUT, hidden=True, help="Deprecated: use --out.")
JOBS_DEPRECATED = _opt("-j", "--jobs", metavar="N", min=1, hidden=True, help="Deprecated: use -n/--workers.")
REPORT = _opt("--report", metavar="FILE", kind=PathKind.FILE_OUT, help="Also write the report to FILE (.json: JSON, else markdown).")
FAIL_SHRINK = _opt("--fail-if-mandatory-shrinks-by", metavar="N|P%",
                   help="Exit 1 when more than N (or P% of the) named mandatory_success tests lose that mode or "
                        "keep it with a new exclusion.")
TOP_K = _opt("--top", metavar="N", min=1, help="How many results.")
DTYPE = _opt("--dtype", metavar="DTYPE", help="Only instances of this dtype (e.g. float16).")

# --- import / export --------------------------------------------------------------------------
IMPORT_MODE = _opt("--mode", metavar="MODE", choices=HELD_BACK_MODES,
                   help="Mode of the tests the list names: skip, xfail or xfail_strict.")
UNLISTED_MODE = _opt("--unlisted-mode", metavar="MODE", choices=MODES,
                     help="unlisted_test_mode of each imported file (mandatory_success, xfail, xfail_strict, skip).")
STRIP_SUFFIX = _opt("--strip-suffix", metavar="SUFFIX", help="Wrapper-file suffix to drop from keys.")
AS_DEVICE = _opt("--as-device", metavar="NAME",
                 help="Device the list was written for (e.g. xpu); its name in patterns becomes the collected device "
                      "(default: the device most patterns name, if any; cpu: match as written).")
MAX_UNPLACED = _opt("--max-unplaced", metavar="N|P%",
                    help="Exit 1 when more than N (or P% of the) patterns of files in the tree could not be placed.")
TEST_FILE = _opt("--test-file", metavar="PATH", help="Upstream file (relative to the torch root) to match keys in; repeatable.")
PLATFORM = _opt("--platform", metavar="NAME", help="Only keys disabled on this platform (default: all).")
PLATFORMS = _opt("--platform", metavar="NAME", help="Platforms of every exported key; repeatable (default: all).")
INCLUDE_XFAIL = _opt("--include-xfail/--no-include-xfail",
                     help="Export xfail and xfail_strict tests as disabled too (the format has nothing else).")
INCLUDE_UNLISTED = _opt("--include-unlisted", help="Also export the tests skipped by unlisted_test_mode.")

# --- arguments --------------------------------------------------------------------------------
CONFIG_PATHS = _arg("PATH...", "Config files or directories of configs.", path=True)
TEST_PATHS = _arg("[TEST]...", "Test files or node ids (a draft run, or narrows the config).")
MORE_RESULTS = _arg("[RESULTS]...", "More result files (same forms as --results).", kind=PathKind.PATH_IN)
OLD_SIDE = _arg("OLD", "Old config: a file, a directory, or REV:PATH (git, e.g. HEAD~1:configs/).")
NEW_SIDE = _arg("NEW", "New config: same forms as OLD.")
SKIPLIST_FILE = _arg("FILE", "Python file holding skip_dict = {file: (patterns...) | None}.", kind=PathKind.FILE_IN)
DISABLED_FILE = _arg("FILE", 'PyTorch disabled-tests JSON: {"test (module.Class)": [issue, [platforms]]}.', kind=PathKind.FILE_IN)
CAPTURE_FILES = _arg("FILE...", "Capture files (JSON lines) written by pytest --curate-capture-ops.",
                     kind=PathKind.FILE_IN, noun="capture file")
OP = _arg("OP", "aten::add (any overload), aten::add.Tensor (exact), or an OpInfo name (add).")
ENABLE_OP = _arg("OP", "The op now supported: an OpInfo name (add) or an ATen op (aten::add).")
ACCEPT_TESTS = _arg("[NAME]...", "Tests to accept, file::Class::test as the run's last lines name them (default: "
                    "every change kept back).")
TEST_NAME = _arg("NAME", "Device-generic test name, Class::test (or path::Class::test).")
QUERY_TEXT = _arg("TEXT", "What the tests should be about.")
RUN_DIR = _arg("RUN_DIR", "A run folder (<state-dir>/runs/<id>), a run's --out folder, or 'latest' (the newest "
                          "under --state-dir).")
DURATION_INPUTS = _arg("PATH...", "pytest-split .test_durations files, run folders, results.jsonl or JUnit XML.", kind=PathKind.PATH_IN)

# --- the aliases command modules use ----------------------------------------------------------
TorchRoot = Annotated[Optional[Path], TORCH_ROOT.make()]
# The same options where a command needs them (no default: typer makes them required).
TorchRootReq = Annotated[Path, TORCH_ROOT.make()]
ConfigReq = Annotated[Path, CONFIG.make()]
BackendReq = Annotated[Path, BACKEND.make()]
BackendModuleReq = Annotated[str, BACKEND_MODULE.make()]
PythonPath = Annotated[Optional[list[Path]], PYTHON_PATH.make()]
OutDirReq = Annotated[Path, OUT_DIR.make()]
OutFileReq = Annotated[Path, OUT_FILE.make()]
OldRoot = Annotated[Path, OLD_ROOT.make()]
NewRoot = Annotated[Path, NEW_ROOT.make()]
StateDir = Annotated[Optional[Path], STATE_DIR.make()]
Config = Annotated[Optional[Path], CONFIG.make()]
Backend = Annotated[Optional[Path], BACKEND.make()]
BackendExec = Annotated[Optional[str], BACKEND_EXEC.make()]
OutDir = Annotated[Optional[Path], OUT_DIR.make()]
OutFile = Annotated[Optional[Path], OUT_FILE.make()]
OutTarget = Annotated[Optional[Path], OUT_TARGET.make()]
WorkflowOut = Annotated[Path, WORKFLOW_OUT.make()]
ModelDir = Annotated[Optional[Path], MODEL_DIR.make()]
Rootdir = Annotated[Optional[Path], ROOTDIR.make()]
Repo = Annotated[Optional[Path], REPO.make()]
Results = Annotated[Optional[list[Path]], RESULTS.make()]
Files = Annotated[Optional[list[str]], FILES.make()]
AllowOutsideRoot = Annotated[bool, ALLOW_OUTSIDE_ROOT.make()]
Level = Annotated[int, LEVEL.make()]
Workers = Annotated[Optional[int], WORKERS.make()]
Timeout = Annotated[float, TIMEOUT.make()]
MemoryLimitMb = Annotated[float, MEMORY_LIMIT.make()]
RecycleMb = Annotated[float, RECYCLE.make()]
Retries = Annotated[int, RETRIES.make()]
Execute = Annotated[bool, EXECUTE.make()]
Resume = Annotated[bool, RESUME.make()]
AcceptRegressions = Annotated[bool, ACCEPT_REGRESSIONS.make()]
Wait = Annotated[float, WAIT.make()]
KeepRuns = Annotated[int, KEEP_RUNS.make()]
ReuseWithin = Annotated[float, REUSE_WITHIN.make()]
OutRuns = Annotated[Optional[Path], OUT_RUNS.make()]
OutRunsReq = Annotated[Path, OUT_RUNS.make()]
HistoryFile = Annotated[Optional[str], HISTORY_FILE.make()]
HistoryTest = Annotated[Optional[str], HISTORY_TEST.make()]
LastRuns = Annotated[Optional[int], LAST_RUNS.make()]
AcceptTests = Annotated[Optional[list[str]], ACCEPT_TESTS.make()]
DryRun = Annotated[bool, DRY_RUN.make()]
Force = Annotated[bool, FORCE.make()]
Quiet = Annotated[bool, QUIET.make()]
Embed = Annotated[bool, EMBED.make()]
CaptureOps = Annotated[bool, CAPTURE_OPS.make()]
Probe = Annotated[bool, PROBE.make()]
CaptureBudget = Annotated[Optional[float], CAPTURE_BUDGET.make()]
CaptureAll = Annotated[bool, CAPTURE_ALL.make()]
Rebuild = Annotated[bool, REBUILD.make()]
Collect = Annotated[bool, COLLECT.make()]
Device = Annotated[Optional[str], DEVICE.make()]
Devices = Annotated[Optional[list[str]], DEVICES.make()]
Shard = Annotated[Optional[str], SHARD.make()]
Shards = Annotated[int, SHARDS.make()]
TimingsDevice = Annotated[Optional[str], TIMINGS_DEVICE.make()]
BudgetS = Annotated[float, BUDGET_S.make()]
MaxJobS = Annotated[float, MAX_JOB_S.make()]
Prefix = Annotated[Optional[str], PREFIX.make()]
RunUnrun = Annotated[bool, RUN_UNRUN.make()]
# eval --run-unrun: None (not given) is the run's own limit, from its run.json.
EvalMemoryLimitMb = Annotated[Optional[float], MEMORY_LIMIT.make()]
Version = Annotated[bool, VERSION.make()]
Port = Annotated[int, PORT.make()]
Host = Annotated[str, HOST.make()]
ContextTokens = Annotated[int, CONTEXT_TOKENS.make()]
Threads = Annotated[int, THREADS.make()]
RunsOn = Annotated[Optional[list[str]], RUNS_ON.make()]
EventType = Annotated[str, EVENT_TYPE.make()]
Branches = Annotated[str, BRANCHES.make()]
Label = Annotated[str, LABEL.make()]
Cron = Annotated[str, CRON.make()]
Requirement = Annotated[str, REQUIREMENT.make()]
ExecutorName = Annotated[str, EXECUTOR.make()]
Group = Annotated[Optional[str], GROUP.make()]
Labels = Annotated[Optional[list[str]], LABELS.make()]
DispatchLabels = Annotated[str, DISPATCH_LABELS.make()]
ScheduleLabels = Annotated[str, SCHEDULE_LABELS.make()]
Tier = Annotated[Optional[str], TIER.make()]
TiersFile = Annotated[Optional[Path], TIERS_FILE.make()]
ProfileDeprecated = Annotated[Optional[Path], PROFILE_DEPRECATED.make()]
AllowEmpty = Annotated[bool, ALLOW_EMPTY.make()]
Durations = Annotated[Optional[Path], DURATIONS.make()]
RefreshSnapshot = Annotated[bool, REFRESH_SNAPSHOT.make()]
Brain = Annotated[str, BRAIN.make()]
LlmBaseUrl = Annotated[Optional[str], LLM_BASE_URL.make()]
LlmModel = Annotated[Optional[str], LLM_MODEL.make()]
LlmBudget = Annotated[Optional[float], LLM_BUDGET.make()]
EvalSources = Annotated[Optional[list[str]], EVAL_SOURCE.make()]
Format = Annotated[str, FORMAT.make()]
ReviewFormat = Annotated[str, REVIEW_FORMAT.make()]
GapsFormat = Annotated[str, GAPS_FORMAT.make()]
JsonDeprecated = Annotated[bool, JSON_DEPRECATED.make()]
OutputDeprecated = Annotated[Optional[Path], OUTPUT_DEPRECATED.make()]
JobsDeprecated = Annotated[Optional[int], JOBS_DEPRECATED.make()]
Report = Annotated[Optional[Path], REPORT.make()]
FailShrink = Annotated[Optional[str], FAIL_SHRINK.make()]
TopK = Annotated[int, TOP_K.make()]
Dtype = Annotated[Optional[str], DTYPE.make()]
ImportMode = Annotated[str, IMPORT_MODE.make()]
UnlistedMode = Annotated[str, UNLISTED_MODE.make()]
StripSuffix = Annotated[str, STRIP_SUFFIX.make()]
AsDevice = Annotated[Optional[str], AS_DEVICE.make()]
MaxUnplaced = Annotated[str, MAX_UNPLACED.make()]
TestFile = Annotated[Optional[list[str]], TEST_FILE.make()]
Platform = Annotated[Optional[str], PLATFORM.make()]
Platforms = Annotated[Optional[list[str]], PLATFORMS.make()]
IncludeXfail = Annotated[bool, INCLUDE_XFAIL.make()]
IncludeUnlisted = Annotated[bool, INCLUDE_UNLISTED.make()]

ConfigPaths = Annotated[list[Path], CONFIG_PATHS.make()]
TestPaths = Annotated[Optional[list[str]], TEST_PATHS.make()]
MoreResults = Annotated[Optional[list[Path]], MORE_RESULTS.make()]
OldSide = Annotated[str, OLD_SIDE.make()]
NewSide = Annotated[str, NEW_SIDE.make()]
SkiplistFile = Annotated[Path, SKIPLIST_FILE.make()]
DisabledFile = Annotated[Path, DISABLED_FILE.make()]
CaptureFiles = Annotated[list[Path], CAPTURE_FILES.make()]
OpArg = Annotated[str, OP.make()]
EnableOpArg = Annotated[str, ENABLE_OP.make()]
TestName = Annotated[str, TEST_NAME.make()]
QueryText = Annotated[str, QUERY_TEXT.make()]
RunDirArg = Annotated[Path, RUN_DIR.make()]
DurationInputs = Annotated[list[Path], DURATION_INPUTS.make()]


def take_deprecated(new: Any, old: Any, old_name: str, new_name: str, *, default: Any = None) -> Any:
    """The value of ``new``, or of its deprecated spelling ``old`` (with a warning on stderr).

    Both given is bad input: which one the user meant is not ours to guess.
    """
    if old is None or old is False:
        return new
    if new != default and new != _absolute(default):  # a path default arrives made absolute
        raise usage_error(f"give {new_name} only ({old_name} is its deprecated spelling)")
    typer.echo(f"warning: {old_name} is deprecated; use {new_name}", err=True)
    return old


def wants_json(fmt: str, as_json: bool) -> bool:
    """``--format json``, or its deprecated spelling ``--json``."""
    return take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
