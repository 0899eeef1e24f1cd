"""Pulumi entry point (thin): everything lives in modelplane.infra.program."""
from modelplane.infra.program import run

run()
