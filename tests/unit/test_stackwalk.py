"""adapters.stackwalk on real minidumps of a real crashing program (tests/fixtures/minidumps, made by
scripts/make-minidump-fixtures) with rust-minidump (stackwalk/), as `make test` builds it."""

from __future__ import annotations

import random
import resource
import struct
from pathlib import Path, PurePosixPath

import pytest

from adapters.stackwalk import Stackwalker, WalkerBroken
from crashes.symbols import SymbolFileId, SymbolFileRefused, symbol_file_id, symbol_path
from ports.minidumps import Frame, Module, Walked, WalkFailed, WalkLate

FIXTURES = Path(__file__).parents[1] / "fixtures" / "minidumps"
[SYMBOL_FILE] = FIXTURES.glob("*/*/*.sym")
PROGRAM = "blackbox-crasher"


@pytest.fixture(scope="module")
def walker() -> Stackwalker:
    return Stackwalker.installed()


def walk(walker: Stackwalker, dump: str, symbols: Path = FIXTURES) -> Walked:
    walked = walker.walk((FIXTURES / f"{dump}.dmp").read_bytes(), symbols)
    assert isinstance(walked, Walked), walked
    return walked


def functions(walked: Walked, count: int) -> list[str | None]:
    return [frame.function for frame in walked.frames[:count]]


def test_with_symbols_the_frames_name_the_programs_functions(walker):
    walked = walk(walker, "level-magic")

    assert walked.crash_reason is not None and walked.crash_reason.startswith("SIGSEGV")
    assert walked.crash_address == 0
    assert functions(walked, 4) == [
        "blackbox_crasher::parse_level_header",
        "blackbox_crasher::load_level",
        "blackbox_crasher::run",
        "blackbox_crasher::main",
    ]
    top = walked.frames[0]
    assert (top.module, top.file, top.trust, top.missing_symbols) == (PROGRAM, "src/main.rs", "context", False)
    assert top.line is not None and top.function_offset is not None
    # found by the .sym's unwind records, not by scanning the stack
    assert {frame.trust for frame in walked.frames[1:4]} == {"cfi"}


def test_without_symbols_the_frames_are_module_and_offset(walker, tmp_path):
    walked = walk(walker, "level-magic", symbols=tmp_path)

    program_frames = [frame for frame in walked.frames if frame.module == PROGRAM]
    assert len(program_frames) >= 4
    assert all(frame.function is None and frame.file is None for frame in program_frames)
    assert all(frame.missing_symbols and frame.module_offset is not None for frame in program_frames)
    assert walked.missing_symbols
    assert PROGRAM in {module.name for module in walked.modules_missing_symbols}


def test_the_programs_symbols_arriving_leave_only_the_system_libraries_missing(walker, tmp_path):
    without = {module.name for module in walk(walker, "level-magic", symbols=tmp_path).modules_missing_symbols}
    with_symbols = {module.name for module in walk(walker, "level-magic").modules_missing_symbols}

    assert with_symbols == without - {PROGRAM}
    assert "libc.so.6" in with_symbols


def test_two_crashes_of_one_bug_share_their_functions_not_their_addresses(walker):
    magic, version = walk(walker, "level-magic"), walk(walker, "level-version")

    assert functions(magic, 4) == functions(version, 4)
    assert magic.frames[0].instruction != version.frames[0].instruction
    # not only ASLR: the same function faults at another instruction
    assert magic.frames[0].module_offset != version.frames[0].module_offset
    assert magic.frames[0].line != version.frames[0].line


def test_another_bug_names_another_function_and_signal(walker):
    walked = walk(walker, "patch")

    assert walked.crash_reason is not None and walked.crash_reason.startswith("SIGILL")
    assert functions(walked, 3) == ["blackbox_crasher::apply_patch", "blackbox_crasher::run", "blackbox_crasher::main"]


def test_the_modules_carry_the_identity_of_their_symbol_files(walker):
    identity = symbol_file_id(SYMBOL_FILE.read_bytes())
    [program] = [module for module in walk(walker, "patch").modules if module.name == PROGRAM]

    assert (program.debug_file, program.debug_id) == (identity.debug_file, identity.debug_id)
    assert program.code_id and program.base_address > 0
    assert SYMBOL_FILE.relative_to(FIXTURES).as_posix() == str(identity.path)


def _random_bytes() -> bytes:
    return random.Random(18).randbytes(64 * 1024)


def _truncated() -> bytes:
    return (FIXTURES / "level-magic.dmp").read_bytes()[:200]


def _header_only() -> bytes:
    # a minidump's signature and version, then nothing it promises
    return (FIXTURES / "level-magic.dmp").read_bytes()[:32]


@pytest.mark.parametrize("minidump", [lambda: b"", _random_bytes, _truncated, _header_only])
def test_bad_bytes_are_a_failure_with_a_reason(walker, minidump):
    failed = walker.walk(minidump(), FIXTURES)

    assert isinstance(failed, WalkFailed)
    assert failed.reason


