"""The development tools' own error."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The local Kafka sandbox (or a jar it needs) could not be started, resolved, reached or stopped."""
