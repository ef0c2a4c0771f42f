"""What the store keeps of a queued build that failed on every attempt.

Kept apart from the build records (kind "build-failure", same request key): reports read only
finished builds, and a later run enqueues the request again. Like every record it is never
deleted; a build record of the same key written after it says the request succeeded since."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .build import BuildRequest
from ..trust import untrusted

KIND = "build-failure"


@dataclass(frozen=True)
class QueueFailure:
    request: BuildRequest
    key: str
    error: str  # the last attempt's error line
    attempts: int
    worker: str  # the worker of the last attempt ("" when it died)
    job_id: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "build-failure record") -> QueueFailure:
        return untrusted.typed(cls, d, where)
