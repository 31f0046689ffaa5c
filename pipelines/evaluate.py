"""A measured brain: how a source's predictions before execution compare with what ran.

A *prediction* is a mode (and the dtypes/ops/modules it excludes) per ``file::Class::test``.
Where predictions come from is a role (:class:`PredictionSource`) with an explicit registry
(:data:`SOURCES`): the decisions a run stored before execution (``stored``), or a brain asked
again on the same run's memory and evidence (``offline``, ``llm``); a capability probe can
register itself the same way. The *observation* is every variant's outcome on the device:
the run's draft execution (``exec/``) and, with ``run_unrun``, one more execution of the tests
the draft did not run (``eval/exec/``: skipped tests, whose outcome is otherwise unknown).

Each prediction is judged on the variants it keeps (exclusions applied; skipped variants and
infrastructure failures are not evidence):

================  =====================================================================
held              mandatory_success that passed, or xfailed by upstream's own expectedFailure
                  (pytest's xfailed leaves a mandatory test green); skip/xfail/xfail_strict that failed
lost_coverage     skip of a test that passes on the device (and, counted apart as
                  ``excluded_passing``: a test whose excluded variants all pass)
wasted            mandatory_success of a test that fails: device time and a red CI
passes_anyway     xfail/xfail_strict of a test that passes (strict: fails CI)
flaky             mixed outcomes across attempts or variants
not_run           no usable variant (not executed, all skipped, infrastructure only)
by_preference     a skip the profile's preferences asked for: the user's scope, not a
                  prediction of the device, so not judged (those that pass are named)
================  =====================================================================
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from testcurator.agents.brain import ExecutionRecord
from testcurator.agents.decision import Decision
from testcurator.agents.refine import group_records
from testcurator.pipelines.store import RunStore
from testcurator.runner.progress import ProgressSink
from testcurator.runner.results.records import TestRecord, read_jsonl, write_jsonl
from testcurator.vocab import MODES, NOT_EVIDENCE_CLASSES, PASSED_EVIDENCE, TestKey

VERDICTS = ("held", "lost_coverage", "wasted", "passes_anyway", "flaky", "not_run", "by_preference")
#: How a decision's evidence names the preference it follows (agents/offline/rules.Wish.quote).
PREFERENCE = "preference `"
#: The verdicts that say a prediction was wrong, as the summary words them (each test named).
WRONG = {"lost_coverage": "skip(s) that pass on the device (lost coverage)",
         "wasted": "mandatory_success that fail (wasted device time)",
         "passes_anyway": "xfail(s) that pass"}
EXEC = ("exec", "results.jsonl")
EXTRA_EXEC = ("eval", "exec", "results.jsonl")


@dataclass(frozen=True)
class Prediction:
    mode: str
    exclude_dtypes: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    exclude_modules: tuple[str, ...] = ()
    exclude_params: tuple[str, ...] = ()
    by_preference: bool = False  # a skip the profile's preferences asked for

    @classmethod
    def of(cls, decision: Decision) -> Prediction:
        wished = decision.mode == "skip" and any(e.startswith(PREFERENCE) for e in decision.evidence)
        return cls(decision.mode, decision.exclude_dtypes, decision.exclude_ops, decision.exclude_modules,
                   decision.exclude_params, wished)


@dataclass(frozen=True)
class EvalRun:
    """What every source may read: the run directory and where its inputs live."""

    run_dir: Path
    torch_root: Path
    profile_path: Path
    out_dir: Path
    state_dir: Path
    files: tuple[str, ...]
    llm: Mapping[str, Any]  # LLMSettings overrides (base_url, model...) for an ``llm`` source
    memory_limit_mb: float | None = None  # --run-unrun's per-test limit (the run's own by default)


class PredictionSource(Protocol):
    """Predictions for the tests of ``run.files``: test key -> :class:`Prediction`."""

    name: str

    def predict(self, run: EvalRun) -> dict[TestKey, Prediction]: ...


def decisions_by_key(store: RunStore, stage: str, files: Iterable[str]) -> dict[TestKey, Decision]:
    out: dict[TestKey, Decision] = {}
    for rel in files:
        out.update({TestKey.of(rel, d.test): d for d in store.read_decisions(stage, rel) or []})
    return out


class StoredSource:
    """The decisions the run itself made before execution (its bucket stage)."""

    name = "stored"

    def predict(self, run: EvalRun) -> dict[TestKey, Prediction]:
        return {k: Prediction.of(d) for k, d in decisions_by_key(RunStore(run.run_dir), "bucket", run.files).items()}


class BrainSource:
    """A brain asked again, on the run's memory and evidence (the LLM's answers come from
    its cache where the run already asked the same question)."""

    def __init__(self, brain: str) -> None:
        self.name = brain
        self.usage: Any = None  # the brain's usage after predict (LLM calls made for the eval)

    def predict(self, run: EvalRun) -> dict[TestKey, Prediction]:
        from testcurator.pipelines import decide
        from testcurator.pipelines.context import RunContext

        # No preflight: the bucket step reads the run's evidence and runs no test, so neither the
        # backend's import nor a pytest start in the tree tells it anything (4 s an eval).
        ctx = RunContext.create(torch_root=run.torch_root, backend=run.profile_path, out_dir=run.out_dir,
                                state_dir=run.state_dir, brain=self.name, execute=False, preflight=False,
                                llm_base_url=run.llm.get("base_url"), llm_model=run.llm.get("model"))
        store = RunStore(run.run_dir)
        out: dict[str, Prediction] = {}
        for rel in run.files:  # the bucket step itself, on the run's evidence and human edits
            out.update({TestKey.of(rel, d.test): Prediction.of(d) for d in decide.bucket(ctx, store, rel)})
        self.usage = ctx.brain.usage
        return out


SOURCES: dict[str, Callable[[], PredictionSource]] = {
    "stored": StoredSource,
    "offline": lambda: BrainSource("offline"),
    "llm": lambda: BrainSource("llm"),
}


def observed(run: EvalRun) -> dict[TestKey, list[ExecutionRecord]]:
    """``file::Class::test`` -> its variants, from every execution of the run."""
    records = []
    for parts in (EXEC, EXTRA_EXEC):
        path = run.run_dir.joinpath(*parts)
        if path.exists():
            records += read_jsonl(path)
    return group_records(records, run.torch_root)


def _evidence(variant: ExecutionRecord) -> bool:
    return variant.failure_class not in NOT_EVIDENCE_CLASSES and any(o != "skipped" for o in variant.outcomes)


def _kept(prediction: Prediction, variants: Sequence[ExecutionRecord]) -> list[ExecutionRecord]:
    return [v for v in variants if _evidence(v) and not v.excluded_by_edits(prediction)]


def _excluded(prediction: Prediction, variants: Sequence[ExecutionRecord]) -> list[ExecutionRecord]:
    """The variants the prediction's exclusions remove that ran (``eval --run-unrun`` runs them)."""
    return [v for v in variants if _evidence(v) and v.excluded_by_edits(prediction)]


