"""Crashpad and Breakpad uploads, built byte for byte as the clients build them, and hostile ones."""

from __future__ import annotations

import gzip
import json
import random
import string
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crashes.model import CrashSubmission
from ports.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH, check_json
from reporters.breakpad import MAX_PARTS, MAX_UPLOAD_BYTES, MAX_VALUE_BYTES, parse_minidump_upload, socorro_answer
from reporters.encoding import decode_body
from reporters.errors import ReporterError

SKU = "skyrift:pc"
DUMPS = Path(__file__).parents[1] / "fixtures" / "minidumps"
DUMP = (DUMPS / "patch.dmp").read_bytes()
OTHER_DUMP = (DUMPS / "level-magic.dmp").read_bytes()
REPORT_UUID = "6f1d2c3b-4a59-4e87-9d0c-1b2a3c4d5e6f"
# every byte value: a log attachment is bytes, not text
LOG = bytes(range(256)) * 4 + b"\r\n--not-a-boundary\r\n"


def crashpad(annotations: dict[str, str], files: dict[str, tuple[str, bytes]], seed: int = 1) -> tuple[bytes, str]:
    """A body as chromium/crashpad's HTTPMultipartBuilder::GetBodyStream writes it
    (util/net/http_multipart_builder.cc): its boundary, the form data then the files, each
    std::map-ordered by key; `files` maps a key to (file name, bytes)."""
    letters = random.Random(seed)
    boundary = "---MultipartBoundary-" + "".join(letters.choice(string.ascii_letters + string.digits)
                                                   for _ in range(32)) + "---"
    body = b""
    for key, value in sorted(annotations.items()):
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
    for key, (filename, data) in sorted(files.items()):
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"; filename="{filename}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def crashpad_report(**annotations: str) -> tuple[bytes, str]:
    """What crash_report_upload_thread.cc uploads: the annotations, `guid` (the client id), the
    report file `<report uuid>.dmp` as upload_file_minidump, and an attachment under its own name."""
    return crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f", **annotations},
                    {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP), "game.log": ("game.log", LOG)})


def breakpad_windows(parameters: dict[str, str], dump_path: str, dump: bytes) -> tuple[bytes, str]:
    """A body as google-breakpad's HTTPUpload::GenerateRequestBody (common/windows/http_upload.cc)
    writes it: 27 dashes and two rand() as hex for the boundary, the parameters, then the file
    under its full path."""
    boundary = "-" * 27 + f"{41:08X}{18467:08X}"
    body = b""
    for key, value in sorted(parameters.items()):
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="upload_file_minidump"; '
             f'filename="{dump_path}"\r\nContent-Type: application/octet-stream\r\n\r\n').encode()
    body += dump + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def refusal(body: bytes, content_type: str | None) -> ReporterError:
    with pytest.raises(ReporterError) as caught:
        parse_minidump_upload(body, content_type, SKU)
    return caught.value


def test_a_gzipped_crashpad_upload_is_one_report_with_its_minidump_and_attachments_byte_exact():
    body, content_type = crashpad_report(prod="Skyrift", ver="1.4.2", plat="Win64", ptype="crashpad-handler")
    sent = gzip.compress(body)  # HTTPMultipartBuilder::SetGzipEnabled, with Content-Encoding: gzip

    crash = parse_minidump_upload(decode_body(sent, "gzip", MAX_UPLOAD_BYTES), content_type, SKU).crash

    assert crash is not None
    assert crash.event_id == REPORT_UUID.replace("-", "")
    assert crash.attachments == {f"{REPORT_UUID}.dmp": DUMP, "game.log": LOG}
    assert crash.minidumps == (f"{REPORT_UUID}.dmp",)
    fields = crash.fields
    assert (fields["crashType"], fields["platform"], fields["buildVersion"], fields["productName"]) == (
        "minidump", "Win64", "1.4.2", "Skyrift")
    assert fields["annotations"] == {"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f", "plat": "Win64",
                                     "prod": "Skyrift", "ptype": "crashpad-handler", "ver": "1.4.2"}
    assert [(a["name"], a["attachmentType"]) for a in fields["sentryAttachments"]] == [
        (f"{REPORT_UUID}.dmp", "event.minidump"), ("game.log", "event.attachment")]
    submission = CrashSubmission.model_validate_json(crash.json_text())
    assert submission.attachments is not None and set(submission.attachments) == set(crash.attachments)


