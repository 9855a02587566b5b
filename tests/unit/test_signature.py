from __future__ import annotations

import re
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from crashes.signature import (
    _ADDRESS,
    _FRAME_INDEX,
    _SPACE,
    READS_CHARS,
    READS_LINES,
    _first_lines,
    normalise_frame,
    signature,
    top_frames,
)
from ports.issues import GroupingRules

TRACE = """#0 0x00007ff6a1b2c3d4 in Renderer::DrawMesh(Mesh const*) at renderer.cpp:412
#1 0x00007ff6a1b2a000 in Scene::Render() at scene.cpp:88
#2 0x00007ff6a1b01234 in Game::Tick(float) at game.cpp:1201
#3 0x00007ff6a1b00010 in main"""


def test_addresses_offsets_lines_and_indices_do_not_change_the_signature():
    moved = """#4 0x000055aa00001111 in Renderer::DrawMesh(Mesh const*) at renderer.cpp:415
#5 0x000055aa00002222 in Scene::Render() at scene.cpp:90
#6 0x000055aa00003333 in Game::Tick(float) at game.cpp:1300
#7 0x000055aa00004444 in main"""
    assert signature(TRACE) == signature(moved)


def test_module_offsets_and_windows_style_frames():
    a = "game.exe!Physics::Step+0x1f3\ngame.exe!World::Update+0x20"
    b = "game.exe!Physics::Step+0x2a0\ngame.exe!World::Update+0x88"
    assert signature(a) == signature(b)


def test_different_functions_give_different_signatures():
    other = TRACE.replace("Renderer::DrawMesh", "Renderer::DrawSprite")
    assert signature(TRACE) != signature(other)


def test_crash_handler_frames_are_ignored():
    with_handler = "#0 0x1 in CrashHandler::OnSignal(int)\n#1 0x2 in __GI_raise\n" + TRACE
    assert signature(with_handler) == signature(TRACE)


def test_only_top_frames_count():
    deep = "\n".join(f"#{i} 0x{i:x} in F{i}()" for i in range(10))
    assert signature(deep + "\n#10 0x1 in A()") == signature(deep + "\n#10 0x1 in B()")
    assert top_frames(deep) == ["in F0", "in F1", "in F2", "in F3", "in F4"]


def test_no_trace_no_signature():
    assert signature(None) is None
    assert signature("") is None
    assert signature("\n  \n") is None


def test_a_games_own_frames_that_name_a_sentry_or_an_abort_are_its_crash():
    # a sentry turret, a quest aborted, a minidump viewer: the game's code, not a crash reporter's
    game = "#0 0x1 in SentryTurret::Fire()\n#1 0x2 in Quest::abort()\n#2 0x3 in MinidumpViewer::Open()\n" + TRACE
    assert top_frames(game)[:3] == ["in SentryTurret::Fire", "in Quest::abort", "in MinidumpViewer::Open"]
    reporters = ("#0 0x1 in google_breakpad::ExceptionHandler::WriteMinidump()\n"
                 "#1 0x2 in crashpad::CrashpadClient::DumpWithoutCrash()\n#2 0x3 in sentry__backtrace\n"
                 "#3 0x4 in sentry_sdk.integrations.threading.run at threading.py:99\n#4 0x5 in abort\n"
                 "#5 0x6 in Sentry.Unity.UnityLogHandler.Capture\n")
    assert signature(reporters + TRACE) == signature(TRACE)


def test_rules_skip_frames_and_join_a_frame_with_the_next_as_top_frames_show_them():
    alloc = "#0 0x1 in malloc\n#1 0x2 in std::vector::push\n#2 0x3 in Texture::Load()\n" + TRACE
    assert top_frames(alloc, GroupingRules(skip=("in std::*",), join=("in malloc",))) == [
        "in malloc | in Texture::Load", *top_frames(TRACE)]
    # joined frames make one element: a chain of them is one, and the element count stays 5
    chain = GroupingRules(join=("in *",))
    assert top_frames(alloc, chain) == [" | ".join(top_frames(alloc, count=100))]
    assert signature(alloc, GroupingRules()) == signature(alloc)
    assert signature(alloc, GroupingRules(skip=("in malloc", "in std::*", "in Texture::*"))) == signature(TRACE)


def test_a_glob_is_matched_whole_and_without_catastrophic_backtracking():
    rules = GroupingRules(skip=("*a*a*a*a*a*a*a*a*a*a*a*a*b",))
    long = "in " + "a" * 5000
    started = time.perf_counter()
    assert top_frames(long, rules) == [long]
    assert time.perf_counter() - started < 1
    assert top_frames("in Game::Tick", GroupingRules(skip=("Game::*",))) == ["in Game::Tick"]


