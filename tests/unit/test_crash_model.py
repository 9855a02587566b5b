from __future__ import annotations

import base64
import hashlib
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.requests import Posted, parse_json_body, validate
from crashes.model import (
    CrashEnvelope,
    CrashSubmission,
    attachment_key,
    decode_attachment,
    envelope_value,
    report_key,
)
from pipeline.idempotency import new_event_id
from ports import limits
from ports.errors import InvalidField, InvalidJson, MissingField, PayloadTooLarge, UnsupportedMediaType
from ports.limits import JsonValues
from ranking.model import Score
from reporters.errors import ReporterError
from reporters.sentry import event_object


def test_report_key_is_first_16_bytes_of_sha256_of_event_id():
    event_id = "0b6c2a4e-1111-4222-8333-444455556666"
    assert report_key(event_id) == hashlib.sha256(event_id.encode()).hexdigest()[:32]


def test_idempotency_key_gives_the_same_event_id_per_scope():
    assert new_event_id("crash\x00a", "k1") == new_event_id("crash\x00a", "k1")
    assert new_event_id("crash\x00a", "k1") != new_event_id("crash\x00b", "k1")
    assert new_event_id("crash\x00a", "k1") != new_event_id("crash\x00a", "k2")
    assert new_event_id("crash\x00a", None) != new_event_id("crash\x00a", None)
    assert uuid.UUID(new_event_id("crash\x00a", None)).version == 4


def test_attachment_keys_differ_by_name_and_stay_short():
    assert attachment_key("r", "a.png") != attachment_key("r", "b.png")
    assert len(attachment_key("r" * 32, "x" * 5000)) == 32 + 1 + 16


@pytest.mark.parametrize("data", ["aGVsbG8", "aGVs bG8=", "!!!!", "aGVsbG9="])
def test_non_canonical_or_invalid_base64_is_refused(data: str):
    with pytest.raises(ValueError):
        decode_attachment(data)


def test_canonical_base64_decodes():
    assert decode_attachment(base64.b64encode(b"\x00\x01binary").decode()) == b"\x00\x01binary"


@pytest.mark.parametrize(
    ("payload", "error", "field"),
    [
        ({}, MissingField, "sku"),
        ({"sku": 12}, InvalidField, "sku"),
        ({"sku": ""}, InvalidField, "sku"),
        ({"sku": "a/b"}, InvalidField, "sku"),
        ({"sku": "x" * 65}, InvalidField, "sku"),
        ({"sku": "g", "errorCode": 1.5}, InvalidField, "errorCode"),
        ({"sku": "g", "errorCode": True}, InvalidField, "errorCode"),
        ({"sku": "g", "stackTrace": ["a"]}, InvalidField, "stackTrace"),
        ({"sku": "g", "attachments": "x"}, InvalidField, "attachments"),
        ({"sku": "g", "attachments": {"a.png": "%%%"}}, InvalidField, "attachments.a.png"),
        ({"sku": "g", "attachments": {"": "AA=="}}, InvalidField, "attachments"),
        ({"sku": "g", "crashType": "x" * 257}, InvalidField, "crashType"),
        ({"sku": "g", "platform": "x" * 257}, InvalidField, "platform"),
        ({"sku": "g", "buildVersion": "x" * 257}, InvalidField, "buildVersion"),
        ({"sku": "g", "errorCode": "x" * 257}, InvalidField, "errorCode"),
    ],
)
def test_bad_crash_fields_name_the_field(payload, error, field):
    with pytest.raises(error) as caught:
        validate(CrashSubmission, payload)
    assert caught.value.field == field


def test_indexed_fields_up_to_256_characters_are_taken():
    long = "x" * 256
    submission = validate(CrashSubmission, {"sku": "g", "crashType": long, "platform": long, "buildVersion": long,
                                            "errorCode": long})
    assert submission.crashType == long


def test_unknown_fields_are_kept_and_error_code_may_be_int_or_str():
    submission = validate(CrashSubmission, {"sku": "g:1.x-y_z", "errorCode": 5, "custom": {"a": [1]}})
    assert submission.model_extra == {"custom": {"a": [1]}}
    assert validate(CrashSubmission, {"sku": "g", "errorCode": "E5"}).errorCode == "E5"


def test_a_whole_number_written_with_a_fraction_is_an_integer():
    """Found by schemathesis: JSON Schema's integer takes 107.0 (as a serializer of a whole double
    writes it), and the document promised it; strict pydantic refused it with 400."""
    submission = validate(CrashSubmission, {"sku": "g", "errorCode": 7.0, "clientTime": 107.0})
    assert (submission.errorCode, submission.clientTime) == (7, 107)
    assert validate(Score, {"board": "b", "playerId": "p", "score": -3.0}).score == -3
    # from 2**53 a double is not the number meant (9007199254740993.0 reads as ...992)
    for beyond in (2.0 ** 53, 2.0 ** 63, -(2.0 ** 64), 1e300):
        with pytest.raises(InvalidField):
            validate(Score, {"board": "b", "playerId": "p", "score": beyond})


def test_a_body_that_is_not_an_object_is_invalid():
    with pytest.raises(InvalidField):
        validate(CrashSubmission, [1, 2])


