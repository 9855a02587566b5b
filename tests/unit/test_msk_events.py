"""pipeline.msk: the MSK event Lambda hands a consumer function, as serve's pollers make it too."""

from __future__ import annotations

from pipeline.msk import from_msk_event, to_msk_event
from ports import LogRecord

ORIGIN = ("origin", "Zoë".encode())


def test_a_header_byte_past_ascii_reads_as_the_byte_it_is():
    """Found from outside: Lambda hands an MSK header's value as Java's signed bytes ("ë" is
    [-61, -85]); bytes() refused the negative ones, so the whole batch failed before any record was
    set aside, its partition held until the records expired, and its failed batch could not be
    replayed. Serve's pollers wrote them unsigned, which no test told apart."""
    record = LogRecord("scores", 0, 7, b"{}", b"board", (ORIGIN,), 1_700_000_000_000)
    event = to_msk_event([record], "arn:aws:kafka:local:000000000000:cluster/blackbox/scores", "local")
    [[item]] = event["records"].values()
    assert item["headers"] == [{"origin": [90, 111, -61, -85]}]  # as Lambda sends it
    assert from_msk_event(event) == [record]
