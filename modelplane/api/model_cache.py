"""ModelCache: model weights staged once per cluster on a ReadWriteMany volume."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from .common import ApiModel, LabelSelector, Rules, SecretValue, SingleLine
from .errors import shown

_REPO_ID = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}")  # fullmatch


def _repo_id(value: str) -> str:
    if not _REPO_ID.fullmatch(value) or ".." in value:
        raise ValueError(
            f"{shown(value)} is not a Hugging Face repo id: 'owner/name' such as 'Qwen/Qwen3-8B' "
            "(letters, digits, '-', '_' and '.')"
        )
    return value


class HuggingFaceSource(ApiModel):
    repo: Annotated[str, AfterValidator(_repo_id)]
    revision: SingleLine | None = Field(default=None, min_length=1)
    token: SecretValue | None = None  # copied to each cluster as a Secret for the hydration Job
    size_gib: int = Field(ge=1, le=100_000, alias="sizeGiB")


class ModelCache(ApiModel):
    source: Literal["HuggingFace"]
    hugging_face: HuggingFaceSource | None = None
    cluster_selector: LabelSelector | None = None

    @model_validator(mode="after")
    def _source_block(self) -> ModelCache:
        rules = Rules()
        rules.check(
            self.hugging_face is not None, ["huggingFace"], "source HuggingFace requires the 'huggingFace' block"
        )
        rules.raise_if_any()
        return self
