"""Label selection, as Kubernetes' matchLabels: every wanted pair must be present with its value."""

from __future__ import annotations

from collections.abc import Mapping


def missing_labels(labels: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The pairs of `wanted` that `labels` lacks; empty when `labels` is selected."""
    return {k: v for k, v in wanted.items() if labels.get(k) != v}
