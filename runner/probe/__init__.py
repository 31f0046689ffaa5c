"""testcurator.runner.probe: running things on the device in processes that may crash.

``replay`` and ``replay_worker``: the capability probe, replaying captured calls (op
overload x input dtypes) a batch per process; ``module_replay``: a torch.nn module's forward,
built from its ModuleInfo in torch's module_db. ``checks``, ``profile`` and
``profile_worker``: the probe behind ``profile init``, a check per dtype and hook.

May import ``testcurator.runner.results`` (failure classes), ``plugin``, ``config`` and the
core modules.
"""
