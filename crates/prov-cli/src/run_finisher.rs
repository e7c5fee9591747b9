//! `prov run` returns its command's status as soon as the command has
//! ended, not once the record is stored (a few hundred microseconds later,
//! which every step of a script paid). While the command runs, `prov run`
//! forks: the parent waits for the command, renames the record's start file
//! as ended (`prov_store::spool::await_ended`: a query started after our
//! exit waits for it), tells the child how the command ended and exits with
//! its status; the child, the finisher, holding the start file's lock,
//! does what `prov run` did after the command: sends the end, waits for the
//! record to be stored, reports problems on stderr.
//!
//! Only with a start file (else a query would have nothing to wait for) and
//! an observation from the run preparer (an observation of our own has its
//! collector as the parent's child, whose fate the finisher could not learn).
//! The fork happens while the command runs, so it costs the command's end
//! nothing on a machine with a core to spare.

use std::io::{Read, Write};
use std::process::Child;

use crate::record_end::StartFile;
use crate::run::{now_ns, shell_status, wait};
use crate::spawn;

/// When and how the command ended: (wall clock in ns, status as a shell
/// reports it).
pub type CommandEnded = (i64, i32);

/// Waits for `child` (in this process, or in the parent when it could fork)
/// and returns how it ended, in the process that finishes the record.
pub fn await_command(child: Child, start_file: Option<&mut StartFile>) -> CommandEnded {
    let waited = |child| {
        let status = wait(child);
        (now_ns(), shell_status(status))
    };
    let Some(start_file) = start_file else { return waited(child) };
    let Ok((reader, mut writer)) = std::io::pipe() else { return waited(child) };
    match spawn::fork() {
        Ok(Some(_finisher)) => {
            drop(reader);
            let (end_ns, status) = waited(child);
            let renamed = start_file.mark_ended().is_ok();
            let _ = writer.write_all(&encode(end_ns, status, renamed));
            std::process::exit(status)
        }
        Ok(None) => {
            drop(writer);
            // The parent's child: not ours to wait for (dropping it waits not).
            drop(child);
            spawn::become_finisher();
            let mut message = [0; MESSAGE_LEN];
            if (&reader).read_exact(&mut message).is_err() {
                // The parent was killed while its command ran: as when
                // `prov run` itself is, the collector ends the record once
                // it sees us gone, and the start file is left to ingest.
                std::process::exit(1);
            }
            let (end_ns, status, renamed) = decode(&message);
            if renamed {
                start_file.note_ended();
            }
            (end_ns, status)
        }
        Err(_) => waited(child),
    }
}

const MESSAGE_LEN: usize = 13;

fn encode(end_ns: i64, status: i32, renamed: bool) -> [u8; MESSAGE_LEN] {
    let mut message = [0; MESSAGE_LEN];
    message[..8].copy_from_slice(&end_ns.to_le_bytes());
    message[8..12].copy_from_slice(&status.to_le_bytes());
    message[12] = u8::from(renamed);
    message
}

fn decode(message: &[u8; MESSAGE_LEN]) -> (i64, i32, bool) {
    let end_ns = i64::from_le_bytes(message[..8].try_into().unwrap_or_default());
    let status = i32::from_le_bytes(message[8..12].try_into().unwrap_or_default());
    (end_ns, status, message[12] == 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_carries_the_end() {
        for (end_ns, status, renamed) in [(1_764_000_000_123_456_789, 0, true), (-1, 143, false), (0, 255, true)] {
            assert_eq!(super::decode(&super::encode(end_ns, status, renamed)), (end_ns, status, renamed));
        }
    }
}