def test_a_retried_crashpad_report_is_the_same_report():
    first = crashpad_report(prod="Skyrift", ver="1.4.2")
    again = crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f", "prod": "Skyrift", "ver": "1.4.2"},
                     {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP), "game.log": ("game.log", LOG)}, seed=2)
    assert first[1] != again[1]  # another boundary

    one, two = (parse_minidump_upload(body, content_type, SKU).crash for body, content_type in (first, again))

    assert one is not None and two is not None
    assert one.event_id == two.event_id == REPORT_UUID.replace("-", "")
    assert one.json_text() == two.json_text()


def test_the_client_guid_names_a_machine_not_a_crash():
    other_report = crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f"},
                            {"upload_file_minidump": ("1b2c3d4e-0000-4000-8000-000000000001.dmp", OTHER_DUMP)})
    crash = parse_minidump_upload(*other_report, SKU).crash
    assert crash is not None and crash.event_id == "1b2c3d4e000040008000000000000001"


def test_a_breakpad_upload_from_windows_maps_its_product_version_and_crash_time():
    parameters = {"ProductName": "Skyrift", "Version": "1.4.2", "BuildID": "20261124051500",
                  "ReleaseChannel": "beta", "CrashTime": "1795965000", "Vendor": "Lumen Games"}
    body, content_type = breakpad_windows(parameters, r"C:\Users\ana\AppData\Local\Skyrift\CrashDumps\crash 1.dmp",
                                          DUMP)

    crash = parse_minidump_upload(body, content_type, SKU).crash

    assert crash is not None and crash.event_id is None  # a file name that is no id: capture gives one
    assert crash.attachments == {"crash 1.dmp": DUMP}
    assert crash.minidumps == ("crash 1.dmp",)
    assert (crash.fields["productName"], crash.fields["buildVersion"], crash.fields["clientTime"]) == (
        "Skyrift", "1.4.2", 1795965000 * 1000)
    assert crash.fields["platform"] == "native"
    assert crash.fields["annotations"] == parameters


def test_linux_minidump_upload_with_curls_boundary():
    """google-breakpad's minidump_upload (tools/linux/symupload): prod and ver, through libcurl's form."""
    boundary = "------------------------" + "d74496d66958873e"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="prod"\r\n\r\nSkyrift\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="ver"\r\n\r\n1.4.2\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="upload_file_minidump"; filename="a.dmp"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + DUMP + f"\r\n--{boundary}--\r\n".encode()

    crash = parse_minidump_upload(body, f"multipart/form-data; boundary={boundary}", SKU).crash

    assert crash is not None and crash.attachments == {"a.dmp": DUMP}
    assert (crash.fields["productName"], crash.fields["buildVersion"]) == ("Skyrift", "1.4.2")


def test_sentry_fields_make_the_event_its_id_and_release():
    event_id = "9b4f2a1c7d3e4f5a8b6c0d1e2f3a4b5c"
    body, content_type = crashpad(
        {"sentry": json.dumps({"event_id": event_id, "release": "skyrift@1.4.2", "user": {"id": "p-7"}}),
         "sentry[tags][level]": "ember-keep", "ver": "ignored-for-the-release"},
        {"upload_file_minidump": ("minidump.dmp", DUMP)})

    crash = parse_minidump_upload(body, content_type, SKU).crash

    assert crash is not None and crash.event_id == event_id
    assert (crash.fields["buildVersion"], crash.fields["playerId"]) == ("skyrift@1.4.2", "p-7")
    assert crash.fields["sentryEvent"]["tags"] == {"level": "ember-keep"}
    assert crash.fields["annotations"] == {"ver": "ignored-for-the-release"}


@pytest.mark.parametrize("content_type", ["application/octet-stream", "application/x-dmp"])
def test_a_bare_minidump_body(content_type: str):
    crash = parse_minidump_upload(DUMP, content_type, SKU).crash
    assert crash is not None and crash.attachments == {"upload_file_minidump.dmp": DUMP}
    assert crash.minidumps == ("upload_file_minidump.dmp",)


def test_a_gzip_wrapped_minidump_is_inflated_and_its_gz_dropped():
    body, content_type = crashpad({}, {"upload_file_minidump": ("crash.dmp.gz", gzip.compress(DUMP))})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and crash.attachments == {"crash.dmp": DUMP}
    # found in review: described by the name it is kept under, where its file name as sent was (a
    # retry across the change would have made another body, refused as a reused key)
    assert crash.fields["sentryAttachments"][0] == {"name": "crash.dmp", "field": "upload_file_minidump",
                                                    "filename": "crash.dmp.gz", "attachmentType": "event.minidump",
                                                    "contentType": "application/octet-stream"}