def test_a_walk_past_its_deadline_is_raised_to_be_tried_again_not_blamed_on_the_dump(walker):
    """Found from outside: under a crash flood the consumers (at nice 10) get a sliver of the
    cores, and a walk of a few seconds' CPU outlasts a deadline of wall time. That is the
    machine's doing: the report was marked failed for good, and never walked again. Found in
    review: raised as a walker that cannot run, it failed its whole batch, walked again and again
    while the machine stayed busy; it is the report's alone, to walk later."""
    slow = Stackwalker(walker.binary, timeout_s=0.001)

    with pytest.raises(WalkLate, match=r"took longer than 0\.001 s"):
        slow.walk((FIXTURES / "level-magic.dmp").read_bytes(), FIXTURES)


def test_a_walker_killed_for_its_cpu_leaves_no_core_file(tmp_path):
    """Found in review: SIGXCPU's default action dumps core, a file as large as the walker's memory
    in its working directory, for every hostile dump."""
    telling = tmp_path / "walker"
    telling.write_text('#!/bin/sh\nfor i in $(seq 100); do [ "$(ulimit -c)" = 0 ] && break; sleep 0.01; done\n'
                       "ulimit -c >&2\nexit 3\n")
    telling.chmod(0o755)
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # what the walker would inherit elsewhere
    try:
        assert Stackwalker(telling).walk(b"MDMP", tmp_path) == WalkFailed("0")
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def test_a_walk_past_its_cpu_budget_is_the_dumps_failure(tmp_path):
    """What a hostile dump can do to the walker (loop for ever) is bounded by CPU time, which a
    busy machine does not stretch."""
    spinning = tmp_path / "walker"
    spinning.write_text("#!/bin/sh\nwhile :; do :; done\n")
    spinning.chmod(0o755)

    failed = Stackwalker(spinning, cpu_s=1, timeout_s=30).walk(b"MDMP", tmp_path)

    assert failed == WalkFailed("blackbox-stackwalk used more than 1 s of CPU on this minidump")


def test_a_walk_printing_past_its_cap_is_a_failure(walker):
    chatty = Stackwalker(walker.binary, max_output_bytes=1000)

    failed = chatty.walk((FIXTURES / "level-magic.dmp").read_bytes(), FIXTURES)

    assert failed == WalkFailed("blackbox-stackwalk printed more than 1000 bytes")


