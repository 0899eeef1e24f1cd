"""ModelCache: model weights staged once per cluster on a ReadWriteMany volume."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, LabelSelector, Rules, SecretValue


class HuggingFaceSource(ApiModel):
    repo: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$|^[A-Za-z0-9][A-Za-z0-9._-]*$")
    revision: str | None = Field(default=None, min_length=1)
    token: SecretValue | None = None  # copied to each cluster as a Secret for the hydration Job
    size_gib: int = Field(ge=1, le=100_000, alias="sizeGiB")


class ModelCache(ApiModel):
    source: Literal["HuggingFace"]
    hugging_face: HuggingFaceSource | None = None
    cluster_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _source_block(self) -> "ModelCache":
        rules = Rules()
        rules.check(self.hugging_face is not None, ["huggingFace"], "source HuggingFace requires the 'huggingFace' block")
        rules.raise_if_any()
        return self
