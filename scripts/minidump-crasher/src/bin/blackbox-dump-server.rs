//! `blackbox-dump-server <dump path> <socket>`: writes the minidump of the one crash that
//! blackbox-crasher reports on the socket (minidumper's server, rust-minidump's minidump-writer).
use std::path::PathBuf;

struct DiskWriter(PathBuf);

impl minidumper::ServerHandler for DiskWriter {
    fn create_minidump_file(&self) -> Result<(std::fs::File, PathBuf), std::io::Error> {
        Ok((std::fs::File::create(&self.0)?, self.0.clone()))
    }

    fn on_minidump_created(
        &self,
        result: Result<minidumper::MinidumpBinary, minidumper::Error>,
    ) -> minidumper::LoopAction {
        if let Err(error) = result {
            eprintln!("failed to write the minidump: {error}");
            std::process::exit(1);
        }
        minidumper::LoopAction::Exit
    }

    fn on_message(&self, _kind: u32, _buffer: Vec<u8>) {}
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dump, socket) = (PathBuf::from(&args[1]), &args[2]);
    let mut server =
        minidumper::Server::with_name(minidumper::SocketName::path(socket)).expect("dump server");
    let shutdown = std::sync::atomic::AtomicBool::new(false);
    server
        .run(Box::new(DiskWriter(dump)), &shutdown, None)
        .expect("dump server loop");
}
