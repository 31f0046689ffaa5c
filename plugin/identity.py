"""A collected item's identity: generic name, device, dtype, op, module, parameters.

Every option plugin that selects or records by identity needs it (``curate.py`` applies
the config by it, ``only.py`` and ``tiers.py`` keep items by it, ``capture.py`` and
``collect.py`` write it), so it lives in this module of its own, below all of them, rather
than in any one plugin that the others would then import. The curate plugin computes each
identity once at collection and, when a plugin that reads identities is registered (its
``IDENTITY_READERS``), keeps it in the item's stash under :data:`IDENTITY_KEY`; a plugin that
finds none there computes it with :func:`item_identity`.
"""

from __future__ import annotations

import pytest

from testcurator.names import TestIdentity, identify

IDENTITY_KEY = pytest.StashKey[TestIdentity]()


def item_identity(item: pytest.Item) -> TestIdentity:
    """The identity of a collected item (unittest method, or plain pytest function)."""
    cls = getattr(item, "cls", None)
    if cls is not None:
        name = getattr(item, "originalname", None) or item.name
        return identify(cls, name, getattr(cls, name, None))
    name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    return _function_identity(item, name)


def _function_identity(item: pytest.Item, name: str) -> TestIdentity:
    """A plain pytest function's identity: its name, and its ``parametrize`` values as text."""
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    fields = tuple(sorted((k, repr(v)) for k, v in params.items()))
    return TestIdentity(cls="", test=name, params=fields)
