//! `prov run` returns its command's status as soon as the command has
//! ended, not once the record is stored (a few hundred microseconds later,
//! which every step of a script paid). While the command runs, `prov run`
//! forks: the parent waits for the command, sends the collector the end,
//! renames the record's start file as ended (`prov_store::spool::await_ended`:
//! a query started after our exit waits for it), tells the child and exits
//! with the command's status; the child, the finisher, holding the start
//! file's lock, does what `prov run` did after that: waits for the record to
//! be stored, gives the observation back, reports problems on stderr.
//!
//! Only with a start file (else a query would have nothing to wait for) and
//! an observation from the run preparer (an observation of our own has its
//! collector as the parent's child, whose fate the finisher could not learn).
//! The fork happens while the command runs, so it costs the command's end
//! nothing on a machine with a core to spare.

use std::io::{Read, Write};
use std::process::Child;

use prov_model::CommandEnd;

use crate::record_end::StartFile;
use crate::run::{now_ns, shell_status, wait};
use crate::spawn;

/// How the command ended, and whether the collector was sent that.
pub type CommandEnded = (CommandEnd, bool);

/// Waits for `child` (in this process, or in the parent when it could fork),
/// has `send_end` tell the collector how it ended, and returns that in the
/// process that finishes the record.
pub fn await_command(
    child: Child,
    start_file: Option<&mut StartFile>,
    send_end: impl FnOnce(&CommandEnd) -> bool,
) -> CommandEnded {
    let Some(start_file) = start_file else { return alone(child, send_end) };
    let Ok((reader, mut writer)) = std::io::pipe() else { return alone(child, send_end) };
    match spawn::fork() {
        Ok(Some(_finisher)) => {
            drop(reader);
            let end = waited(child);
            let sent = send_end(&end);
            let renamed = start_file.mark_ended().is_ok();
            let status = end.exit_status.unwrap_or(0);
            let _ = writer.write_all(&encode(end.end_ns, status, sent, renamed));
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
            let (end_ns, status, sent, renamed) = decode(&message);
            if renamed {
                start_file.note_ended();
            }
            (CommandEnd::with_status(end_ns, status), sent)
        }
        Err(_) => alone(child, send_end),
    }
}

/// Without a fork: all in this process.
fn alone(child: Child, send_end: impl FnOnce(&CommandEnd) -> bool) -> CommandEnded {
    let end = waited(child);
    let sent = send_end(&end);
    (end, sent)
}

fn waited(child: Child) -> CommandEnd {
    let status = wait(child);
    CommandEnd::with_status(now_ns(), shell_status(status))
}

/// The parent's word to the finisher: end time, status, `End` sent, start
/// file renamed.
const MESSAGE_LEN: usize = 14;

fn encode(end_ns: i64, status: i32, sent: bool, renamed: bool) -> [u8; MESSAGE_LEN] {
    let mut message = [0; MESSAGE_LEN];
    message[..8].copy_from_slice(&end_ns.to_le_bytes());
    message[8..12].copy_from_slice(&status.to_le_bytes());
    message[12] = u8::from(sent);
    message[13] = u8::from(renamed);
    message
}

fn decode(message: &[u8; MESSAGE_LEN]) -> (i64, i32, bool, bool) {
    let end_ns = i64::from_le_bytes(message[..8].try_into().unwrap_or_default());
    let status = i32::from_le_bytes(message[8..12].try_into().unwrap_or_default());
    (end_ns, status, message[12] == 1, message[13] == 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_carries_the_end() {
        for (end_ns, status, sent, renamed) in
            [(1_764_000_000_123_456_789, 0, true, true), (-1, 143, false, true), (0, 255, true, false)]
        {
            assert_eq!(super::decode(&super::encode(end_ns, status, sent, renamed)), (end_ns, status, sent, renamed));
        }
    }
}
