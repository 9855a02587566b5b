"""Unreal CrashReportClient uploads, written in its crash container's exact layout, and hostile ones."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.factory import Adapters
from crashes.model import CrashSubmission
from pipeline.topics import CRASHES
from ports.errors import InvalidField
from ports.limits import MAX_BODY_BYTES, MAX_JSON_VALUES
from reporters.capture import capture_envelope
from reporters.errors import ReporterError
from reporters.unreal import MAX_CRASH_BYTES, MAX_FILES, parse_unreal_crash

SKU = "skyrift:pc"
DUMP = (Path(__file__).parents[1] / "fixtures" / "minidumps" / "level-magic.dmp").read_bytes()
GUID = "UECC-Windows-8A3F0C1E4B2D4E6F9A7B5C3D1E0F2A4B_0000"
CONTEXT = f"""<?xml version="1.0" encoding="UTF-8"?>
<FGenericCrashContext>
\t<RuntimeProperties>
\t\t<CrashVersion>3</CrashVersion>
\t\t<CrashGUID>{GUID}</CrashGUID>
\t\t<IsAssert>false</IsAssert>
\t\t<CrashType>Crash</CrashType>
\t\t<GameName>UE-Skyrift</GameName>
\t\t<PlatformName>Windows</PlatformName>
\t\t<EngineVersion>5.3.2-29314046+++UE5+Release-5.3</EngineVersion>
\t\t<BuildVersion>++UE5+Release-5.3-CL-29314046</BuildVersion>
\t\t<UserName>ana</UserName>
\t\t<LoginId>b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6</LoginId>
\t\t<EpicAccountId>7d3e9f1a2b4c4d5e8f6a7b8c9d0e1f2a</EpicAccountId>
\t\t<CallStack>Skyrift!UInventory::Equip() [D:\\build\\Skyrift\\Source\\Inventory.cpp:88]
Skyrift!AHero::BeginPlay() [D:\\build\\Skyrift\\Source\\Hero.cpp:41]
Skyrift!GuardedMain()</CallStack>
\t\t<ErrorMessage>Unhandled Exception: EXCEPTION_ACCESS_VIOLATION reading address 0x0000000000000010
while equipping &lt;Ember Blade&gt;</ErrorMessage>
\t\t<UserDescription />
\t</RuntimeProperties>
\t<PlatformProperties>
\t\t<PlatformIsRunningWindows>1</PlatformIsRunningWindows>
\t</PlatformProperties>
\t<EnabledPlugins>
\t\t<Plugin>Niagara</Plugin>
\t\t<Plugin>OnlineSubsystemEOS</Plugin>
\t</EnabledPlugins>
</FGenericCrashContext>
""".encode()
# a log is the game's bytes, with a BOM as Unreal writes it, and any byte value
LOG = b"\xef\xbb\xbfLog file open, 11/24/26 05:58:02\r\n" + bytes(range(256))
INI = b"[CrashReportClient]\r\nbAgreeToCrashUpload=true\r\n"
FILES = [("CrashContext.runtime-xml", CONTEXT), ("CrashReportClient.ini", INI), ("Skyrift.log", LOG),
         ("UEMinidump.dmp", DUMP)]


# The container as getsentry/symbolic reads it (symbolic-unreal/src/container.rs: Unreal4Header,
# Unreal4FileMeta, Unreal4Crash::from_bytes) and Epic's CrashUpload.cpp writes it: little-endian,
# strings as a u32 length and that many NUL-padded bytes (260, a MAX_PATH), the whole zlib-compressed.


def ue_string(text: str, size: int = 260) -> bytes:
    return struct.pack("<I", size) + text.encode().ljust(size, b"\0")


def header(directory: str, name: str, uncompressed: int, count: int) -> bytes:
    return ue_string(directory) + ue_string(name) + struct.pack("<ii", uncompressed, count)


def entry(index: int, name: str, data: bytes, length: int | None = None) -> bytes:
    size = len(data) if length is None else length
    return struct.pack("<i", index) + ue_string(name) + struct.pack("<i", size) + data


def container(files: list[tuple[str, bytes]], layout: str = "CR1") -> bytes:
    directory = GUID
    entries = b"".join(entry(index, name, data) for index, (name, data) in enumerate(files))
    size = sum(len(data) for _, data in files)
    if layout == "CR1":  # Unreal 4.26 on: the marker, then the one real header
        return b"CR1" + header(directory, f"{directory}.uecrash", size, len(files)) + entries
    # before: a placeholder header, the files, the real header last (the count its last 4 bytes)
    return (header(directory, f"{directory}.ue4crash", 0, 0) + entries
            + header(directory, f"{directory}.ue4crash", size, len(files)))


def upload(files: list[tuple[str, bytes]] = FILES, layout: str = "CR1") -> bytes:
    return zlib.compress(container(files, layout))


def refusal(body: bytes) -> ReporterError:
    with pytest.raises(ReporterError) as caught:
        parse_unreal_crash(body, SKU)
    return caught.value


@pytest.mark.parametrize("layout", ["CR1", "legacy"])
def test_a_crash_container_is_one_report_with_every_file_byte_exact(layout: str):
    crash = parse_unreal_crash(upload(layout=layout), SKU).crash

    assert crash is not None
    assert crash.attachments == dict(FILES)
    assert crash.minidumps == ("UEMinidump.dmp",)
    fields = crash.fields
    assert fields["crashType"] == "Unhandled Exception: EXCEPTION_ACCESS_VIOLATION reading address 0x0000000000000010"
    assert (fields["platform"], fields["buildVersion"], fields["playerId"]) == (
        "Windows", "++UE5+Release-5.3-CL-29314046", "7d3e9f1a2b4c4d5e8f6a7b8c9d0e1f2a")
    assert fields["stackTrace"].splitlines()[0] == (
        r"Skyrift!UInventory::Equip() [D:\build\Skyrift\Source\Inventory.cpp:88]")
    context = fields["unrealContext"]
    assert context["RuntimeProperties"]["CrashGUID"] == GUID
    assert context["RuntimeProperties"]["UserDescription"] == ""
    assert context["EnabledPlugins"] == {"Plugin": ["Niagara", "OnlineSubsystemEOS"]}
    # the minidump first, as from every reporter (found from outside: in the container's order)
    assert next(iter(crash.attachments)) == "UEMinidump.dmp"
    assert [(a["name"], a["attachmentType"]) for a in fields["sentryAttachments"]] == [
        ("UEMinidump.dmp", "event.minidump"), ("CrashContext.runtime-xml", "unreal.context"),
        ("CrashReportClient.ini", "event.attachment"), ("Skyrift.log", "unreal.logs")]
    submission = CrashSubmission.model_validate_json(crash.json_text())
    assert submission.attachments is not None and len(submission.attachments) == 4


def test_both_layouts_and_a_retry_are_the_same_report():
    reports = [parse_unreal_crash(upload(layout=layout), SKU).crash for layout in ("CR1", "CR1", "legacy")]
    assert all(report is not None for report in reports)
    ids = {report.event_id for report in reports if report is not None}
    assert len(ids) == 1 and len(next(iter(ids)) or "") == 32


def test_the_next_crash_of_the_same_process_is_another_report():
    second = CONTEXT.replace(b"_0000</CrashGUID>", b"_0001</CrashGUID>")
    one = parse_unreal_crash(upload(), SKU).crash
    two = parse_unreal_crash(upload([("CrashContext.runtime-xml", second), ("UEMinidump.dmp", DUMP)]), SKU).crash
    assert one is not None and two is not None and one.event_id != two.event_id


def test_a_crash_with_only_its_minidump():
    crash = parse_unreal_crash(upload([("UE4Minidump.dmp", DUMP)]), SKU).crash
    assert crash is not None and crash.event_id is None
    assert (crash.fields["crashType"], crash.minidumps) == ("minidump", ("UE4Minidump.dmp",))
    assert crash.attachments == {"UE4Minidump.dmp": DUMP}


# found from outside: labelled a minidump, with no minidump to walk
def test_a_crash_with_neither_a_minidump_nor_a_type_is_no_minidump():
    context = CONTEXT.replace(b"<CrashType>Crash</CrashType>", b"").replace(b"<ErrorMessage>", b"<Other>").replace(
        b"</ErrorMessage>", b"</Other>")
    crash = parse_unreal_crash(upload([("CrashContext.runtime-xml", context), ("notes.dmp", b"MDMP" + LOG)]),
                               SKU).crash
    assert crash is not None and crash.minidumps == ()
    assert crash.fields["crashType"] == "unknown"


def test_the_player_is_the_first_id_that_fits():
    context = CONTEXT.replace(b"7d3e9f1a2b4c4d5e8f6a7b8c9d0e1f2a", b"e" * 129).replace(
        b"<LoginId>b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6</LoginId>", b"<LoginId />")
    crash = parse_unreal_crash(upload([("CrashContext.runtime-xml", context)]), SKU).crash
    assert crash is not None and crash.fields["playerId"] == "ana"


def test_file_names_are_made_safe_and_unique():
    crash = parse_unreal_crash(upload([("UEMinidump.dmp", DUMP), ("../../Saved/Logs/Skyrift.log", LOG),
                                       ("Skyrift.log", b"second")]), SKU).crash
    assert crash is not None and crash.attachments == {"UEMinidump.dmp": DUMP, "Skyrift.log": LOG,
                                                       "Skyrift-2.log": b"second"}


# --- refused ----------------------------------------------------------------------------------


def test_a_length_that_lies():
    body = b"CR1" + header(GUID, "x", 0, 1) + entry(0, "UEMinidump.dmp", DUMP, length=len(DUMP) + 1)
    error = refusal(zlib.compress(body))
    assert (error.status, error.code) == (400, "invalid_field")
    assert f"file 0 says {len(DUMP) + 1} bytes but {len(DUMP)} are left" in error.message


@pytest.mark.parametrize(("piece", "says"), [
    (b"CR1" + header(GUID, "x", 0, 1) + entry(0, "a.dmp", DUMP, length=-1), "says -1 bytes"),
    (b"CR1" + header(GUID, "x", 0, 2**31 - 1), "0 to 64"),
    (b"CR1" + header(GUID, "x", 0, MAX_FILES), "but is shorter"),
    (b"CR1" + struct.pack("<I", 2**32 - 1) + b"\0" * 64, "at most 1024"),
    (b"CR1" + header(GUID, "x", 0, 1) + entry(0, "UEMinidump.dmp", DUMP) + b"\0", "1 bytes after its last part"),
    (container(FILES)[:-5], "are left"),
    (container(FILES, "legacy")[:-5], "0 to 64"),
    (b"CR1", "ends inside"),
    (b"", "empty"),
])
def test_a_container_that_does_not_add_up(piece: bytes, says: str):
    error = refusal(zlib.compress(piece))
    assert error.status == 400 and says in error.message


@pytest.mark.parametrize("cut", [1, 2, 100, -10, -1])
def test_a_truncated_upload(cut: int):
    body = upload()
    assert refusal(body[:cut]).status == 400


def test_a_zlib_bomb_costs_at_most_the_limit():
    bomb = zlib.compress(b"CR1" + b"\0" * (256 << 20), 9)
    assert len(bomb) < MAX_CRASH_BYTES
    error = refusal(bomb)
    assert (error.status, error.code) == (413, "payload_too_large")


def test_an_upload_over_the_limit():
    assert refusal(b"\0" * (MAX_CRASH_BYTES + 1)).status == 413


@pytest.mark.parametrize("context", [
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
    b"<FGenericCrashContext><RuntimeProperties><ErrorMessage>&lol2;</ErrorMessage></RuntimeProperties>"
    b"</FGenericCrashContext>",
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>',
    b"<FGenericCrashContext><RuntimeProperties>",
    b"not xml",
    # found by the mangled-container property: expat asks Python for the codec, which raises LookupError
    b'<?xml version="1.0" encoding="ATF-8"?><FGenericCrashContext></FGenericCrashContext>',
    # found in review: one of several bytes a character, which expat reads none of, was a 500
    b'<?xml version="1.0" encoding="shift_jis"?><FGenericCrashContext></FGenericCrashContext>',
])
def test_a_context_that_is_not_plain_xml(context: bytes):
    error = refusal(upload([("CrashContext.runtime-xml", context), ("UEMinidump.dmp", DUMP)]))
    assert (error.status, error.field) == (400, "CrashContext.runtime-xml")


def _many(elements: int) -> bytes:
    """A context of `elements` elements in all, the root's included, in some 4 bytes each."""
    return b"<FGenericCrashContext>" + b"<a/>" * (elements - 1) + b"</FGenericCrashContext>"


