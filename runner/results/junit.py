"""Read JUnit XML into records: pytest's, PyTorch ``run_test.py``'s, and our own.

Shapes handled (every ``testcase`` under any root):

- pytest ``--junitxml``: ``classname="dir.test_ops.TestCommonCPU" name="test_x_cpu_float32"``,
  children ``failure``/``error``/``skipped`` (``type="pytest.xfail"`` for xfail), and
  ``properties`` with the curate plugin's ``curate_*`` user properties when it was active.
- PyTorch's ``run_test.py`` under ``test-reports/python-pytest/``: the same, plus
  ``rerun`` children (one per failed attempt before the recorded one).
- ``unittest-xml-reporting`` under ``test-reports/python-unittest/``: ``classname``
  ``TestCommonCPU`` or ``__main__.TestCommonCPU``, an optional ``file`` attribute,
  ``failure type="AssertionError"`` with a plain Python traceback, ``UnexpectedSuccess``.
- The runner's own ``junit.xml`` (``curate_outcome``, ``curate_failure_class``,
  ``curate_evidence``... properties): read back as written, not reclassified.

Identity comes from ``curate_*`` properties when present, else from
:func:`testcurator.names.parse_name` on the class and test name (``known_tests`` lets it
split an op off the test name; ``devices`` adds backend names such as ``curatedev``).
Failures are classified with :func:`testcurator.runner.results.classify.classify`; a crash or
timeout found in a failure's text turns the outcome into ``crashed``/``timeout``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Collection
from pathlib import Path

from testcurator.errors import BadInputError, Location
from testcurator.names import KNOWN_DEVICES, params_from, parse_name
from testcurator.runner.results.classify import classify
from testcurator.runner.results.records import TestRecord, truncate
from testcurator.vocab import FAILING, TestKey, join_name

_IDENTITY = ("generic", "device", "dtype", "op", "op_variant", "module")


def parse_junit(
    path: Path, *, known_tests: Collection[str] | None = None, devices: Collection[str] = (),
) -> list[TestRecord]:
    """Every testcase of one JUnit XML file as a record."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        line, col = exc.position
        raise BadInputError(f"{Location(str(path), line, col + 1)}: malformed JUnit XML: {exc.msg if hasattr(exc, 'msg') else exc}") from exc
    all_devices = tuple(dict.fromkeys((*devices, *KNOWN_DEVICES)))
    return [_record(case, path, known_tests, all_devices) for case in root.iter("testcase")]


def _properties(case: ET.Element) -> dict[str, str]:
    return {
        p.get("name", ""): p.get("value", "")
        for props in case.findall("properties") for p in props.findall("property")
    }


def nodeid_of(case: ET.Element) -> tuple[str, str | None, str]:
    """(node id, class name or None, test name) for a testcase element."""
    classname, name = case.get("classname", ""), case.get("name", "")
    parts = [p for p in classname.split(".") if p]
    if parts and parts[0] == "__main__":
        parts = parts[1:]
    cls = parts[-1] if parts and parts[-1][:1].isupper() else None
    module_parts = parts[:-1] if cls else parts
    file_attr = case.get("file")
    if file_attr:
        module = file_attr
    elif module_parts:
        module = "/".join(module_parts) + ".py"
    else:
        module = ""
    nodeid = str(TestKey(module, cls or "", name)) if module else join_name(cls or "", name)
    return nodeid, cls, name


def _outcome(case: ET.Element, props: dict[str, str]) -> tuple[str, str | None]:
    if props.get("curate_outcome"):
        child = case.find("failure") if case.find("failure") is not None else case.find("error")
        return props["curate_outcome"], _text(child)
    for tag, outcome in (("failure", "failed"), ("error", "error")):
        child = case.find(tag)
        if child is not None:
            if (child.get("type") or "").endswith("UnexpectedSuccess"):
                return "xpassed", _text(child)
            return outcome, _text(child)
    skipped = case.find("skipped")
    if skipped is not None:
        kind = f"{skipped.get('type', '')} {skipped.get('message', '')}".lower()
        outcome = "xfailed" if ("xfail" in kind or "expected failure" in kind) else "skipped"
        return outcome, skipped.get("message") or skipped.text
    return "passed", None


def _text(child: ET.Element | None) -> str | None:
    if child is None:
        return None
    message, body = child.get("message") or "", child.text or ""
    # pytest puts the whole longrepr in the body; unittest-xml-reporting the traceback.
    if message and message.strip() not in body:
        return f"{message}\n{body}" if body else message
    return body or message


def _identity(props: dict[str, str], cls: str | None, name: str, known_tests: Collection[str] | None,
              devices: Collection[str]) -> dict[str, object]:
    if props.get("curate_generic"):
        fields: dict[str, object] = {k: props.get(f"curate_{k}") or None for k in _IDENTITY}
        try:
            fields["params"] = params_from(props.get("curate_params"))
        except ValueError as exc:
            raise BadInputError(f"testcase {name!r}: curate_params: {exc}") from exc
        return fields
    if cls is None:
        return dict.fromkeys(_IDENTITY)
    ident = parse_name(cls, name, known_tests=known_tests, devices=devices)
    return {"generic": ident.generic, "device": ident.device, "dtype": ident.dtype, "op": ident.op,
            "op_variant": ident.op_variant, "module": None}


def _record(case: ET.Element, path: Path, known_tests: Collection[str] | None, devices: Collection[str]) -> TestRecord:
    props = _properties(case)
    nodeid, cls, name = nodeid_of(case)
    outcome, text = _outcome(case, props)
    reruns = case.findall("rerun") + case.findall("flakyFailure") + case.findall("rerunFailure")
    attempts = int(props.get("curate_attempts") or 1 + len(reruns))
    failure_class, evidence = props.get("curate_failure_class") or None, props.get("curate_evidence") or None
    flaky = props.get("curate_flaky") == "True"
    if outcome in FAILING and failure_class is None:
        result = classify(text, outcome=outcome)
        failure_class, evidence = result.failure_class, result.evidence
        if result.failure_class in ("crash", "timeout"):
            outcome = "crashed" if result.failure_class == "crash" else "timeout"
    elif reruns and outcome not in FAILING and not props.get("curate_outcome"):
        first = classify(_text(reruns[0]), outcome="failed")  # failed first, passed on a rerun
        flaky, failure_class = True, "transient"
        evidence = f"{outcome} on attempt {attempts} after failing: [{first.failure_class}] {first.evidence}"
        text = _text(reruns[0])
    try:
        duration = float(case.get("time") or 0.0)
    except ValueError:
        duration = 0.0
    return TestRecord(
        nodeid=nodeid, outcome=outcome, failure_class=failure_class, evidence=evidence, duration=duration,
        attempts=attempts, flaky=flaky, failure_text=truncate(text) if outcome in FAILING or flaky else None,
        source=str(path), **_identity(props, cls, name, known_tests, devices),
    )
