"""testcurator.pipelines.enable_op: ``testcurator enable-op``, what a newly supported op
unlocks.

``workflow`` (the command's steps), ``probe`` (replaying the op's calls), ``execute``
(``--execute``: running only the admitted tests) and ``supported`` (the
``global.supported_ops`` line it declares).

May import the modules of ``testcurator.pipelines`` beside it and every layer below; never
the other workflows or ``cli``.
"""
