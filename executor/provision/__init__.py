"""Provisioning: what hookcage needs on a machine before any hook runs, never on the dispatch path.

- :mod:`~executor.provision.images`: the runner image build (``hookcage image build``).
- :mod:`~executor.provision.recipe`: what the runner image is made of, hashed into its labels.
- :mod:`~executor.provision.build_context`: the build context with the pinned wheels' binaries and the statx shim.
- :mod:`~executor.provision.mirror`: which Debian mirror the build uses.
- :mod:`~executor.provision.base_image`: the offline base (mmdebstrap's tar, slimmed, imported).
- :mod:`~executor.provision.mmdebstrap`: an mmdebstrap to run, the system's or hookcage's own copy.
- :mod:`~executor.provision.service_image`: the images compose.yaml runs (``image build --service``).
- :mod:`~executor.provision.runsc`: ``hookcage setup runsc`` (gVisor registered with dockerd).
- :mod:`~executor.provision.doctor`: what ``hookcage doctor`` asks of provisioning.

It imports :mod:`executor.sandbox` (engine access, image facts); the sandbox never imports it.
"""