def test_a_body_that_lost_its_content_encoding_is_still_read():
    body, content_type = crashpad_report(prod="Skyrift")
    crash = parse_minidump_upload(gzip.compress(body), content_type, SKU).crash
    assert crash is not None and crash.attachments[f"{REPORT_UUID}.dmp"] == DUMP


def test_socorros_answer_names_the_report():
    assert socorro_answer("6f1d2c3b4a594e879d0c1b2a3c4d5e6f") == f"CrashID=bp-{REPORT_UUID}\n"


# --- refused ----------------------------------------------------------------------------------


def test_no_minidump():
    error = refusal(*crashpad({"prod": "Skyrift"}, {"game.log": ("game.log", LOG)}))
    assert (error.status, error.field) == (400, "upload_file_minidump")
    assert "no upload_file_minidump" in error.message


# found from outside: a name's byte outside UTF-8 refused the whole crash, with Python's exception
def test_names_outside_utf8_are_read_with_escapes_and_utf8_ones_as_they_are():
    body, content_type = crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f", "ver": "1.0"},
                                  {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP), "game.log": ("game.log", LOG)})
    body = (body.replace(b'filename="game.log"', b'filename="caf\xe9 \xc3\xa9.log"')
            .replace(b'name="ver"', b'name="ver\xff"').replace(b'name="guid"', b'name="ver\xfe"'))
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and crash.attachments["caf_ \u00e9.log"] == LOG
    # found in review: both read "ver\ufffd", and one value was lost
    assert crash.fields["annotations"] == {"ver\\xff": "1.0", "ver\\xfe": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f"}


def test_two_minidumps():
    boundary = "b0undary"
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="upload_file_minidump"; filename="x.dmp"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + DUMP + b"\r\n"
    error = refusal(part * 2 + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}")
    assert error.status == 400 and "2 upload_file_minidump parts" in error.message


# found from outside: MDMP and no minidump's version after it was taken, and never walked (the
# processor walks what starts with both), so its report showed no processing for good
@pytest.mark.parametrize("dump", [b"", b"MDM", b"\x00" * 64, bytes(range(256)), b"PK\x03\x04" + DUMP[4:], b"MDMP",
                                  b"MDMP" + bytes(range(256)) * 4])
def test_a_minidump_that_is_none(dump: bytes):
    error = refusal(*crashpad({}, {"upload_file_minidump": ("x.dmp", dump)}))
    assert (error.status, error.code, error.field) == (400, "invalid_field", "upload_file_minidump")
    assert "MDMP" in error.message


@pytest.mark.parametrize("cut", [10, 200, 4000, -20, -3])
def test_a_truncated_upload(cut: int):
    body, content_type = crashpad_report(prod="Skyrift")
    error = refusal(body[:cut], content_type)
    assert error.status == 400 and "multipart" in error.message


def test_a_part_count_bomb_stops_at_the_bound():
    boundary = "bomb"
    field = f'--{boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n'.encode()
    error = refusal(field * 10_000 + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}")
    assert error.status == 400 and f"at most {MAX_PARTS} parts" in error.message


def test_an_upload_over_the_limit():
    error = refusal(*crashpad({}, {"upload_file_minidump": ("x.dmp", DUMP + b"\0" * MAX_UPLOAD_BYTES)}))
    assert (error.status, error.code) == (413, "payload_too_large")


def test_a_gzip_bomb_in_either_place_costs_at_most_the_limit():
    bomb = gzip.compress(b"\0" * (64 << 20))
    body, content_type = crashpad({}, {"upload_file_minidump": ("x.dmp.gz", bomb)})
    for sent in (gzip.compress(b"--x\r\n" + b"\0" * (64 << 20)), body):
        assert refusal(sent, content_type).status == 413
    with pytest.raises(ReporterError) as caught:
        decode_body(gzip.compress(body + b"\0" * (64 << 20)), "gzip", MAX_UPLOAD_BYTES)
    assert caught.value.status == 413


def test_a_huge_annotation_or_name():
    value = refusal(*crashpad({"list_annotations": "x" * (MAX_VALUE_BYTES + 1)},
                              {"upload_file_minidump": ("x.dmp", DUMP)}))
    name = refusal(*crashpad({"n" * 300: "1"}, {"upload_file_minidump": ("x.dmp", DUMP)}))
    header = refusal(*crashpad({"n" * 5000: "1"}, {"upload_file_minidump": ("x.dmp", DUMP)}))
    assert (value.status, value.field) == (400, "list_annotations")
    assert name.status == header.status == 400


@pytest.mark.parametrize("content_type", [None, "", "application/json", "text/plain", "multipart/form-data",
                                          "multipart/form-data; boundary="])
def test_what_is_no_form(content_type: str | None):
    body, _ = crashpad_report()
    assert refusal(body, content_type).status in (400, 415)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_random_bytes_raise_nothing_but_a_refusal(data: bytes):
    """Only the magic is checked here (as Relay checks it): a bare body that has it is a dump, for
    processing to read or fail on; every other outcome is a ReporterError."""
    for content_type in ("multipart/form-data; boundary=x", "application/octet-stream"):
        try:
            crash = parse_minidump_upload(data, content_type, SKU).crash
        except ReporterError:
            continue
        assert crash is not None and data.startswith((b"MDMP", b"PMDM"))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0), st.binary(min_size=1, max_size=16))
