//! A game-ish program with two bugs, crashing under EmbarkStudios' crash-handler and writing a
//! minidump out of process with minidumper (rust-minidump's minidump-writer), as a shipped game's
//! crash reporter does.
//!
//! `blackbox-crasher <dump path> <mode>`, mode one of:
//! - `level-magic`, `level-version`: bug 1, a missing level's null header read in
//!   `parse_level_header` (two fields: two faulting instructions, one bug);
//! - `patch`: bug 2, the trap of a failed invariant in `apply_patch` (SIGILL).
//!
//! The dump is written by `blackbox-dump-server` (src/bin), which this program starts beside
//! itself: it alone links minidump-writer, so this program's symbols stay small.
use std::hint::black_box;
use std::time::Duration;

#[repr(C)]
struct LevelHeader {
    magic: u32,
    version: u32,
}

/// The level table: only "castle" was shipped.
#[inline(never)]
fn find_level(name: &str) -> *const LevelHeader {
    static CASTLE: LevelHeader = LevelHeader {
        magic: 0x4c56_4c31,
        version: 3,
    };
    if black_box(name) == "castle" {
        &CASTLE
    } else {
        std::ptr::null()
    }
}

/// Bug 1: reads the header without checking that the level exists.
#[inline(never)]
fn parse_level_header(header: *const LevelHeader, field: &str) -> u32 {
    // SAFETY: none, on purpose: a missing level's header is null
    unsafe {
        // two fields, two loads: the same bug faults at two instructions
        let words = header.cast::<u32>();
        if black_box(field) == "version" {
            black_box(std::ptr::read_volatile(words.wrapping_add(1)))
        } else {
            std::ptr::read_volatile(words).rotate_left(black_box(8))
        }
    }
}

#[inline(never)]
fn load_level(name: &str, field: &str) -> u32 {
    // black_box on the way out: a tail call would leave this frame off the stack
    black_box(parse_level_header(find_level(name), field))
}

/// Bug 2: a patch whose checksum does not match traps, as `__builtin_trap` would.
#[inline(never)]
fn apply_patch(checksum: u32) -> u32 {
    if black_box(checksum) != 0x1234 {
        // SAFETY: ud2 only raises SIGILL
        unsafe { std::arch::asm!("ud2") };
    }
    checksum
}

#[inline(never)]
fn run(mode: &str) -> u32 {
    black_box(match mode {
        "level-magic" => load_level("sewers", "magic"),
        "level-version" => load_level("sewers", "version"),
        "patch" => apply_patch(7),
        _ => panic!("unknown mode {mode}"),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dump, mode) = (&args[1], &args[2]);
    let socket = format!("{dump}.sock");
    let server_exe = std::env::current_exe()
        .expect("own path")
        .with_file_name("blackbox-dump-server");
    let mut server = std::process::Command::new(server_exe)
        .args([dump, &socket])
        .spawn()
        .expect("dump server process");
    let client = loop {
        if let Ok(client) = minidumper::Client::with_name(minidumper::SocketName::path(&socket)) {
            break client;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: the closure only talks to the server over the already-open socket
    let handler = crash_handler::CrashHandler::attach(unsafe {
        crash_handler::make_crash_event(move |context: &crash_handler::CrashContext| {
            crash_handler::CrashEventResult::Handled(client.request_dump(context).is_ok())
        })
    })
    .expect("crash handler");
    // the server (another process) may ptrace this one to read its threads
    handler.set_ptracer(Some(server.id()));
    let value = run(mode);
    println!("no crash: {value}");
    drop(handler);
    let _ = server.kill();
}
