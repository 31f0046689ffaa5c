"""testcurator.cli: the ``testcurator`` command (typer).

``main`` (the entry point: registers the command groups, maps errors to exit codes: 2 bad
input, 3 infrastructure), ``commands`` (how a command is declared, so all behave alike),
``options`` (one vocabulary of options), ``paths`` (what a path option may name) and
``run_dirs`` (finding a run from what the user typed). ``groups/``: one module per command
group; each parses options, builds what the layers below need (e.g. the pipeline's
``RunContext``) and calls them.

Layer: the top. May import every other package; nothing imports it.
"""
