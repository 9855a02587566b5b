"""Lambda's context object, as the local runtime hands it to a handler."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class LocalContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "local"
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:000000000000:function:blackbox-{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000
