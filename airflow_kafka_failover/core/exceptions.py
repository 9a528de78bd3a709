"""Errors that callers need to tell apart. Every message names the offending value and what to do."""

from __future__ import annotations


class FailoverError(Exception):
    """Base class of the errors this provider raises on purpose."""


class ConfigError(FailoverError, ValueError):
    """A configuration value (file, connection, parameter) is invalid."""


class TranslationError(FailoverError, ValueError):
    """Offsets could not be translated from one cluster to the other."""


class CheckpointError(FailoverError, ValueError):
    """A Spark checkpoint directory is missing, empty or corrupt."""


class DataLossError(FailoverError, RuntimeError):
    """A cluster holds less data than it held before; switching to it would lose records."""
