"""testcurator.pipelines.gaps: the backend's gap board, `testcurator gaps RUN_DIR`.

What to implement next: every gap of the device (an op at some dtypes that is missing, has no
kernel for a dtype, crashes, computes a wrong result, returns a copy where a view is due, or
errs; a feature such as DLPack; a dtype the device does not declare), with the upstream tests
and instances it holds back, ranked by the tests it frees alone.

``sources`` (what a finished run left: results, decisions, the capture, the probe's table),
``derive`` (what an error text says when no probe status names it: a view returned as a copy,
a missing feature), ``attribute`` (each held-back instance to its gaps, or to "unattributed"
with its reason), ``board`` (gaps grouped per op, alone and shared, ranked), ``render`` (text,
markdown, json), ``html`` (the picture) and ``files`` (the board files of a finished run and
the report's "What to implement next" section).

May import the modules of ``testcurator.pipelines`` beside it (not the other workflows) and
every layer below; never ``cli``.
"""