def _excludes(prediction: Prediction) -> bool:
    return prediction.mode != "skip" and bool(prediction.exclude_dtypes or prediction.exclude_ops
                                               or prediction.exclude_modules or prediction.exclude_params)


def _green(variant: ExecutionRecord) -> bool:
    """Every attempt passed, or xfailed: upstream's own expectedFailure (subtests that
    ``decorateIf(unittest.expectedFailure, ...)``), which a mandatory_success test may do."""
    return bool(variant.outcomes) and all(o in PASSED_EVIDENCE or o == "xfailed" for o in variant.outcomes)


def judge(prediction: Prediction, variants: Sequence[ExecutionRecord]) -> str:
    """One of :data:`VERDICTS` (see the module docstring)."""
    kept = _kept(prediction, variants)
    if prediction.by_preference:
        return "by_preference"
    if not kept:
        return "not_run"
    if prediction.mode == "mandatory_success" and all(_green(v) for v in kept):
        return "held"
    if all(v.consistently_passed for v in kept):
        return "held" if prediction.mode == "mandatory_success" else (
            "lost_coverage" if prediction.mode == "skip" else "passes_anyway")
    if any(v.consistently_failed for v in kept) and all(v.consistently_failed or v.consistently_passed for v in kept):
        return "wasted" if prediction.mode == "mandatory_success" else "held"
    return "flaky"


