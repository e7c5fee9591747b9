//! prov-writer: started by prov-collector (never by users) with a pipe of
//! frames on stdin and a pipe for replies on stdout (see
//! `prov_protocol::writer_pipe`). Ends when stdin closes and everything is stored.
#![deny(unsafe_code)]

use std::io::{BufReader, Write};
use std::process::ExitCode;
use std::sync::mpsc;

use prov_protocol::writer_pipe::{decode_to_writer, read_frame, write_frame, MAX_FRAME, MAX_REPLY};
use prov_writer::{log, writer};

/// Frames decoded ahead of the database: enough to merge the batches that
/// queued up during one commit into the next (see `writer::run`).
const AHEAD: usize = 32;

fn main() -> ExitCode {
    let (tx, rx) = mpsc::sync_channel(AHEAD);
    // Reads while the writer commits, so the collector's pipe keeps draining.
    let reader = std::thread::spawn(move || {
        let mut stdin = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
        let mut frame = Vec::new();
        loop {
            match read_frame(&mut stdin, MAX_FRAME, &mut frame)
                .and_then(|more| more.then(|| decode_to_writer(&frame)).transpose())
            {
                Ok(Some(msg)) => {
                    if tx.send(msg).is_err() {
                        return Ok(());
                    }
                }
                Ok(None) => return Ok(()),
                // The collector is the only sender: a bad frame is a bug
                // there, and nothing after it can be trusted to line up.
                Err(e) => return Err(e),
            }
        }
    });
    let mut stdout = std::io::stdout().lock();
    let mut buf = Vec::new();
    writer::run(rx, |report| {
        // A collector that is gone needs no answer.
        let _ = write_frame(&mut stdout, report, MAX_REPLY, &mut buf).and_then(|()| Ok(stdout.flush()?));
    });
    match reader.join() {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            log::line(&format!("stopped reading the collector's records: {e}"));
            ExitCode::FAILURE
        }
        Err(_) => ExitCode::FAILURE,
    }
}
