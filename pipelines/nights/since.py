"""What changed since the previous run, and why: the section the report opens with.

Every line carries its cause, from the two runs' identities (memory/history.py) and the
test's own source hash: ``backend changed``, ``torch changed``, ``test source changed``,
``upstream tree changed``, or nothing (then a changed outcome is flaky). The sections:
regressions of the standing configs (and failures after an upstream change, and flaky
failures), fixes (promotions in tonight's config diff, tests that pass again), new, changed
and removed upstream tests, flaky tests with their timelines, and coverage (instances passing
now against then, in total and per file). Two runs with nothing changed read as one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testcurator.memory.history import History, RunIdentity
from testcurator.pipelines.nights.assess import FLAKY, REGRESSION, UPSTREAM, Assessment, causes, statuses
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import HELD_BACK_MODES, TestKey

SHOWN = 20  # lines per list in the markdown (report.json has them all)
_ROOT = "${TORCH_ROOT}/"


def _rel(raw_path: str) -> str:
    return raw_path[len(_ROOT):] if raw_path.startswith(_ROOT) else raw_path


def _cause(found: Sequence[str]) -> str:
    return "; ".join(found) if found else "nothing changed"


def config_changes(standing: Path | None, configs: Path) -> dict[str, list[dict[str, Any]]]:
    """Promotions and demotions between the standing configs and tonight's, per test."""
    from testcurator.config.review import review_paths

    out: dict[str, list[dict[str, Any]]] = {"promoted": [], "demoted": []}
    if standing is None or not configs.is_dir():
        return out
    for file in review_paths(str(standing), str(configs)).files:
        for t in file.tests:
            item = {"test": f"{_rel(file.raw_path)}::{t.name}", "from": t.old_effective, "to": t.new_effective,
                    "edits_added": list(t.edits_added), "edits_removed": list(t.edits_removed)}
            if t.lost_mandatory or t.edits_added:
                out["demoted"].append(item)
            elif (t.old_effective in HELD_BACK_MODES and t.new_effective == "mandatory_success") or t.edits_removed:
                out["promoted"].append(item)
    return out


def since(history: History, now: RunIdentity, records: Sequence[TestRecord], hashes: Mapping[TestKey, str],
          assessment: Assessment, changes: Mapping[str, list[dict[str, Any]]], passing: Mapping[str, int],
          pending: int) -> dict[str, Any]:
    """The section's data (report.json ``since``); ``passing``: tonight's passing instances per file."""
    before = [r for r in history.runs(now.out_dir) if r.run_id != now.run_id]
    if not before:
        return {"previous": None, "note": "the first run of this --out on record: nothing to compare with"}
    prev = before[-1]
    then_status = history.statuses([prev.seq])  # empty for a compacted run
    now_status = statuses(records)
    then_hashes = history.sources(prev.seq)

    def why(key: TestKey) -> str:
        return _cause(causes(prev, now, then_hashes.get(key), hashes.get(key)))

    failures = [f.__dict__ | {"cause": _cause(f.causes)} for f in assessment.failures]
    fixed = {c["test"] for c in changes.get("promoted", [])}
    fixed |= {str(k) for k, s in now_status.items() if s == "P" and then_status.get(k, {}).get(prev.seq) == "F"}
    then_counts = history.counts(now.out_dir).get(prev.seq, {})
    data = {
        "previous": {"run_id": prev.run_id, "date": prev.date, "exit_code": prev.exit_code},
        "identity": _identity_changes(prev, now),
        "regressions": [f for f in failures if f["category"] == REGRESSION],
        "upstream_failures": [f for f in failures if f["category"] == UPSTREAM],
        "flaky_failures": [f for f in failures if f["category"] == FLAKY],
        "fixes": [{"test": t, "cause": why(TestKey.parse(t))} for t in sorted(fixed)],
        "demoted": changes.get("demoted", []),
        "new": sorted(str(k) for k in hashes.keys() - then_hashes.keys()) if then_hashes else [],
        "changed": sorted(str(k) for k in hashes.keys() & then_hashes.keys() if hashes[k] != then_hashes[k]),
        "removed": sorted(str(k) for k in then_hashes.keys() - hashes.keys()) if hashes else [],
        "flaky": [f.__dict__ for f in assessment.flaky],
        "coverage": {"now": sum(passing.values()), "then": sum(c[0] for c in then_counts.values()),
                     "per_file": {f: [then_counts.get(f, (0, 0, 0))[0], passing.get(f, 0)]
                                  for f in sorted(set(passing) | set(then_counts))
                                  if then_counts.get(f, (0, 0, 0))[0] != passing.get(f, 0)}},
        "pending": pending,
        "config_changed": now.standing_digest != now.config_digest,
    }
    moved = any(data[k] for k in ("regressions", "upstream_failures", "flaky_failures", "fixes", "demoted", "new",
                                  "changed", "removed", "flaky")) or data["coverage"]["now"] != data["coverage"]["then"]
    data["no_change"] = not data["identity"] and not moved and not data["config_changed"]
    return data