def evaluate(predictions: Mapping[TestKey, Prediction], truth: Mapping[TestKey, Sequence[ExecutionRecord]]) -> dict[str, Any]:
    """Per predicted mode, how many tests got each verdict; and the totals."""
    table: dict[str, Counter[str]] = {mode: Counter() for mode in MODES}
    wrong: dict[str, list[str]] = {verdict: [] for verdict in WRONG}
    wished_passing: list[str] = []
    excluded_passing: list[str] = []
    for key, prediction in sorted(predictions.items()):
        # An exclusion is a prediction too: variants a test runs without, that would have passed.
        excluded = _excluded(prediction, truth.get(key, ())) if _excludes(prediction) else []
        if excluded and all(v.consistently_passed for v in excluded):
            excluded_passing.append(str(key))
        verdict = judge(prediction, truth.get(key, ()))
        table.setdefault(prediction.mode, Counter())[verdict] += 1
        if verdict in wrong:
            wrong[verdict].append(str(key))
        elif verdict == "by_preference" and judge(replace(prediction, by_preference=False),
                                                  truth.get(key, ())) == "lost_coverage":
            wished_passing.append(str(key))
    total: Counter[str] = Counter()
    for counts in table.values():
        total.update(counts)
    judged = sum(total[v] for v in VERDICTS if v not in ("not_run", "by_preference"))
    return {"per_mode": {m: {v: c.get(v, 0) for v in VERDICTS} | {"decided": sum(c.values())} for m, c in table.items()},
            "total": {v: total.get(v, 0) for v in VERDICTS} | {"decided": sum(total.values())},
            "judged": judged, "held_share": round(total["held"] / judged, 3) if judged else None,
            "wrong": wrong, "by_preference_passing": wished_passing, "excluded_passing": excluded_passing}


def unrun(truth: Mapping[TestKey, Sequence[ExecutionRecord]], predictions: Mapping[TestKey, Prediction],
          tried: Collection[str] = ()) -> list[TestKey]:
    """Keys with no usable variant yet, and keys whose exclusions no variant has tested yet
    (the draft runs a test without them): what an extra execution would settle. ``tried``:
    the variants an earlier extra execution already ran (:func:`tried_variants`); one it
    could only skip (a dtype the profile does not support, a test's own skip) stays skipped,
    so its test is not run again (39 tests on curatedev's new files, at every eval), nor is
    a test of a file it collected that has no variant at all (``deviceCountAtLeast(2)``)."""
    tried_files = {TestKey.parse(nodeid).file for nodeid in tried}

    def unsettled(key: TestKey, prediction: Prediction) -> bool:
        variants = truth.get(key, ())
        if not _kept(Prediction("mandatory_success"), variants):
            ran = any(v.variant in tried for v in variants) if variants else key.file in tried_files
            return not ran
        return _excludes(prediction) and not _excluded(prediction, variants) and \
            not any(v.variant in tried and v.excluded_by_edits(prediction) for v in variants)

    return sorted(k for k, p in predictions.items() if unsettled(k, p))


def tried_variants(run: EvalRun) -> set[str]:
    """The variants an earlier ``--run-unrun`` of ``run`` ran, whatever their outcome."""
    path = run.run_dir.joinpath(*EXTRA_EXEC)
    return {r.nodeid for r in read_jsonl(path)} if path.exists() else set()


def compare(run: EvalRun, sources: Sequence[PredictionSource]) -> dict[str, Any]:
    """Every source's evaluation against the same observation."""
    truth = observed(run)
    results = {source.name: evaluate(source.predict(run), truth) for source in sources}
    return {"sources": results, "tests_observed": len(truth)}


