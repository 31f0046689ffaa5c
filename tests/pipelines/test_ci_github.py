"""`testcurator ci github`: a valid workflow (GitHub's schema), clean under zizmor, and a
gate script that decides from the dispatch payload as the seed describes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import needs
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROFILE = ROOT / "examples" / "backend" / "backend.yaml"
TEMPLATES = ROOT / "pipelines" / "templates"


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wf") / ".github" / "workflows" / "testcurator.yml"
    proc = subprocess.run([str(BIN / "testcurator"), "ci", "github", "--backend", str(PROFILE), "--shards", "4",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def load(path: Path) -> dict:
    # YAML 1.1 (PyYAML) reads the key `on` as True.
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True)
    return data


def test_workflow_matches_githubs_schema(workflow: Path) -> None:
    proc = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _zizmor(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "zizmor"), "--offline", "--no-progress", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_zizmor_finds_nothing(workflow: Path) -> None:
    proc = _zizmor(workflow)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings" in proc.stdout + proc.stderr


def test_zizmor_would_catch_a_payload_in_shell(workflow: Path, tmp_path: Path) -> None:
    # The check above means something: a payload field expanded in `run:` is a finding.
    bad = tmp_path / "bad.yml"
    text = workflow.read_text()
    injected = text.replace('echo "the curated suite held"', 'echo "${{ github.event.client_payload.payload.pull_request.title }}"')
    assert injected != text
    bad.write_text(injected)
    proc = _zizmor(bad)
    assert proc.returncode != 0 and "template-injection" in proc.stdout + proc.stderr


def test_shape_of_the_seed(workflow: Path) -> None:
    data = load(workflow)
    assert data["on"]["repository_dispatch"]["types"] == ["pytorch-pr"]
    assert data["on"]["schedule"][0]["cron"] == "0 4 * * *"
    assert set(data["on"]["workflow_dispatch"]["inputs"]) == {"pytorch_ref", "tier", "labels"}
    jobs = data["jobs"]
    assert list(jobs) == ["gate", "build", "test", "merge"]
    assert jobs["test"]["strategy"]["matrix"]["shard"] == [1, 2, 3, 4]
    assert jobs["test"]["needs"] == ["gate", "build"] and jobs["merge"]["needs"] == ["gate", "test"]
    steps = {s["name"]: s for s in jobs["test"]["steps"]}
    assert 'exec --config' in steps["Run shard ${{ matrix.shard }}"]["run"]
    assert '--shard "${SHARD}/${SHARDS}"' in steps["Run shard ${{ matrix.shard }}"]["run"]
    assert steps["Retry shard ${{ matrix.shard }} (infrastructure failure only)"]["if"] == "steps.exec.outputs.rc == '3'"
    assert "Report in_progress to the relay" in steps and "Report completed to the relay" in steps
    merge = "\n".join(s.get("run", "") for s in jobs["merge"]["steps"])
    assert "refine --results shards --config refined" in merge and "GITHUB_STEP_SUMMARY" in merge
    # Payload fields reach the shell only through env: no expression inside any script.
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step["name"]
            if "uses" in step:
                assert len(step["uses"].split("@")[1]) == 40, step["uses"]  # pinned to a commit


def test_bad_options_write_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([str(BIN / "testcurator"), "ci", "github", "--backend", str(PROFILE), "--shards", "2",
                           "--branches", "(", "--out", str(tmp_path / "w.yml")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not a regular expression" in proc.stderr
    assert not (tmp_path / "w.yml").exists()


# --- the gate script, run with bash and jq on canned payloads -------------------------------

NIGHTLY_SHA = "a" * 40
SOURCE_SHA = "b" * 40
FAKE_CURL = f"""#!/usr/bin/env bash
url="${{@: -1}}"
case "$url" in
  *"commits?sha=nightly"*) echo '[{{"sha": "{NIGHTLY_SHA}"}}]' ;;
  *"commits/{NIGHTLY_SHA}") echo '{{"commit": {{"message": "2026-12-01 nightly release ({SOURCE_SHA})"}}}}' ;;
  *"commits/release/2.14") echo '{{"sha": "{"c" * 40}"}}' ;;
  *"/labels") echo '[]' ;;
  *) exit 22 ;;
