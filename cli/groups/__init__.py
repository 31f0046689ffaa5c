"""testcurator.cli.groups: one module per command or command group of ``testcurator``.

Each declares its commands with ``testcurator.cli.commands`` and their options from
``testcurator.cli.options``; ``testcurator.cli.main`` registers them all, and names which
module owns which command.

May import the modules of ``testcurator.cli`` beside it (commands, options, paths,
run_dirs) and every other package.
"""
