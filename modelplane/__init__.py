"""modelplane: a fleet control plane for AI inference, as a Pulumi program."""

from .version import VERSION as __version__
