"""``python -m executor`` is the ``hookcage`` command."""

from executor.cli import main

main()