def test_a_frame_line_as_long_as_a_body_is_read_in_one_pass():
    # found from outside: a line of many `:1` or a long run of spaces took time in the square of its
    # length. The crash consumer, a thread of the consumers' one process, held the GIL the while: one
    # report of 60 KB held back every report, session and score for a minute, one of 1 MiB for hours.
    # In a process of its own: a regular expression holds the GIL, and no timeout of pytest's could end it
    n = 500_000
    script = f"""
from crashes.signature import normalise_frame
assert normalise_frame("#0 0x1 in f" + ":1" * {n} + " x") == "in f" + ":1" * {n} + " x"
assert normalise_frame("#0 0x1 in f" + ":1" * {n}) == "in f"
assert normalise_frame("in a" + " " * {n} + "b") == "in a b"
assert normalise_frame("in a" + " " * {n} + "+0x10") == "in a"
assert normalise_frame("in a" + "\\t" * {n} + "+ " + " " * {n} + "zz") == "in a + zz"
"""
    # linear, this is milliseconds; in the square of the length, hours
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_signature_reads_the_start_of_a_trace_alone():
    """Found from outside: a trace of 1 MiB of lines that are no frame (209,000 `0x1`) was read
    whole, 0.3 s of CPU, by the crash consumer for its signature and again by every crash-groups
    listing (and dashboard refresh) that showed its group: 31 s for a page of 100."""
    assert top_frames("0x1\n" * READS_LINES + "in Game::Crash") == []
    assert signature("0x1\n" * READS_LINES + "in Game::Crash") is None
    assert top_frames("0x1\n" * (READS_LINES - 1) + "in Game::Crash") == ["in Game::Crash"]
    assert top_frames("in a\n" + "x" * READS_CHARS + "\nin Game::Crash") == ["in a", "x" * (READS_CHARS - 5)]
    assert signature(TRACE + "\n" + "0x1\n" * 300_000) == signature(TRACE)


@given(st.text(st.sampled_from([*"ab \t", *"\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"]), max_size=60))
def test_a_trace_s_first_lines_are_the_lines_splitlines_gives(text: str):
    """The lines read as they are asked for are str.splitlines', for every line break it splits at."""
    assert list(_first_lines(text)) == text.splitlines()


def test_a_trace_s_top_frames_are_read_whole_however_long_its_lines():
    """From a review: a first form cut the trace at a character, before the addresses and line
    numbers went: two reports of one crash of long (templated) frames were cut in different places
    and grouped apart."""
    def trace(width: int, line: int) -> str:
        return "\n".join(f"#{i} 0x{i:0{width}x} in std::vector<{'Game::Thing<int>, ' * 200}{i}>::f() at a.h:{line}"
                         for i in range(6))
    assert len(trace(16, 10)) > 6 * 3000
    assert signature(trace(8, 10)) == signature(trace(16, 99_999)) != signature(trace(8, 10).replace("f()", "g()"))


# the expressions frames were read with before they were linear, as the model of what they take away
_QUADRATIC_OFFSET = re.compile(r"\s*\+\s*(?:0x)?[0-9a-f]+\b", re.IGNORECASE)
_QUADRATIC_LINE = re.compile(r"(?::\d+)+(?=\)?\s*$)|\bline\s+\d+", re.IGNORECASE)


def model_frame(line: str) -> str:
    frame = _FRAME_INDEX.sub("", line)
    frame = _QUADRATIC_OFFSET.sub("", frame)
    frame = _QUADRATIC_LINE.sub("", frame)
    frame = _ADDRESS.sub("", frame)
    return _SPACE.sub(" ", frame).strip(" \t()[]@:")


@given(st.lists(st.sampled_from([*":+)( \t\u00a0x0159afAFg#i", "line", "0x", "\u0661"]), max_size=40).map("".join))
def test_frames_are_read_as_the_quadratic_expressions_read_them(line: str) -> None:
    assert normalise_frame(line) == model_frame(line)


def test_a_trace_of_frames_a_join_rule_takes_is_joined_in_one_pass():
    # found from outside: each frame a join glob took was added by copying the element so far: a
    # 1 MiB trace of `malloc` under a rule joining it held the consumers for 4 to 48 s. Four times
    # that here (as a walk's frames come, where a trace's are read from its start alone), in a
    # process of its own as above
    script = """
from crashes.signature import frames_signature, grouped
from ports.issues import GroupingRules
rules = GroupingRules(join=("malloc",))
[element] = grouped(["malloc"] * 600_000, rules)
assert element == " | ".join(["malloc"] * 600_000)
assert frames_signature(["malloc"] * 600_000, rules) is not None
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
