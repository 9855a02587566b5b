//! `blackbox-stackwalk <minidump> <symbols dir>`: walks the minidump's threads with the Breakpad
//! `.sym` files under the directory (symbol-server layout) and prints minidump-processor's JSON
//! report, the schema of `minidump-stackwalk --json`. A minidump it cannot read or walk: a line on
//! stderr and exit code 3 (its caller tells that apart from a walker that cannot run at all).
use std::process::ExitCode;

use minidump::Minidump;
use minidump_unwind::{simple_symbol_supplier, Symbolizer};

/// The dump is at fault, not the walker.
const UNREADABLE: u8 = 3;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dump, symbols] = args.as_slice() else {
        eprintln!("usage: blackbox-stackwalk <minidump> <symbols dir>");
        return ExitCode::from(2);
    };
    let dump = match Minidump::read_path(dump) {
        Ok(dump) => dump,
        Err(error) => {
            eprintln!("{} - reading the minidump: {error}", error.name());
            return ExitCode::from(UNREADABLE);
        }
    };
    let provider = Symbolizer::new(simple_symbol_supplier(vec![symbols.into()]));
    let state = match pollster::block_on(minidump_processor::process_minidump(&dump, &provider)) {
        Ok(state) => state,
        Err(error) => {
            eprintln!("{} - walking the minidump: {error}", error.name());
            return ExitCode::from(UNREADABLE);
        }
    };
    if let Err(error) = state.print_json(&mut std::io::stdout().lock(), false) {
        eprintln!("writing the report: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
