"""testcurator.pipelines.upgrade: ``testcurator upgrade``, carrying a curated config to a
new PyTorch.

``workflow`` (the steps), ``delta`` (what changed between the two trees), ``config`` (the
carried config) and ``modes`` (how each test's mode carries over).

May import ``testcurator.pipelines.nightly`` (it reruns the graph on what changed), the
modules of ``testcurator.pipelines`` beside it and every layer below; never the other
workflows or ``cli``.
"""