def test_a_context_past_the_json_values_of_a_body_is_refused():
    """Found from outside: 1,218 bytes of zlib inflated to a context of 258,000 elements, a report of
    as many JSON values, which /v1/crashes refuses past 131,072 for what parsing them costs: it was
    kept, after 2.5 s of the API's CPU for one upload."""
    error = refusal(upload([("CrashContext.runtime-xml", _many(MAX_JSON_VALUES + 1)), ("UEMinidump.dmp", DUMP)]))
    assert (error.status, error.field) == (400, "CrashContext.runtime-xml")
    assert f"{MAX_JSON_VALUES:,}" in error.message


def test_a_report_past_the_json_values_of_a_body_is_refused_before_it_is_captured(adapters: Adapters):
    """The context within its bound, the report it makes is past it with its other values: refused,
    nothing published, as /v1/crashes would refuse that report."""
    reading = parse_unreal_crash(upload([("CrashContext.runtime-xml", _many(MAX_JSON_VALUES - 10)),
                                         ("UEMinidump.dmp", DUMP)]), SKU)
    with pytest.raises(InvalidField):
        capture_envelope(adapters.log, adapters.spill, reading, SKU)
    assert not any(adapters.log.end_offsets(CRASHES).values())


def test_a_crash_with_nothing_to_read():
    error = refusal(upload([("Skyrift.log", LOG)]))
    assert error.status == 400 and "neither" in error.message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_are_only_ever_refused(data: bytes):
    for body in (data, zlib.compress(data)):
        with pytest.raises(ReporterError):
            parse_unreal_crash(body, SKU)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0), st.binary(min_size=1, max_size=8))
