"""What a caller may post: a title key only its own skus."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ports.errors import Forbidden


@dataclass(frozen=True)
class SkuScope:
    """The skus a caller may post: a title key's own, so that one title's storm spends only its
    own key's throttle; None for any other key (server keys, unscoped ingest keys)."""

    skus: frozenset[str] | None = None

    @classmethod
    def of(cls, api_key_id: str | None, key_skus: Mapping[str, Collection[str]]) -> SkuScope:
        """From the key id API Gateway (or the local gateway) gives the handler and the title keys'
        ids → skus (BLACKBOX_KEY_SKUS in AWS, the local title keys under `blackbox serve`)."""
        own = key_skus.get(api_key_id) if api_key_id is not None else None
        return cls(None if own is None else frozenset(own))

    def allows(self, sku: str) -> bool:
        return self.skus is None or sku in self.skus

    def check(self, skus: Iterable[str]) -> None:
        """403 when any of `skus` is not the caller's."""
        if self.skus is None:
            return
        foreign = sorted(set(skus) - self.skus)
        if foreign:
            # not the skus it may post: the key ships in a game, and they may name platforms unannounced
            raise Forbidden(f"this key may not post sku {foreign[0]}")


ANY_SKU = SkuScope()