def _threads_on_one_stack(threads: int) -> bytes:
    """level-magic.dmp with `threads` threads that share one 64 KiB stack holding nothing but a
    return address into libc (which has no symbols, so a scan takes every word), and one context."""
    dump = bytearray((FIXTURES / "level-magic.dmp").read_bytes())
    _, _, count, directory = struct.unpack_from("<4sIII", dump, 0)
    streams = {kind: (i, rva) for i in range(count)
               for kind, _, rva in [struct.unpack_from("<III", dump, directory + 12 * i)]}
    thread_index, thread_rva = streams[3]  # ThreadListStream
    thread = bytearray(dump[thread_rva + 4 : thread_rva + 4 + 48])
    context_size, context_rva = struct.unpack_from("<II", thread, 40)
    context = bytearray(dump[context_rva : context_rva + context_size])
    _, modules_rva = streams[4]  # ModuleListStream: the second module is libc
    in_libc = struct.unpack_from("<Q", dump, modules_rva + 4 + 108)[0] + 0x27249
    stack_at = 0x7FFD00000000
    struct.pack_into("<Q", context, 0x98, stack_at)  # rsp
    struct.pack_into("<Q", context, 0xA0, 0)  # rbp
    struct.pack_into("<Q", context, 0xF8, in_libc)  # rip
    new_context = len(dump)
    dump += context
    stack = len(dump)
    dump += struct.pack("<Q", in_libc) * (65536 // 8)
    listed = bytearray(struct.pack("<I", threads))
    for n in range(threads):
        struct.pack_into("<I", thread, 0, 100_000 + n)
        struct.pack_into("<QII", thread, 24, stack_at, 65536, stack)
        struct.pack_into("<II", thread, 40, context_size, new_context)
        listed += thread
    struct.pack_into("<III", dump, directory + 12 * thread_index, 3, len(listed), len(dump))
    dump += listed
    _, exception_rva = streams[6]  # ExceptionStream: its thread's context
    struct.pack_into("<II", dump, exception_rva + 8 + 152, context_size, new_context)
    return bytes(dump)


def test_a_walk_past_its_memory_is_the_dumps_failure(walker):
    """Found from outside: a 92 KB dump of 40 threads on one stack of return addresses walked in
    2.3 GB or so (20: 1.1 GB; 110: 6.4 GB in 96 KB, and the output cap came only after it), past
    the walker Lambda's 1,769 MB and an OOM killer's patience on a serve."""
    hostile = _threads_on_one_stack(40)
    assert len(hostile) < 100_000

    assert walker.walk(hostile, FIXTURES) == WalkFailed(
        "blackbox-stackwalk used more than 1024 MiB of memory on this minidump")
    # a game's dump and its symbols take tens of MB
    assert isinstance(Stackwalker(walker.binary, memory_bytes=64 << 20).walk(
        (FIXTURES / "level-magic.dmp").read_bytes(), FIXTURES), Walked)


def test_a_symbol_files_identity_is_its_module_line():
    identity = symbol_file_id(SYMBOL_FILE.read_bytes())

    assert (identity.os, identity.arch, identity.debug_file) == ("Linux", "x86_64", PROGRAM)
    assert identity.path == PurePosixPath(PROGRAM, identity.debug_id, f"{PROGRAM}.sym")


def test_a_debug_file_of_as_many_bytes_as_a_file_name_holds_is_taken():
    name = "\u00e9".encode() * 125 + b"d"  # 251 bytes
    identity = symbol_file_id(b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + name)
    assert len(identity.path.name.encode()) == 255


def test_the_longest_plain_debug_file_is_the_one_whose_symbol_path_a_walk_can_await():
    identity = symbol_file_id(b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + b"d" * 233)
    assert len(str(symbol_path(identity.debug_file, "0" * 40))) == 512


def test_a_pdbs_symbol_file_drops_the_pdb_and_the_id_is_upper_case():
    sym = b"MODULE windows x86_64 5a9832e5287241c1838ed98914e9b7ff1 Game Shipping.pdb\r\nFILE 0 a.cpp\r\n"

    assert symbol_file_id(sym) == SymbolFileId(
        os="windows", arch="x86_64", debug_id="5A9832E5287241C1838ED98914E9B7FF1", debug_file="Game Shipping.pdb"
    )
    assert str(symbol_file_id(sym).path) == "Game Shipping.pdb/5A9832E5287241C1838ED98914E9B7FF1/Game Shipping.sym"


@pytest.mark.parametrize(
    "sym",
    [
        b"",
        b"INFO CODE_ID D17F593C0A7CC01BB2A03B414F0E4418\nMODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 a\n",
        b"MODULE Linux x86_64 not-hex-at-all a\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E4418 short-id\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 ../../etc/passwd\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 ..\n",
        b"MODULE windows x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 C:\\build\\game.pdb\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 \xff\xfe\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + b"a" * 10_000,
        # found from outside: past what a file system's name holds once .sym is added (252 bytes),
        # or in UTF-8 (128 two-byte letters); and names a route cannot be asked for again
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + b"d" * 252,
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + "\u00e9".encode() * 128,
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 game\tserver",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 game\rserver\n",
        # found from outside: taken, and no DELETE route could name it again
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 ha#sh.so\n",
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 what?.so\n",
        # found from outside: taken as .pdb/<id>/.sym, where a walk never awaits one
        b"MODULE windows x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 .pdb\n",
        b"MODULE windows x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 .PDB\n",
        b'MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 "game".so\n',
        "MODULE mac arm64 3C597FD17C0A1BC0B2A03B414F0E44180 Game\u0301.dSYM\n".encode(),
        b"\x7fELF\x02\x01\x01\x00",
        # a name whose symbol path a walk could not await (awaiting_symbols keeps 512 characters)
        b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + b"d" * 240,
    ],
)
def test_a_file_that_does_not_start_with_a_module_line_is_refused(sym):
    with pytest.raises(SymbolFileRefused):
        symbol_file_id(sym)


def test_a_walker_that_cannot_run_is_raised_not_blamed_on_the_dump(tmp_path):
    """A walker that fails for its own reasons (here, a loader's exit code) leaves the report as
    it was, to be walked when the deployment is fixed; a walker killed on a dump is the dump's."""
    broken = tmp_path / "walker"
    broken.write_text("#!/bin/sh\necho 'version GLIBC_2.99 not found' >&2\nexit 127\n")
    broken.chmod(0o755)
    with pytest.raises(WalkerBroken, match=r"exited with 127: version GLIBC_2\.99 not found"):
        Stackwalker(broken).walk(b"MDMP", tmp_path)
    killed = tmp_path / "killed"
    killed.write_text("#!/bin/sh\nkill -ABRT $$\n")
    killed.chmod(0o755)
    died = WalkFailed("blackbox-stackwalk died on this minidump (signal 6)")
    assert Stackwalker(killed).walk(b"MDMP", tmp_path) == died


def test_the_modules_of_the_frames_are_those_at_their_base_not_every_one_of_their_name():
    # found from outside: a minidump listing a module thousands of times, at other bases, had every
    # copy looked up (an S3 GET each, one after another) and listed as missing its symbols
    copies = [Module.model_validate({"filename": "game", "base_addr": hex(0x10000 * (n + 1)),
                                     "debug_file": "game", "debug_id": f"{n:033X}"}) for n in range(1000)]
    frames = (Frame.model_validate({"offset": hex(0x50010), "module": "game", "module_offset": "0x10",
                                    "trust": "context", "missing_symbols": True}),
              Frame.model_validate({"offset": hex(0x20020), "module": "game", "module_offset": "0x20", "trust": "cfi"}))
    walked = Walked(crash_reason=None, crash_address=None, frames=frames, modules=tuple(copies))
    assert [m.base_address for m in walked.modules_missing_symbols] == [0x50000]
    assert [m.base_address for m in walked.frame_modules] == [0x20000, 0x50000]