def test_a_mangled_container_is_a_report_or_a_refusal(at: int, garbage: bytes):
    plain = container([("CrashContext.runtime-xml", CONTEXT), ("UEMinidump.dmp", DUMP[:2048])])
    at %= len(plain)
    try:
        crash = parse_unreal_crash(zlib.compress(plain[:at] + garbage + plain[at + len(garbage):]), SKU).crash
    except ReporterError:
        return
    assert crash is not None and crash.attachments


def test_a_log_past_what_the_report_holds_is_left_out_and_the_crash_kept():
    """Found from outside (the Sentry envelope's twin): a container within its limit whose game log
    made the report, in base64, larger than the JSON report's 1 MiB was refused 413 whole."""
    log = bytes(range(256)) * 3_050  # 780,800 bytes
    crash = parse_unreal_crash(upload([*FILES[:2], ("Skyrift.log", log), FILES[3]]), SKU).crash
    assert crash is not None and list(crash.attachments) == ["UEMinidump.dmp", "CrashContext.runtime-xml",
                                                             "CrashReportClient.ini"]
    assert crash.fields["sentryAttachmentsLeftOut"] == [
        {"filename": "Skyrift.log", "attachmentType": "unreal.logs", "sizeBytes": len(log)}]
    assert len(crash.json_text()) <= MAX_BODY_BYTES
    CrashSubmission.model_validate_json(crash.json_text())
