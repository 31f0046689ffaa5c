"""One line in ``global.supported_ops``: how ``enable-op`` declares a capability.

Spliced as text (like every config edit, see config/editor.py), so the rest of the file,
human comments included, is left byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from testcurator.config.editor import (
    ConfigEditor,
    _item_blocks,
    comment_lines,
    dump_block,
)
from testcurator.errors import BadInputError


def add_supported_op(path: Path, op: str, note: str) -> bool:
    """Append ``{name: op}`` to ``global.supported_ops`` of ``path`` if declared and missing;
    returns whether the file changed."""
    editor = ConfigEditor.open(path)
    tree = editor._tree()
    suite = tree.get("test_suite_config") if isinstance(tree, CommentedMap) else None
    caps = suite.get("global") if isinstance(suite, CommentedMap) else None
    ops = caps.get("supported_ops") if isinstance(caps, CommentedMap) else None
    if not isinstance(ops, CommentedSeq) or not isinstance(caps, CommentedMap):
        return False  # not declared: every op counts as supported already
    if any(isinstance(o, CommentedMap) and o.get("name") == op for o in ops):
        return False
    lines = editor.text.splitlines()
    if not len(ops):
        editor._replace_key(lines, caps, "supported_ops", comment_lines(note, caps.lc.col + 2)
                            + dump_block([{"name": op}], caps.lc.col + 2))
    elif ops.fa.flow_style():
        raise BadInputError(f"{path}: global.supported_ops is a flow-style list; write it in block style to add {op}")
    else:
        last = _item_blocks(lines, ops)[-1]
        new = comment_lines(note, last.dash_col) + dump_block([{"name": op}], last.dash_col)
        editor._splice(lines, [(last.end, last.end, new)])
    return editor.save()