esac
"""


def _pr(**overrides: object) -> dict:
    pr = {"number": 123, "head": {"sha": "d" * 40}, "merge_commit_sha": "e" * 40, "base": {"ref": "main"},
          "labels": [{"name": "Merged"}], "merged": False}
    pr.update(overrides)
    return {"payload": {"action": "closed", "pull_request": pr}}


def gate(tmp_path: Path, event: str, payload: dict | None = None, **env: str) -> dict[str, str]:
    needs.command("jq", hint="GitHub's runners have it; .ci/run installs it")
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "curl").write_text(FAKE_CURL)
    (fake / "curl").chmod(stat.S_IRWXU)
    (fake / "sleep").write_text("#!/bin/sh\n")  # the label wait, without waiting
    (fake / "sleep").chmod(stat.S_IRWXU)
    output = tmp_path / "github_output"
    output.write_text("")
    full = {"PATH": f"{fake}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(output), "EVENT_NAME": event,
            "PAYLOAD_JSON": json.dumps(payload) if payload is not None else "null", "INPUT_REF": "", "INPUT_TIER": "",
            "GH_TOKEN": "t", "TORCH_REPO": "pytorch/pytorch", "BRANCHES": "main|release/.+", "REQUIRED_LABEL": "Merged",
            "LABEL_WAIT_S": "60", "DISPATCH_TIER": "L1", "SCHEDULE_TIER": "L2",
            "DISPATCH_LABELS": "", "SCHEDULE_LABELS": "", "INPUT_LABELS": "", **env}
    proc = subprocess.run(["bash", str(TEMPLATES / "gate.sh")], cwd=tmp_path, env=full, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


def test_gate_runs_merged_prs_to_main_at_the_merge_commit(tmp_path: Path) -> None:
    out = gate(tmp_path, "repository_dispatch", _pr())
    assert out == {"run": "true", "torch_sha": "e" * 40, "tier": "L1", "labels": "", "pr_number": "123"}
    recorded = json.loads((tmp_path / "dispatch.json").read_text())
    assert recorded["payload"] == _pr() and recorded["torch_sha"] == "e" * 40


@pytest.mark.parametrize(("payload", "why"), [
    (_pr(base={"ref": "feature/x"}), "branch"),
    ({"payload": {"action": "edited", "pull_request": _pr()["payload"]["pull_request"]}}, "action"),
    (_pr(labels=[{"name": "ciflow/trunk"}]), "no label"),
])
def test_gate_skips_other_dispatches(tmp_path: Path, payload: dict, why: str) -> None:
    assert gate(tmp_path, "repository_dispatch", payload)["run"] == "false", why


def test_gate_label_race_falls_back_to_merged(tmp_path: Path) -> None:
    # The label is not there yet, but the PR is merged: run.
    assert gate(tmp_path, "repository_dispatch", _pr(labels=[], merged=True))["run"] == "true"


def test_gate_is_not_fooled_by_shell_in_the_payload(tmp_path: Path) -> None:
    evil = _pr(base={"ref": 'main"; touch pwned; echo "'}, labels=[{"name": "$(touch pwned2)"}])
    assert gate(tmp_path, "repository_dispatch", evil)["run"] == "false"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_gate_resolves_the_nightly_source_sha(tmp_path: Path) -> None:
    out = gate(tmp_path, "schedule")
    assert out["run"] == "true" and out["torch_sha"] == SOURCE_SHA and out["tier"] == "L2"


def test_gate_resolves_a_release_branch(tmp_path: Path) -> None:
    out = gate(tmp_path, "workflow_dispatch", INPUT_REF="release/2.14", INPUT_TIER="L3")
    assert out == {"run": "true", "torch_sha": "c" * 40, "tier": "L3", "labels": "", "pr_number": ""}


@pytest.mark.parametrize(("event", "payload", "env", "labels"), [
    ("repository_dispatch", _pr(), {"DISPATCH_LABELS": "trunk", "SCHEDULE_LABELS": "trunk,nightly"}, "trunk"),
    ("schedule", None, {"DISPATCH_LABELS": "trunk", "SCHEDULE_LABELS": "trunk,nightly"}, "trunk,nightly"),
    ("workflow_dispatch", None, {"DISPATCH_LABELS": "trunk", "INPUT_REF": "release/2.14", "INPUT_TIER": "L2",
                                 "INPUT_LABELS": "slow"}, "slow"),
])
def test_gate_picks_the_labels_of_the_trigger(tmp_path: Path, event: str, payload: dict | None, env: dict,
                                              labels: str) -> None:
    out = gate(tmp_path, event, payload, **env)
    assert out["labels"] == labels
    assert json.loads((tmp_path / "dispatch.json").read_text())["labels"] == labels


def test_labels_reach_exec(tmp_path: Path) -> None:
    out = tmp_path / "wf.yml"
    proc = subprocess.run([str(BIN / "testcurator"), "ci", "github", "--backend", str(PROFILE), "--shards", "2",
                           "--dispatch-labels", "trunk", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert 'DISPATCH_LABELS: "trunk"' in text and 'SCHEDULE_LABELS: ""' in text
    assert 'labels=(--labels "${LABELS}")' in text and "LABELS: ${{ needs.gate.outputs.labels }}" in text
    bad = subprocess.run([str(BIN / "testcurator"), "ci", "github", "--backend", str(PROFILE), "--shards", "2",
                          "--dispatch-labels", "trunk;rm -rf", "--out", str(tmp_path / "bad.yml")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and not (tmp_path / "bad.yml").exists()


def test_exec_gets_the_profile_not_only_its_module(workflow: Path) -> None:
    # The profile carries the env (e.g. the backend's op allowlist) and python_path the
    # curation ran with; a module alone would run the shards under other conditions.
    text = workflow.read_text()
    assert f"BACKEND_PROFILE: {json.dumps(PROFILE.relative_to(ROOT).as_posix())}" in text
    assert '--backend "backend/${BACKEND_PROFILE}"' in text and "BACKEND_MODULE" not in text


def test_profile_outside_the_repository_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "backend.yaml"
    shutil.copy(PROFILE, outside)
    (tmp_path / "sub").mkdir()
    proc = subprocess.run([str(BIN / "testcurator"), "ci", "github", "--backend", str(outside), "--shards", "2",
                           "--out", str(tmp_path / "wf.yml")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path / "sub")
    assert proc.returncode == 2 and "not inside the backend repository" in proc.stderr
    assert not (tmp_path / "wf.yml").exists()