def test_parse_json_body_errors():
    with pytest.raises(InvalidJson):
        parse_json_body(b"{nope", "application/json")
    with pytest.raises(InvalidJson):
        parse_json_body(b"\xff\xfe", None)
    with pytest.raises(UnsupportedMediaType):
        parse_json_body(b"{}", "text/plain")
    with pytest.raises(PayloadTooLarge):
        parse_json_body(b" " * 11, "application/json", max_bytes=10)
    assert parse_json_body(b'{"a": 1}', "application/json; charset=utf-8") == {"a": 1}
    assert parse_json_body(b"[]", "application/vnd.blackbox+json") == []


@pytest.mark.parametrize("body", [
    b"[" + b"{}," * 200_000 + b"{}]",  # a batch of 200,001, refused by its count only once read
    b'{"sku": "g:pc", "x": [' + b"0," * 300_000 + b"0]}",  # a crash report's extra field, which was kept
])
def test_a_body_of_more_json_values_than_its_bytes_could_ever_need_is_refused_before_it_is_read(body: bytes):
    """Found from outside: 1 MiB of `[{},{},…]` took 42 MB and 0.4 s of the GIL to parse and walk
    (500 MB held at 64 at once, and kept by the allocator), before a batch's count refused it."""
    with pytest.raises(InvalidField, match="JSON values"):
        parse_json_body(body, "application/json")
    with pytest.raises(ReporterError, match="JSON values"):
        event_object(body, "the event")


def test_json_values_count_each_text_twice_at_most(monkeypatch: pytest.MonkeyPatch):
    """Each text is counted once with its strings and once without at most. (Found in review: past
    the bound each add walked every text before it, 3 ms an add at 65,000, minutes for a form of
    100,000 tiny MessagePack events; this counts the counting, not that walk.)"""
    counted = []
    structure = limits._structure
    monkeypatch.setattr(limits, "_structure", lambda data: counted.append(1) or structure(data))
    values = JsonValues()
    texts = [b"{}"] * 100_000 + [b"[0,0]"] * 20_000
    with pytest.raises(InvalidField, match="JSON values"):
        for text in texts:
            values.add(text)
    assert len(counted) <= 2 * len(texts)


def test_json_values_read_as_one_body_are_counted_alike_in_any_order():
    """Found in review: a text counted with its strings kept that count once another came, so a
    log of commas in a string, then 40,000 values, was refused, and the other way round taken."""
    log = json.dumps({"log": "," * 100_000}).encode()
    values = b"[" + b"0," * 40_000 + b"0]"
    for texts in ((log, values), (values, log)):
        counted = JsonValues()
        for text in texts:
            counted.add(text)


@given(st.text(alphabet=',[{"\\', max_size=30))
def test_commas_and_brackets_in_strings_are_no_values(text: str):
    """A log or a trace may hold as many as its bytes: only those outside strings are counted."""
    body = json.dumps({"sku": "g:pc", "log": text * 10_000}).encode()
    assert parse_json_body(body, "application/json")["log"] == text * 10_000


@pytest.mark.parametrize("body", [
    b'{"sku": "g", "x": NaN}',
    b'{"sku": "g", "x": -Infinity}',
    b'{"sku": "g", "stackTrace": "\\ud800"}',  # a lone surrogate: no UTF-8 can carry it on
    '{"sku": "g"}'.encode("utf-16"),
    b'{"sku": "g", "x": "\xff"}',
])
def test_what_json_loads_took_but_strict_json_refuses(body: bytes):
    with pytest.raises(InvalidJson):
        Posted(body).json()


def test_a_number_beyond_a_float_is_refused():
    with pytest.raises(InvalidField):
        Posted(b'{"sku": "g", "x": [1e400]}').json()


def test_a_byte_order_mark_is_skipped():
    posted = Posted(b'\xef\xbb\xbf{"sku": "g"}')
    assert posted.json() == {"sku": "g"}
    assert posted.json_text == b'{"sku": "g"}'


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(payload=st.dictionaries(st.text(), JSON_VALUES, max_size=6), spaces=st.sampled_from(["", " ", "\n\t "]))
def test_the_envelope_around_the_submitted_text_gives_back_the_payload(payload: dict, spaces: str):
    text = f"{spaces}{json.dumps(payload, ensure_ascii=False)}{spaces}".encode()
    parsed = Posted(text).json()
    envelope = CrashEnvelope.model_validate_json(envelope_value("e-1", "k" * 32, 5, Posted(text).json_text))
    assert envelope.payload == parsed == payload
    assert (envelope.eventId, envelope.reportKey, envelope.receivedAt, envelope.sizeBytes) == ("e-1", "k" * 32, 5,
                                                                                                len(text))


def test_a_sku_refused_says_what_a_sku_is_not_a_regex():
    """Found by a newcomer: a refused name was told the pattern pydantic checks it with."""
    with pytest.raises(InvalidField) as refused:
        validate(CrashSubmission, {"sku": "sky rift"})
    assert str(refused.value) == "sku: 1 to 64 of A-Z a-z 0-9 . _ : -, e.g. skyrift:pc"


# found from outside: a union told only its first member's error, "Input should be a valid string"
@pytest.mark.parametrize(("code", "says"), [
    (2**63, "errorCode: Input should be a valid string or less than or equal to 9223372036854775807"),
    (7.5, "errorCode: Input should be a valid string or a valid integer"),
])
def test_a_field_of_either_type_says_what_each_would_take(code: object, says: str):
    with pytest.raises(InvalidField) as refused:
        validate(CrashSubmission, {"sku": "g", "errorCode": code})
    assert str(refused.value) == says
