"""The reason check: every config entry's reason read against what the run saw.

A reason states the fact that decided an entry; execution is the best evidence there is. An
entry contradicts its results (issue 22) when:

- ``passes``: its mode holds the test back as unable to pass (a skip that says it crashes,
  fails or needs what the device lacks; an xfail that says it fails) and every variant
  that ran passed, every attempt. A skip that names a preference, another device, an
  upstream skip or the config's own exclusion claims nothing about the device: not read.
- ``fails``: it is ``mandatory_success`` and a variant its edits keep failed every attempt;
- ``error``: the reason quotes an error (`` ... (`X`) ``) as the failure, and the variants
  that failed show another one;
- ``skipped``: the reason says the test skipped itself, and every variant was skipped by
  the config (an edit or a capability).

Whether variants count follows ``eval`` (:func:`testcurator.pipelines.evaluate.judge`): the
entry's own edits are applied first; infrastructure errors and skipped variants say nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from testcurator.agents.brain import ExecutionRecord
from testcurator.agents.offline.rules import steady
from testcurator.agents.refine import group_records
from testcurator.config.apply import OWN_SKIP
from testcurator.config.resolve import ResolvedEntry
from testcurator.names import every
from testcurator.pipelines.evaluate import Prediction, judge
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

#: A held-back reason that makes no claim about the device's result.
_NO_CLAIM = re.compile(r"preference|restricts it to|skips it on the backend's device|upstream skips|upstream expects"
                       r"|skipped by the draft config itself|only-file|-only file|passed|promotion|kept|flaky", re.I)
_QUOTED = re.compile(r"\(`(?P<text>[^`]{12,})`\)")


@dataclass(frozen=True)
class Contradiction:
    """One entry whose reason the results contradict."""

    test: str  # file::Class::test
    mode: str
    kind: str  # passes | fails | error | skipped
    reason: str
    found: str
    # The standing entry of a regressed or flaky test, kept as it stood for review
    # (pipelines/nights/assess.py): its reason is last night's, not tonight's finding.
    kept_back: bool = False

    def line(self) -> str:
        kept = "; the standing entry of a regressed or flaky test, kept back for review" if self.kept_back else ""
        return f"`{self.test}` ({self.mode}): the reason says {_SAYS[self.kind]}, but {self.found}{kept}"


_SAYS = {"passes": "it cannot pass", "fails": "it passes", "error": "it fails with the error it quotes",
         "skipped": "the test skips itself"}


def check(entries: Mapping[TestKey, tuple[Prediction, str]], records: Iterable[TestRecord],
          root: Path) -> list[Contradiction]:
    """The contradictions between ``entries`` (test -> its prediction with edits, and reason)
    and what ``records`` (any of the run's executions) say, in test order."""
    truth = group_records(list(records), root)
    out = []
    for key, (prediction, reason) in sorted(entries.items()):
        found = _contradiction(prediction, reason, truth.get(key, ()))
        if found is not None:
            kind, what = found
            out.append(Contradiction(str(key), prediction.mode, kind, reason, what))
    return out


def _contradiction(prediction: Prediction, reason: str, variants: Sequence[ExecutionRecord]) -> tuple[str, str] | None:
    if variants and all(set(v.outcomes) == {"skipped"} for v in variants) and "by the test itself" in reason \
            and all(OWN_SKIP.match(v.message) for v in variants):
        return "skipped", f"the config skipped every variant ({variants[0].message})"
    verdict = judge(prediction, variants)
    ran = sum(1 for v in variants if set(v.outcomes) != {"skipped"})
    if verdict in ("lost_coverage", "passes_anyway") and not _NO_CLAIM.search(reason):
        return "passes", f"{every(ran, 'variant')} that ran passed on the device"
    if verdict == "wasted":
        failing = [v for v in variants if v.consistently_failed]
        share = every(ran, 'variant') if len(failing) == ran else f"{len(failing)} of {ran} variants"
        return "fails", (f"{share} that ran failed ({failing[0].failure_class}: "
                         f"{_first(failing[0].message)})")
    quoted = _QUOTED.search(reason)
    failed = [v for v in variants if v.consistently_failed and v.message]
    if quoted and failed and prediction.mode != "mandatory_success":
        # Reasons quote single-spaced (agents/offline/rules.quote): compare so.
        text = _spaced(quoted["text"]).rstrip(".")[:40]
        if not any(text in _spaced(v.message) or _same_signal(quoted["text"], v.message) for v in failed):
            return "error", f"the variants that failed show `{_first(failed[0].message)}`"
    return None


def _spaced(text: str) -> str:
    return steady(text)


_SIGNAL = re.compile(r"\bSIG[A-Z]{2,6}\b")


def _same_signal(quoted: str, message: str) -> bool:
    """A crash quoted by one wording (the probe: ``the process died (signal SIGSEGV)``) and
    seen in another (faulthandler: ``Segmentation fault (SIGSEGV)``) is the same fact."""
    said = set(_SIGNAL.findall(quoted))
    return bool(said) and said <= set(_SIGNAL.findall(message))


def _first(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= 160 else line[:157] + "..."


def entries_of(configs: Mapping[str, Sequence[ResolvedEntry]]) -> dict[TestKey, tuple[Prediction, str]]:
    """test -> (prediction with the entry's edits, reason) from loaded config entries per file
    (``rel`` -> ``ResolvedEntry`` list)."""
    out: dict[TestKey, tuple[Prediction, str]] = {}
    for rel, entries in configs.items():
        for entry in entries:
            cut = entry.exclusions()
            prediction = Prediction(entry.mode, exclude_dtypes=cut.dtypes, exclude_ops=cut.ops,
                                    exclude_modules=cut.modules, exclude_params=cut.params)
            for name in entry.names:
                out[TestKey.of(rel, name)] = (prediction, entry.reason or "")
    return out


def to_json(found: Sequence[Contradiction]) -> list[dict[str, str]]:
    return [asdict(c) for c in found]


#: Where a run directory keeps the results of its executions: the draft, ``eval --run-unrun``
#: and the verification.
RESULTS = (("exec", "results.jsonl"), ("eval", "exec", "results.jsonl"), ("verify", "results.jsonl"))


def check_run(run_dir: Path, configs_dir: Path, torch_root: Path, files: Sequence[str]) -> list[Contradiction]:
    """:func:`check` of the configs of ``files`` in ``configs_dir`` against every execution the
    run directory holds."""
    from testcurator.config.layout import config_path
    from testcurator.config.loader import load_config
    from testcurator.runner.reconcile import is_infrastructure
    from testcurator.runner.results.records import read_jsonl

    records = [r for parts in RESULTS if (path := run_dir.joinpath(*parts)).exists()
               for r in read_jsonl(path) if not is_infrastructure(r)]
    configs = {}
    for rel in files:
        path = config_path(configs_dir, rel)
        if path.exists():
            configs[rel] = [e for f in load_config(path, torch_root=torch_root).files for e in f.entries]
    return check(entries_of(configs), records, torch_root)
