"""hookcage: a safe executor for AI coding agents' hook commands."""

__version__ = "0.1.0"