def test_a_mangled_upload_is_a_report_or_a_refusal(at: int, garbage: bytes):
    body, content_type = crashpad_report(prod="Skyrift")
    at %= len(body)
    try:
        crash = parse_minidump_upload(body[:at] + garbage + body[at + len(garbage):], content_type, SKU).crash
    except ReporterError:
        return
    assert crash is not None and len(crash.minidumps) == 1


def test_a_minidump_sent_as_a_plain_field_is_taken_whatever_its_size():
    """Found from outside: a dump posted without a file name (an in-house uploader's plain form
    field) was held to the text fields' limit, and one over 64 KiB was refused, so lost."""
    dump = DUMP + b"\0" * (MAX_VALUE_BYTES + 1 - len(DUMP))
    boundary = "x-boundary"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="upload_file_minidump"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode() + dump + f"\r\n--{boundary}--\r\n".encode()

    crash = parse_minidump_upload(body, f"multipart/form-data; boundary={boundary}", SKU).crash

    assert crash is not None
    assert crash.attachments == {"upload_file_minidump.dmp": dump}


def test_a_file_past_what_the_report_holds_is_left_out_and_the_crash_kept():
    """Found from outside (the Sentry envelope's twin): an upload within its limit whose attached
    log made the report, in base64, larger than the JSON report's 1 MiB was refused 413 whole."""
    log = random.Random(2).randbytes(780_000)
    body, content_type = crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f"},
                                  {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP), "game.log": ("game.log", log)})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and crash.attachments == {f"{REPORT_UUID}.dmp": DUMP}
    assert crash.minidumps == (f"{REPORT_UUID}.dmp",)
    assert crash.fields["sentryAttachmentsLeftOut"] == [
        {"filename": "game.log", "attachmentType": "event.attachment", "sizeBytes": 780_000}]
    assert len(crash.json_text()) <= MAX_BODY_BYTES
    CrashSubmission.model_validate_json(crash.json_text())


def test_sentry_natives_crashpad_upload_brings_its_event_and_breadcrumbs():
    """Found from outside: sentry-native's Crashpad backend (the Sentry Unreal and Unity plugins on
    Windows) sends no annotations but its scope as a MessagePack `__sentry-event` part and its
    breadcrumbs in `__sentry-breadcrumb1`/`2` (src/backends/sentry_backend_crashpad.cpp), which
    Relay reads into the event; they were kept as files, and the report had no release nor player."""
    scope = {"release": "skyrift@1.4.3", "environment": "production", "level": "fatal", "user": {"id": "p-42"},
             "contexts": {"os": {"name": "Windows", "version": "10.0.22631"}}, "tags": {"map": "ember-vale"},
             "sdk": {"name": "sentry.native", "version": "0.7.0"}, "dist": None}
    crumbs = [{"timestamp": f"2026-11-30T07:00:0{n}Z", "message": f"step {n}"} for n in range(3)]
    body, content_type = crashpad({"guid": "0e4c8a1d-5b6f-4c3d-8e2f-7a6b5c4d3e2f"}, {
        "upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP), "game.log": ("game.log", LOG),
        "__sentry-event": ("__sentry-event", msgpack.packb(scope)),
        # two files written in turns, each a stream of breadcrumbs: the later ones in the second here
        "__sentry-breadcrumb1": ("__sentry-breadcrumb1", msgpack.packb(crumbs[0]) + msgpack.packb(crumbs[1])),
        "__sentry-breadcrumb2": ("__sentry-breadcrumb2", msgpack.packb(crumbs[2]))})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and set(crash.attachments) == {f"{REPORT_UUID}.dmp", "game.log"}
    fields = crash.fields
    assert (fields["buildVersion"], fields["playerId"], fields["platform"]) == ("skyrift@1.4.3", "p-42", "Windows")
    event = fields["sentryEvent"]
    assert event["environment"] == "production" and event["tags"] == {"map": "ember-vale"} and "dist" not in event
    assert event["breadcrumbs"] == crumbs[1:]  # the latest, as many as the longer file holds (as Sentry keeps them)
    CrashSubmission.model_validate_json(crash.json_text())


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH - 2])
def test_breadcrumbs_are_bounded_as_deep_as_the_report_holds_them(depth: int):
    """Found from outside: a breadcrumb was held to the depth of a Sentry event, at the report's
    second level, where it lies two deeper (`sentryEvent.breadcrumbs[n]`): a report of 34 levels was
    kept, which /v1/crashes refuses past 32. One that would be is kept as a file, as any part that
    makes no event."""
    crumb: object = "x"
    for _ in range(depth - 2):
        crumb = {"a": crumb}
    part = msgpack.packb({"timestamp": 1700000000, "data": crumb})  # `depth` levels deep
    body, content_type = crashpad({}, {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP),
                                       "__sentry-breadcrumb1": ("__sentry-breadcrumb1", part)})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None
    check_json(json.loads(crash.json_text()), MAX_JSON_DEPTH)
    kept_as_file = depth > MAX_JSON_DEPTH - 3
    assert ("__sentry-breadcrumb1" in crash.attachments) == kept_as_file
    assert ("sentryEvent" in crash.fields) != kept_as_file


