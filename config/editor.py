"""Edit config files without disturbing what humans wrote.

An edit is a text splice: the file is parsed (ruamel.yaml round-trip, for positions) and
only the blocks of the entries that change are rewritten; every other byte (human
comments, ordering, blank lines, flow style) stays as it was. A reason goes in a ``#``
comment block directly above its entry, which is also where the loader reads it back
from. The result is re-validated before it is written, atomically.

Why not dump the whole round-trip tree: ruamel attaches a comment above item N to item
N-1 (see DEPENDENCIES.md), so deleting or reordering entries moves reasons onto the wrong
neighbour. Splicing whole blocks (comment + entry) cannot.
"""

from __future__ import annotations

import io
import re
import textwrap
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from testcurator.config.loader import load_model
from testcurator.config.schema import ConfigDocument
from testcurator.config.yamlio import to_plain
from testcurator.errors import BadInputError, ConfigError, Location, Problem
from testcurator.files import atomic_write_text

COMMENT_WIDTH = 96


@dataclass(frozen=True)
class EntrySpec:
    """One ``tests`` entry to write: names, mode, optional edits (plain data) and reason."""

    names: tuple[str, ...]
    mode: str
    reason: str | None = None
    edits: Mapping[str, Any] | None = None

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"names": list(self.names), "mode": self.mode}
        if self.edits:
            data["edits"] = _plain(self.edits)
        return data


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_DUMPERS = threading.local()


def _dumper() -> YAML:
    """One dumper per thread, reused: building one per entry (ruamel globs for plug-ins in
    each constructor) was a tenth of rendering a config; bucket nodes run in threads."""
    yaml = getattr(_DUMPERS, "yaml", None)
    if yaml is None:
        yaml = _DUMPERS.yaml = YAML(typ="rt")
        yaml.indent(mapping=2, sequence=4, offset=2)
        yaml.width = 4096
    return yaml


def dump_block(data: Any, indent: int) -> list[str]:
    """``data`` as YAML lines indented by ``indent`` spaces."""
    buf = io.StringIO()
    _dumper().dump(data, buf)
    # The sequence offset makes ruamel indent a top-level list; normalise to column 0.
    text = textwrap.dedent(buf.getvalue())
    return [(" " * indent + line) if line else line for line in text.splitlines()]


# Terminal styling (CSI sequences): upstream error messages carry some (torch.load's "Weights
# only load failed" is printed in bold), and failure texts become reasons.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# What YAML does not allow anywhere in a stream, comments included (YAML 1.2, c-printable).
_NOT_YAML = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def printable(text: str) -> str:
    """``text`` as a YAML file can hold it: terminal styling dropped, any other character
    YAML forbids written as its escape (``\\x07``), so a config never fails to load
    because of what a failing test printed."""
    return _NOT_YAML.sub(lambda m: ascii(m.group())[1:-1], _ANSI.sub("", text))


def comment_lines(reason: str | None, indent: int) -> list[str]:
    """A reason as ``#`` lines wrapped to a readable width, read back by
    :func:`testcurator.config.resolve.comment_above`.

    Lines break only between words: a node id, test name, op or path longer than the width
    stays whole on a line of its own (issue 9: ``TestCommonCURATEDEV::test`` /
    ``_compare_cpu``). Paragraphs are separated by a bare ``#`` line; runs of spaces
    within a paragraph become one.
    """
    if not reason:
        return []
    out: list[str] = []
    paragraphs = [p.split() for p in printable(reason).strip().splitlines()]
    for n, words in enumerate(p for p in paragraphs if p):
        if n:
            out.append(" " * indent + "#")
        out.extend(" " * indent + "# " + line for line in _fill(words, COMMENT_WIDTH - indent - 2))
    return out


