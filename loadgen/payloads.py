"""What the load generator sends: crash reports with the paper's bimodal sizes (small 0.3-5 KB,
large 10-512 KB, mixed to a chosen average), session events and scores."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pybase64

KB = 1024
SMALL = (int(0.3 * KB), 5 * KB)
LARGE = (10 * KB, 512 * KB)


@dataclass(frozen=True)
class CrashSizes:
    """Uniform within each mode; the share of large reports sets the average."""

    average_bytes: int

    @property
    def large_share(self) -> float:
        small, large = sum(SMALL) / 2, sum(LARGE) / 2
        return min(1.0, max(0.0, (self.average_bytes - small) / (large - small)))

    def draw(self, rng: random.Random) -> int:
        low, high = LARGE if rng.random() < self.large_share else SMALL
        return rng.randint(low, high)


FRAMES = ["Renderer::DrawMesh(Mesh const*)", "Physics::Step(float)", "Audio::Mix(Buffer&)", "Net::Poll()"]


def crash(rng: random.Random, sku: str, size: int) -> dict[str, Any]:
    """A report whose JSON is about `size` bytes: a stack trace and a screenshot-like attachment of
    random (incompressible) bytes make up the bulk."""
    frame = rng.choice(FRAMES)
    report: dict[str, Any] = {
        "sku": sku, "crashType": "ACCESS_VIOLATION", "errorCode": 3221225477, "platform": "pc",
        "buildVersion": "1.0.0", "playerId": f"p{rng.randrange(1_000_000)}",
        "stackTrace": f"#0 0x{rng.getrandbits(40):x} in {frame} at engine.cpp:{rng.randrange(999)}\n#1 in main()",
    }
    filler = max(0, size - 400) * 3 // 4  # base64 grows bytes by 4/3
    if filler:
        report["attachments"] = {"screenshot.png": pybase64.b64encode(rng.randbytes(filler)).decode()}
    return report


def sessions(rng: random.Random, sku: str, count: int) -> list[dict[str, Any]]:
    return [{"sku": sku, "kind": rng.choice(("client", "server")), "playerId": f"p{rng.randrange(1_000_000)}"}
            for _ in range(count)]


def scores(rng: random.Random, board: str, count: int, players: int) -> list[dict[str, Any]]:
    return [{"board": board, "playerId": f"p{rng.randrange(players)}", "score": rng.randrange(1_000_000)}
            for _ in range(count)]
