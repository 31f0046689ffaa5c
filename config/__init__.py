"""testcurator.config: the config, the artifact of record, and the backend profile.

The schema (``schema.py``), loading with file:line:col positions (``loader.py``,
``yamlio.py``, ``resolve.py``), what the config decides for one instantiated test
(``apply.py``), comment-preserving edits (``editor.py``) and where each config lives
(``layout.py``), config review (``review.py``, ``review_render.py``; test names in rich
tables wrap at their ``::``, ``/``, ``_`` with ``wrap.py``) and the backend
profile (``profile.py``; ``profile_write.py`` drafts one from what probing found).

Layer: just above the core. May import only the core modules (``errors``, ``files``,
``names``, ``vocab``); everything else imports it.
"""