def _fill(words: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def render_entry(spec: EntrySpec, dash_col: int) -> list[str]:
    return comment_lines(spec.reason, dash_col) + dump_block([spec.as_data()], dash_col)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


@dataclass(frozen=True)
class _Block:
    start: int  # first line (comment above included), 0-based
    end: int  # one past the last line
    dash_col: int


def _item_blocks(lines: Sequence[str], seq: CommentedSeq) -> list[_Block]:
    """The text blocks of a block-style sequence's items, each with its comment above."""
    heads = []
    for i in range(len(seq)):
        line, col = seq.lc.item(i)
        dash = lines[line].rfind("-", 0, col + 1)
        heads.append((line, dash if dash >= 0 else max(col - 2, 0)))
    blocks: list[_Block] = []
    for i, (line, dash) in enumerate(heads):
        start = line
        while start > 0 and _is_comment(lines[start - 1]) and _indent(lines[start - 1]) >= dash:
            start -= 1
        blocks.append(_Block(start, line + 1, dash))
    for i, block in enumerate(blocks):
        end = blocks[i + 1].start if i + 1 < len(blocks) else _scan_end(lines, heads[i][0], block.dash_col)
        blocks[i] = _Block(block.start, end, block.dash_col)
    return blocks


def _sort_key(spec: EntrySpec) -> str:
    return min(spec.names, default="")


def _scan_end(lines: Sequence[str], head: int, dash_col: int) -> int:
    end, i = head + 1, head + 1
    while i < len(lines):
        text = lines[i]
        if text.strip() and _indent(text) <= dash_col:
            break
        if text.strip():
            end = i + 1
        i += 1
    return end


class ConfigEditor:
    """Load one config file, change entries by name, save atomically (validated first)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.original = text
        self.text = text
        self._parsed: tuple[str | None, Any] = (None, None)  # (text, its tree): see _tree

    @classmethod
    def open(cls, path: Path) -> ConfigEditor:
        if not path.exists():
            raise BadInputError(f"config file does not exist: {path}")
        return cls(path, path.read_text(encoding="utf-8"))

    @classmethod
    def new(cls, path: Path, *, labels: Sequence[str] = (), header: str | None = None,
            global_: Mapping[str, Any] | None = None, unlisted_file_mode: str | None = None) -> ConfigEditor:
        suite: dict[str, Any] = {"schema_version": 1}
        if labels:
            suite["labels"] = list(labels)
        if global_:
            suite["global"] = _plain(global_)
        if unlisted_file_mode:
            suite["unlisted_file_mode"] = unlisted_file_mode
        suite["files"] = []
        lines = comment_lines(header, 0) + dump_block({"test_suite_config": suite}, 0)
        return cls(path, "\n".join(lines) + "\n")

    # --- reading ----------------------------------------------------------------------
    def _tree(self) -> Any:
        # Parsed once per state of the text: one update() reads the tree up to five times,
        # and a round-trip parse of a large config is most of an upgrade's emit stage.
        # Callers only read the tree (edits go to self.text), so sharing it is safe.
        if self._parsed[0] is not self.text:
            self._parsed = (self.text, YAML(typ="rt").load(self.text))
        return self._parsed[1]

    def _files(self, tree: Any) -> CommentedSeq:
        suite = tree.get("test_suite_config") if isinstance(tree, CommentedMap) else None
        if not isinstance(suite, CommentedMap):
            raise BadInputError(f"{self.path}: not a config (no test_suite_config mapping)")
        return suite.get("files")

    def file_index(self, raw_path: str) -> int | None:
        files = self._files(self._tree())
        for i, entry in enumerate(files or []):
            if entry.get("path") == raw_path:
                return i
        return None

    # --- editing ----------------------------------------------------------------------
    def ensure_file(self, raw_path: str, unlisted_test_mode: str = "skip") -> None:
        """Add a ``files`` entry for ``raw_path`` unless there is one."""
        if self.file_index(raw_path) is not None:
            return
        tree = self._tree()
        files = self._files(tree)
        data = {"path": raw_path, "unlisted_test_mode": unlisted_test_mode, "tests": []}
        lines = self.text.splitlines()
        suite = tree["test_suite_config"]
        if isinstance(files, CommentedSeq) and len(files) and not files.fa.flow_style():
            blocks = _item_blocks(lines, files)
            new = dump_block([data], blocks[-1].dash_col)
            self._splice(lines, [(blocks[-1].end, blocks[-1].end, new)])
            return
        if isinstance(files, CommentedSeq) and len(files):
            raise BadInputError(f"{self.path}: cannot add to a flow-style files list; write it in block style")
        self._replace_key(lines, suite, "files", dump_block([data], suite.lc.col + 2))

    def update(self, raw_path: str, specs: Sequence[EntrySpec] = (), *, drop: Sequence[str] = (),
               unlisted_test_mode: str = "skip") -> None:
        """Make ``specs`` true for ``raw_path``: names move out of their old entries, an
        entry with exactly the same names is rewritten in place (keeping its comment when
        the spec has no reason), the rest go where a fresh write puts them (by name). ``drop``
        names are removed."""
        self.ensure_file(raw_path, unlisted_test_mode)
        tree = self._tree()
        fmap = self._files(tree)[self.file_index(raw_path) or 0]
        lines = self.text.splitlines()
        tests = fmap.get("tests")
        if not isinstance(tests, CommentedSeq) or not len(tests):
            if not specs:
                return  # nothing to add, nothing to drop
            new = [line for s in specs for line in render_entry(s, fmap.lc.col + 2)]
            self._replace_key(lines, fmap, "tests", new)
            return
        if tests.fa.flow_style():
            raise BadInputError(f"{self.path}: cannot edit a flow-style tests list of {raw_path}; write it in block style")
        self._splice(lines, self._entry_splices(lines, tests, list(specs), set(drop)))
        self._empty_list_if_bare(raw_path)

    def _empty_list_if_bare(self, raw_path: str) -> None:
        # Dropping every entry leaves a bare "tests:" (null, which the schema rejects).
        fmap = self._files(self._tree())[self.file_index(raw_path) or 0]
        if "tests" in fmap and fmap.get("tests") is None:
            lines = self.text.splitlines()
            line = fmap.lc.key("tests")[0]
            lines[line] = lines[line].rstrip() + " []"
            self.text = "\n".join(lines) + "\n"

    def _entry_splices(self, lines: list[str], tests: CommentedSeq, specs: list[EntrySpec],
                       drop: set[str]) -> list[tuple[int, int, list[str]]]:
        blocks = _item_blocks(lines, tests)
        moving = {n for s in specs for n in s.names} | drop
        splices: list[tuple[int, int, list[str]]] = []
        for entry, block in zip(tests, blocks):
            names = [str(n) for n in entry.get("names", [])]
            old_comment = lines[block.start : block.start + self._comment_len(lines, block)]
            same = next((s for s in specs if set(s.names) == set(names)), None)
            if same is not None:
                specs.remove(same)
                body = dump_block([same.as_data()], block.dash_col)
                comment = comment_lines(same.reason, block.dash_col) if same.reason else old_comment
                splices.append((block.start, block.end, comment + body))
                continue
            keep = [n for n in names if n not in moving]
            if len(keep) == len(names):
                continue
            if not keep:
                splices.append((block.start, block.end, []))
                continue
            data = {"names": keep, "mode": str(entry["mode"])}
            if entry.get("edits"):
                data["edits"] = to_plain(entry["edits"])
            splices.append((block.start, block.end, old_comment + dump_block([data], block.dash_col)))
        # A new entry goes where a full run writes it (entries sorted by name), so an update and
        # a fresh write of the same content are the same bytes: before the first entry whose
        # name sorts after it, else last.
        keys = [min((str(n) for n in entry.get("names", [])), default="") for entry in tests]
        inserts: dict[int, list[str]] = {}
        for spec in sorted(specs, key=_sort_key):
            at = next((b.start for b, k in zip(blocks, keys) if k > _sort_key(spec)), blocks[-1].end)
            inserts.setdefault(at, []).extend(render_entry(spec, blocks[-1].dash_col))
        splices += [(at, at, new) for at, new in inserts.items()]
        return splices

    @staticmethod
    def _comment_len(lines: Sequence[str], block: _Block) -> int:
        count = 0
        for line in lines[block.start:block.end]:
            if not _is_comment(line):
                break
            count += 1
        return count

    def _replace_key(self, lines: list[str], mapping: CommentedMap, key: str, items: list[str]) -> None:
        """Rewrite ``key: []`` (or a missing key) as a block sequence holding ``items``."""
        indent = mapping.lc.col
        if key in mapping:
            line = mapping.lc.key(key)[0]
            self._splice(lines, [(line, line + 1, [" " * indent + f"{key}:"] + items)])
            return
        end = _scan_end(lines, mapping.lc.line, indent - 1) if indent else len(lines)
        self._splice(lines, [(end, end, [" " * indent + f"{key}:"] + items)])

    def _splice(self, lines: list[str], splices: Sequence[tuple[int, int, list[str]]]) -> None:
        # Bottom-up, so earlier positions stay valid.
        for start, end, new in sorted(splices, key=lambda s: (s[0], s[1]), reverse=True):
            lines[start:end] = new
        self.text = "\n".join(lines) + "\n"

    # --- saving -----------------------------------------------------------------------
    def check(self) -> None:
        """Raise ConfigError when the edited text is not a valid config."""
        tmp = self.path.with_name(f".{self.path.name}.check")
        try:
            atomic_write_text(tmp, self.text)
            load_model(tmp, ConfigDocument)
        except ConfigError as exc:
            raise ConfigError([_relabel(p, self.path) for p in exc.problems]) from exc
        finally:
            tmp.unlink(missing_ok=True)

    def save(self) -> bool:
        """Validate, then write atomically; returns whether the file changed."""
        if self.path.exists() and self.text == self.original:
            return False
        self.check()
        atomic_write_text(self.path, self.text)
        self.original = self.text
        return True


def _relabel(problem: Problem, path: Path) -> Problem:
    loc = problem.location
    return Problem(Location(str(path), loc.line, loc.col), problem.message)
