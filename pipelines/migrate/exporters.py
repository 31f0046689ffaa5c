"""PyTorch's disabled-tests JSON: the format, and exporting a config to it.

The format (read by ``torch.testing._internal.common_utils`` from ``DISABLED_TESTS_FILE`` or
``--import-disabled-tests``, and used as-is by out-of-tree backends such as Ascend):

    {"test_bar_cpu_float32 (__main__.TestFooCPU)": ["<issue URL or reason>", ["linux", ...]]}

PyTorch's own matching (``check_if_enable``): a test is disabled when its class name
*starts with* the key's class and the key's test equals the method name or the method
name with its trailing ``_<device>_<dtype>`` removed; an empty platform list means every
platform. So ``TestFoo`` also disables ``TestFooBarCPU``, and a dtype-less test
(``test_x_cpu``) is only ever hit by its full name.

Export: every instantiated test the config decides ``skip`` (entry, edit or capability;
``--include-unlisted`` adds the file's unlisted tests) is written by its instantiated name.
The format knows only "disabled", so ``xfail`` and ``xfail_strict`` export as disabled too
(``include_xfail=False`` leaves them out). Without a torch root nothing can be
instantiated: whole entries export by generic name (``test_bar (__main__.TestFoo)``), which
PyTorch applies to dtype-suffixed instances only; edits and capabilities are left out and
counted in the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.config.apply import decide
from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig
from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.installed import dtype_names
from testcurator.names import KNOWN_DEVICES, TestIdentity, split_device_class
from testcurator.runner.collect import CollectedTest, collect
from testcurator.vocab import HELD_BACK_MODES, TestKey, split_name

KEY_RE = re.compile(r"^(?P<test>\S+) \((?:(?P<module>\S+)\.)?(?P<cls>[A-Za-z_]\w*)\)$")
EXPORTED_ORIGINS = ("entry", "edit", "capability")


@dataclass(frozen=True)
class DisabledKey:
    """One parsed key of the JSON: ``test (module.Class)``."""

    test: str
    module: str | None
    cls: str


def parse_key(key: str) -> DisabledKey:
    m = KEY_RE.match(key.strip())
    if m is None:
        raise BadInputError(f"disabled-tests key {key!r} is not 'test_name (module.TestClass)'")
    return DisabledKey(m.group("test"), m.group("module"), m.group("cls"))


def format_key(cls: str, test: str) -> str:
    # PyTorch runs test files as scripts, so the module part is always __main__ there.
    return f"{test} (__main__.{cls})"


def sanitized_name(name: str, devices: Collection[str] = KNOWN_DEVICES) -> str:
    """``test_bar_cpu_float32`` -> ``test_bar``, as PyTorch strips names before matching."""
    chunks = name.split("_")
    if len(chunks) > 1 and chunks[-1] in dtype_names():
        return "_".join(chunks[:-2] if len(chunks) > 2 and chunks[-2] in devices else chunks[:-1])
    return name


def key_matches(key: DisabledKey, test: CollectedTest) -> bool:
    """PyTorch's rule: class prefix, and exact (or suffix-stripped) test name."""
    if not test.cls or not test.cls.startswith(key.cls):
        return False
    devices = (test.device,) + KNOWN_DEVICES if test.device else KNOWN_DEVICES
    return key.test in (test.name, sanitized_name(test.name, devices))


@dataclass
class ExportReport:
    """What an export wrote, and what it could not express."""

    written: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    not_exported: list[str] = field(default_factory=list)


def export_disabled_tests(config_path: Path, out: Path, *, torch_root: Path | None = None,
                          include_xfail: bool = True, include_unlisted: bool = False,
                          platforms: Sequence[str] = (), collected: Sequence[CollectedTest] | None = None) -> ExportReport:
    """Write ``out`` (JSON, keys sorted) for the config at ``config_path``."""
    modes = HELD_BACK_MODES if include_xfail else ("skip",)
    if torch_root is None and collected is None:
        loaded = load_config(config_path, torch_root=Path("/TORCH_ROOT"))
        data, report = _generic_export(loaded, modes, list(platforms))
    else:
        loaded = load_config(config_path, torch_root=torch_root)
        if collected is None:
            files = [f.resolved_path for f in loaded.files if f.resolved_path.is_file()]
            collected = collect(files, rootdir=torch_root or Path.cwd())
        origins = EXPORTED_ORIGINS + (("unlisted_test",) if include_unlisted else ())
        data, report = _instance_export(loaded, collected, modes, origins, list(platforms))
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_text(out, text)
    report.written = len(data)
    return report


def _value(reason: str | None, mode: str, platforms: list[str]) -> list[object]:
    text = f"testcurator {mode}: {reason}" if reason else f"testcurator {mode}"
    return [text, sorted(platforms)]


def _instance_export(loaded: LoadedConfig, collected: Sequence[CollectedTest], modes: Sequence[str],
                     origins: Sequence[str], platforms: list[str]) -> tuple[dict[str, list[object]], ExportReport]:
    data: dict[str, list[object]] = {}
    report = ExportReport()
    for test in collected:
        file = loaded.file_for(test.file)
        if file is None or not test.cls:
            continue
        ident = TestIdentity(cls=split_device_class(test.cls)[0], test=split_name(test.generic)[1],
                             device=test.device, dtype=test.dtype, op=test.op, module=test.module)
        applied = decide(loaded, file, ident)
        if applied.mode not in modes or applied.origin not in origins:
            continue
        entry = file.entry_for(test.generic)
        reason = entry.reason if applied.origin == "entry" and entry is not None else applied.reason.split(" (")[0]
        data[format_key(test.cls, test.name)] = _value(reason, applied.mode, platforms)
        report.by_mode[applied.mode] = report.by_mode.get(applied.mode, 0) + 1
    report.by_mode = dict(sorted(report.by_mode.items()))
    return data, report


def _generic_export(loaded: LoadedConfig, modes: Sequence[str],
                    platforms: list[str]) -> tuple[dict[str, list[object]], ExportReport]:
    data: dict[str, list[object]] = {}
    report = ExportReport()
    for file in loaded.files:
        for entry in file.entries:
            for name in entry.names:
                cls, test = split_name(name)
                if not cls:
                    report.not_exported.append(f"{TestKey.of(file.raw_path, name)}: a module-level function has no class to key on")
                    continue
                if entry.mode in modes:
                    data[format_key(cls, test)] = _value(entry.reason, entry.mode, platforms)
                    report.by_mode[entry.mode] = report.by_mode.get(entry.mode, 0) + 1
                elif entry.edits is not None:
                    report.not_exported.append(f"{TestKey.of(file.raw_path, name)}: edits need instantiated names (give --torch-root)")
        if file.capabilities.supported_dtypes is not None or file.capabilities.supported_ops is not None:
            report.not_exported.append(f"{file.raw_path}: capability skips need instantiated names (give --torch-root)")
    report.not_exported.sort()
    report.by_mode = dict(sorted(report.by_mode.items()))
    return data, report
