"""testcurator.runner.shards: one run split over shards and executors.

``run`` (shards executed and merged into one result), ``executors`` (local processes, the
registry) and ``ray_executor`` (Ray tasks), ``merge`` (the shards' records and JUnit into
one), ``snapshot`` (a shard's inputs, frozen) and ``durations`` (the recorded test times the
split is balanced by).

May import the modules of ``testcurator.runner`` beside it (command, execute, manifest,
progress, reconcile), ``runner.results``, ``plugin``, ``config`` and the core modules.
"""
