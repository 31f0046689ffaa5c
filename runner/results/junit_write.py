"""Write JUnit XML from records, so crashes and timeouts show up in any CI viewer.

The pytest process that ran a crashing test never writes its own XML, so the runner's
``junit.xml`` is built here from the records. Each ``testcase`` keeps the record's fields
as ``curate_*`` properties (the curate plugin's names for identity, plus
``curate_outcome``, ``curate_failure_class``, ``curate_evidence``, ``curate_attempts``,
``curate_flaky``; ``curate_params`` as a JSON object when the instance has
@parametrize values), which :mod:`testcurator.runner.results.junit` reads back losslessly.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from testcurator.files import atomic_write_text
from testcurator.names import params_text
from testcurator.runner.results.records import TestRecord, counts
from testcurator.vocab import FAILING, NOT_RUN, TestKey

# XML 1.0 forbids most control characters; tracebacks with ANSI colours carry them.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_PROPERTY_FIELDS = ("generic", "device", "dtype", "op", "module", "outcome", "failure_class",
                    "evidence", "attempts", "flaky")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("?", text)


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """pytest's own mangling: ``a/test_x.py::TestFoo::test_bar`` -> (``a.test_x.TestFoo``, ``test_bar``)."""
    parts = TestKey.parse(nodeid).parts
    path = parts[0][:-3] if parts[0].endswith(".py") else parts[0]
    names = [path.replace("/", "."), *parts[1:]]
    return ".".join(names[:-1]), names[-1]


def _testcase(record: TestRecord) -> ET.Element:
    classname, name = split_nodeid(record.nodeid)
    case = ET.Element("testcase", classname=classname, name=name, time=f"{record.duration:.3f}")
    props = ET.SubElement(case, "properties")
    for key in _PROPERTY_FIELDS:
        value = getattr(record, key)
        if value is not None:
            ET.SubElement(props, "property", name=f"curate_{key}", value=_clean(str(value)))
    if record.params:
        ET.SubElement(props, "property", name="curate_params", value=_clean(params_text(record.params)))
    if record.outcome in FAILING and record.outcome != "error":  # an error has its own element
        child = ET.SubElement(case, "failure", message=_clean(record.evidence or record.outcome),
                              type=record.failure_class or record.outcome)
        child.text = _clean(record.failure_text or "")
    elif record.outcome == "error":
        child = ET.SubElement(case, "error", message=_clean(record.evidence or "error"), type=record.failure_class or "error")
        child.text = _clean(record.failure_text or "")
    elif record.outcome in NOT_RUN:
        ET.SubElement(case, "skipped", message=_clean((record.failure_text or record.outcome)[:500]),
                      type="pytest.xfail" if record.outcome == "xfailed" else "pytest.skip")
    return case


def junit_tree(records: Sequence[TestRecord], name: str = "testcurator") -> ET.ElementTree:
    c = counts(records)
    suite = ET.Element(
        "testsuite", name=name, tests=str(len(records)),
        failures=str(c["failed"] + c["crashed"] + c["timeout"]), errors=str(c["error"]),
        skipped=str(c["skipped"] + c["xfailed"]), time=f"{sum(r.duration for r in records):.3f}",
    )
    suite.extend(_testcase(r) for r in records)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, records: Sequence[TestRecord]) -> None:
    tree = junit_tree(records)
    text = ET.tostring(tree.getroot(), encoding="unicode", xml_declaration=False)
    atomic_write_text(path, '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n")
