"""The release version: one place, read by pyproject.toml (setuptools' dynamic version) and `modelplane --version`."""

VERSION = "0.1.0"
