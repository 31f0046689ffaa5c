"""testcurator.cli: the ``testcurator`` command (typer), one module per command group.

It parses options, builds what the layers below need (e.g. the pipeline's ``RunContext``),
calls them and maps their errors to exit codes (2 bad input, 3 infrastructure).

Layer: the top. May import every other package; nothing imports it.
"""
