"""testcurator.pipelines.nightly: the nightly LangGraph graph that curates a tree.

``graph`` (the nodes and edges), ``state`` (its one state type), ``steps`` (the work behind
the nodes), ``reverify`` (which draft results already verify the final configs), ``judge``
(the standing configs on the device) and ``run`` (starting and resuming it, checkpoints in SQLite).

May import the modules of ``testcurator.pipelines`` beside it (context, store, emit,
probe, report) and every layer below; never the other workflows or ``cli``.
"""
