"""Host-side inputs of one run: what is made on the host before a hook runs, and removed after.

Today :mod:`executor.prepare.request` (the run's request and the reviewed bytes it
mounts); the staging folders, persistent homes and dependency caches are still in
:mod:`executor.sandbox` (``staging``, ``homes``, ``depcache``).
"""