@pytest.mark.parametrize("data", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"a": b"\x00"}), b"\x91" * 100,
                                  msgpack.packb({"release": "x" * 200_000}),
                                  # found in review: deeper than Python's recursion went, a 500
                                  b"\x81\xa1a" * 1000 + b"\x80"])
def test_a_sentry_event_part_that_makes_no_event_is_kept_as_a_file(data: bytes):
    """Not JSON's (a byte string), not a map, too deep or too large: the upload is still a report,
    and the part one of its files, as sent."""
    body, content_type = crashpad({}, {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP),
                                       "__sentry-event": ("__sentry-event", data)})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and crash.attachments["__sentry-event"] == data
    assert "buildVersion" not in crash.fields


def test_an_empty_sentry_native_part_is_no_file_of_the_report():
    """Found re-reading the diff: sentry-native writes both breadcrumb files, one perhaps still
    empty, and Sentry passes over an empty part (size 0); each was kept as an empty file."""
    body, content_type = crashpad({}, {"upload_file_minidump": (f"{REPORT_UUID}.dmp", DUMP),
                                       "__sentry-event": ("__sentry-event", b""),
                                       "__sentry-breadcrumb1": ("b1", msgpack.packb({"message": "a"})),
                                       "__sentry-breadcrumb2": ("__sentry-breadcrumb2", b"")})
    crash = parse_minidump_upload(body, content_type, SKU).crash
    assert crash is not None and set(crash.attachments) == {f"{REPORT_UUID}.dmp"}
    assert crash.fields["sentryEvent"] == {"breadcrumbs": [{"message": "a"}]}


def test_the_sentry_fields_json_values_are_bounded_together() -> None:
    """Found in review: each `sentry` field (64 KiB at most) was bounded alone, so 1 MiB of them
    held 330,000 values, none counted."""
    objects = "[" + "{}," * 20_000 + "{}]"  # 40,001 values in 60 KB
    body, content_type = crashpad_report()
    boundary = content_type.partition("boundary=")[2]
    fields = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="sentry"\r\n\r\n{{"x":{objects}}}\r\n'
                     for _ in range(4)).encode()
    refused = refusal(fields + body, content_type)
    assert refused.status == 400 and "JSON values" in refused.message


def test_an_attached_part_past_the_forms_json_values_refuses_it_whole() -> None:
    """Found in review: a breadcrumbs part that came to the bound was passed over, the form taken
    without it, and what came after it refused or not by the parts' order."""
    objects = "[" + "{}," * 20_000 + "{}]"
    body, content_type = crashpad_report()
    boundary = content_type.partition("boundary=")[2]
    fields = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="sentry"\r\n\r\n{{"x":{objects}}}\r\n'
                     for _ in range(3)).encode()
    crumbs = (f'--{boundary}\r\nContent-Disposition: form-data; name="__sentry-breadcrumb1"; filename="b1"\r\n'
              f"Content-Type: application/octet-stream\r\n\r\n").encode() + b"\x80" * 40_000 + b"\r\n"
    refused = refusal(fields + crumbs + body, content_type)
    assert refused.status == 400 and "JSON values" in refused.message
