"""modelplane: a fleet control plane for AI inference, as a Pulumi program."""

from .version import VERSION as __version__

__all__ = ["__version__"]
