"""modelplane: a fleet control plane for AI inference, as a Pulumi program."""
__version__ = "0.1.0"