def _identity_changes(prev: RunIdentity, now: RunIdentity) -> dict[str, list[str]]:
    fields = {"backend": "backend_digest", "torch": "torch_version", "upstream": "upstream_revision"}
    out = {name: [getattr(prev, f), getattr(now, f)] for name, f in fields.items() if getattr(prev, f) != getattr(now, f)}
    if prev.config_digest != now.standing_digest:
        out["configs"] = [prev.config_digest, now.standing_digest]  # edited by hand between the runs
    return out


# --- markdown --------------------------------------------------------------------------------
def _names(items: Sequence[str]) -> str:
    shown = ", ".join(f"`{t}`" for t in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _failure_lines(title: str, items: Sequence[Mapping[str, Any]], what: str) -> list[str]:
    if not items:
        return []
    lines = [f"- **{title} ({len(items)})**: {what}"]
    for f in items[:SHOWN]:
        last = f.get("last_pass")
        lines.append(f"  - `{f['test']}`: {f['failed']} of {f['ran']} instance(s) failed: {f['failure']}; "
                     + (f"last passed in run {last['run_id']} ({last['date']})" if last else "no run on record saw it pass")
                     + f"; cause: {f['cause']}")
    return lines + ([f"  - ... and {len(items) - SHOWN} more (report.json)"] if len(items) > SHOWN else [])


def markdown(data: Mapping[str, Any] | None) -> list[str]:
    """The section's lines (empty when the run recorded no identity)."""
    if not data:
        return []
    lines = ["", "## Since the previous run", ""]
    prev = data.get("previous")
    if prev is None:
        return lines + [f"- {data.get('note')}"]
    head = f"run {prev['run_id']} ({prev['date']}, exit {prev['exit_code']})"
    if data.get("no_change"):
        cov = data["coverage"]["now"]
        return lines + [f"- Nothing changed since {head}: same backend, torch, upstream tree and configs, the same "
                        f"outcomes ({cov} instance(s) passing), an empty config diff."]
    ident = data.get("identity") or {}
    lines.append(f"- compared with {head}; inputs that changed: "
                 + (", ".join(f"{k} ({a} -> {b})" for k, (a, b) in ident.items()) or "none"))
    lines += _failure_lines("Regressions", data["regressions"], "mandatory_success in the standing configs, failing "
                            "tonight; their entries stay until a person accepts a change")
    lines += _failure_lines("Failing after an upstream change", data["upstream_failures"],
                            "torch or the test changed, not the backend; the regenerated decision is written")
    lines += _failure_lines("Flaky failures", data["flaky_failures"], "nothing changed since they passed; modes kept")
    for key, title in (("fixes", "Fixes"), ("demoted", "Demoted or narrowed in tonight's configs")):
        items = data.get(key) or []
        if items:
            lines.append(f"- **{title} ({len(items)})**:")
            lines += [f"  - `{i['test']}`" + (f": {i['from']} -> {i['to']}" if "from" in i else "")
                      + (f", cause: {i['cause']}" if "cause" in i else "") for i in items[:SHOWN]]
    for key, title in (("new", "New upstream tests"), ("changed", "Changed upstream tests (source)"),
                       ("removed", "Removed upstream tests")):
        if data.get(key):
            lines.append(f"- **{title} ({len(data[key])})**, cause: test source changed: {_names(data[key])}")
    if data.get("flaky"):
        lines.append(f"- **Flaky across runs ({len(data['flaky'])})**, outcome changed with nothing changed "
                     "(timeline oldest first):")
        lines += [f"  - `{f['test']}`: {f['timeline']} ({f['flips']} change(s))"
                  + (" quarantined as a non-strict xfail" if f["quarantined"] else "") for f in data["flaky"][:SHOWN]]
    cov = data["coverage"]
    lines.append(f"- coverage: {cov['now']} instance(s) passing now, {cov['then']} then"
                 + ("; " + ", ".join(f"`{f}` {a} -> {b}" for f, (a, b) in list(cov["per_file"].items())[:SHOWN])
                    if cov["per_file"] else ""))
    if data.get("pending"):
        lines.append(f"- {data['pending']} proposed change(s) kept back for review: `testcurator accept --out OUT` "
                     "writes them")
    return lines


# --- the command's last lines ------------------------------------------------------------------
def verdict_lines(report: Mapping[str, Any]) -> list[str]:
    """What ``run`` prints last about the standing configs: each mandatory failure by kind
    (regressions first), what was kept back, and the night's verdict."""
    judge, data = report.get("judge") or {}, report.get("since") or {}
    if not judge.get("judged"):
        return []
    lines: list[str] = []
    for key, title in (("regressions", "REGRESSION"), ("upstream_failures", "FAILING AFTER AN UPSTREAM CHANGE"),
                       ("flaky_failures", "FLAKY")):
        for f in (data.get(key) or [])[:SHOWN]:
            last = f.get("last_pass")
            lines.append(f"{title}: {f['test']}: {f['failed']} of {f['ran']} failed ({f['failure']}); "
                         + (f"last passed in run {last['run_id']} ({last['date']})" if last else "no run on record saw "
                            "it pass") + f"; cause: {f['cause']}")
    pending = len((report.get("emit") or {}).get("pending") or [])
    if pending:
        lines.append(f"kept back for review: {pending} proposed change(s) to regressed or flaky tests "
                     f"(`testcurator accept --out {report.get('out_dir', 'OUT')}` writes them)")
    failing = sorted(set(judge.get("mandatory_failures") or []) - set(judge.get("strict_unexpected_passes") or []))
    if judge.get("infrastructure"):
        lines.append("the standing configs could NOT be judged tonight (infrastructure failure): "
                     + "; ".join(str(i) for i in judge["infrastructure"][:3]))
    elif failing:
        lines.append(f"the standing configs did NOT hold tonight: {len(failing)} mandatory instance failure(s) "
                     f"({len(data.get('regressions') or [])} test(s) regressed, {len(data.get('flaky_failures') or [])} "
                     f"flaky, {len(data.get('upstream_failures') or [])} after an upstream change)")
    else:
        lines.append(f"the standing configs held tonight ({judge.get('tests', 0)} test(s) ran)")
    return lines


# --- a config diff grouped by cause (testcurator review) ----------------------------------------
def causes_for(report: Mapping[str, Any], tests: Sequence[str]) -> dict[str, str]:
    """The cause of each changed test (``${TORCH_ROOT}/file::Class::test``), from the report of
    the run that wrote the new side (its ``since`` section); empty without one."""
    data = report.get("since") or {}
    if not data.get("previous"):
        return {}
    known: dict[str, str] = {}
    for key, label in (("regressions", "regression"), ("upstream_failures", "after an upstream change"),
                       ("flaky_failures", "flaky")):
        known.update({f["test"]: f"{label}: {f['cause']}" for f in data.get(key) or []})
    known.update({f["test"]: f"fix: {f['cause']}" for f in data.get("fixes") or [] if f["test"] not in known})
    for key in ("new", "changed", "removed"):
        known.update({t: "test source changed" for t in data.get(key) or [] if t not in known})
    known.update({f["test"]: "flaky: nothing changed" for f in data.get("flaky") or [] if f["test"] not in known})
    ident = data.get("identity") or {}
    rest = "; ".join(f"{name} changed" for name in ident) if ident else "nothing changed"
    return {t: known.get(_rel(t), rest) for t in tests}