def markdown(result: Mapping[str, Any]) -> list[str]:
    """The comparison as a Markdown table (one column group per source)."""
    sources = list(result["sources"])
    if not sources:
        return []
    lines = ["| predicted mode | " + " | ".join(f"{s}: decided / held / wrong / flaky / not run / by preference"
                                               for s in sources) + " |",
             "|---|" + "---|" * len(sources)]
    for mode in (*MODES, "total"):
        cells = []
        for s in sources:
            data = result["sources"][s]
            row = data["total"] if mode == "total" else data["per_mode"].get(mode, {})
            wrong = row.get("lost_coverage", 0) + row.get("wasted", 0) + row.get("passes_anyway", 0)
            cells.append(f"{row.get('decided', 0)} / {row.get('held', 0)} / {wrong} / {row.get('flaky', 0)} / "
                         f"{row.get('not_run', 0)} / {row.get('by_preference', 0)}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    lines.append("")
    for s in sources:
        t = result["sources"][s]["total"]
        share = result["sources"][s]["held_share"]
        counted = ", ".join(f"{t[verdict]} {words}" for verdict, words in WRONG.items())
        lines.append(f"- {s}: {counted}; held {'n/a' if share is None else f'{share:.0%}'} of "
                     f"{result['sources'][s]['judged']} judged")
        for verdict, names in result["sources"][s].get("wrong", {}).items():
            lines += [f"  - {verdict}: `{name}`" for name in names]
        wished = result["sources"][s].get("by_preference_passing", [])
        if t.get("by_preference"):
            lines.append(f"- {s}: {t['by_preference']} skip(s) the profile's preferences asked for, not judged; "
                         f"{len(wished)} of them pass on the device")
            lines += [f"  - by_preference, passes: `{name}`" for name in wished]
        excluded = result["sources"][s].get("excluded_passing", [])
        lines.append(f"- {s}: {len(excluded)} test(s) whose excluded variants (dtypes, ops, modules, params) all pass "
                     "on the device (coverage lost by exclusion)")
        lines += [f"  - excluded, passes: `{name}`" for name in excluded]
    return lines


def execute_unrun(run: EvalRun, keys: Sequence[TestKey], *, workers: int = 1, timeout: float = 300.0,
                  progress: ProgressSink | None = None) -> Counter[str]:
    """Run ``keys`` (``file::Class::test``) once on the device, every one as mandatory, into
    ``eval/exec``; returns how many variants executed and how many were skipped (by the test
    itself or by the profile's capabilities). The curated configs are not touched."""
    from testcurator.config.editor import ConfigEditor, EntrySpec
    from testcurator.pipelines import emit
    from testcurator.config.layout import config_path, raw_path
    from testcurator.pipelines.context import RunContext
    from testcurator.runner.command import RunSpec
    from testcurator.runner.execute import execute

    if not keys:
        return Counter()
    ctx = RunContext.create(torch_root=run.torch_root, backend=run.profile_path, out_dir=run.out_dir,
                            state_dir=run.state_dir)
    config = run.run_dir / "eval" / "config"
    # An earlier eval's configs would run its tests again beside these (a second --run-unrun
    # of the corpus asked for 2 tests and ran 12,626 variants).
    shutil.rmtree(config, ignore_errors=True)
    by_file: dict[str, list[str]] = {}
    for key in keys:
        by_file.setdefault(key.file, []).append(key.name)
    for rel, tests in sorted(by_file.items()):
        editor = ConfigEditor.new(config_path(config, rel), global_=emit.capabilities(ctx.profile))
        editor.update(raw_path(rel), [EntrySpec((t,), "mandatory_success", "eval: run to observe") for t in tests])
        editor.save()
    results = run.run_dir.joinpath(*EXTRA_EXEC)
    # An earlier eval's results stay, but for the tests run again: a second --run-unrun runs
    # only what the first left unsettled.
    earlier = read_jsonl(results) if results.exists() else []
    spec = RunSpec(out_dir=results.parent, config=config, torch_root=ctx.torch_root, device=ctx.device,
                   backend=ctx.profile.backend_module, workers=workers, timeout=timeout, retries=1,
                   env=tuple(sorted(ctx.backend_env().items())), unrelated_plugins_off=True,
                   memory_limit_mb=run.memory_limit_mb)
    records = execute(spec, progress).records
    write_jsonl(results, _merged(earlier, records))
    return Counter("skipped" if r.outcome == "skipped" else "executed" for r in records)


def _merged(earlier: Sequence[TestRecord], records: Sequence[TestRecord]) -> list[TestRecord]:
    """``records``, and the earlier results they do not replace: the execution collects whole
    files, so a test it was not asked to run comes back skipped, which says nothing new."""
    merged = {r.nodeid: r for r in earlier}
    for record in records:
        before = merged.get(record.nodeid)
        if record.outcome != "skipped" or before is None or before.outcome == "skipped":
            merged[record.nodeid] = record
    return list(merged.values())
