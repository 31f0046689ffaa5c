"""testcurator.config: the config, the artifact of record, and the backend profile.

The schema (``schema.py``), loading with file:line:col positions (``loader.py``,
``yamlio.py``), the resolved config and the merge of documents into it (``resolve.py``:
``LoadedConfig``, ``ResolvedFile``, ``ResolvedEntry``), what the config decides for one
instantiated test (``apply.py``), comment-preserving edits (``editor.py``) and where each
config lives (``layout.py``), config review (``review.py``; its renderings in
``review_render.py`` and ``review_html.py``, in the words of ``review_words.py``; test
names in rich tables wrap at their ``::``, ``/``, ``_`` with ``wrap.py``) and the backend
profile (``profile.py``; ``profile_write.py`` drafts one from what probing found).

Layer: just above the core. May import only the core modules (``errors``, ``files``,
``names``, ``vocab``); everything else imports it.
"""
