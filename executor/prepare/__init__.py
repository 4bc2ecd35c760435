"""Host-side inputs of one run: what is made on the host before a hook runs, and removed after.

- :mod:`executor.prepare.request`: the run's request and the reviewed bytes it mounts
  (one call before a run, ``run_request``; one after, ``unstage``);
- :mod:`executor.prepare.staging` and :mod:`executor.prepare.staged_trees`: hookcage's own
  folders the engine can see, and the staged trees kept per content;
- :mod:`executor.prepare.homes`: persistent homes;
- :mod:`executor.prepare.depcache`: a script's dependencies, fetched once per content.

It imports the sandbox (what a run is); the sandbox never imports it.
"""
