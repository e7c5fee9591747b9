//! The pipe between the collector (which holds the fanotify group) and
//! prov-writer (which owns the user's database, spool and collector log):
//! finished records one way, short reports back. Each side treats the other's
//! bytes as hostile: frames are length-checked before anything is allocated
//! for them, and decoding is a pure function that returns an error, never
//! panics, on any input.
//!
//! A frame is a u32 little-endian payload length followed by the payload, a
//! postcard encoding of one message (byte strings raw, integers as varints:
//! see `record::bytes_as_hex`).

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::record::{ArchivedRead, CommandBegin, CommandEnd, Completeness, FileEvent, ProcessRecord};

/// The largest frame to the writer: a batch of events, or archived files
/// (the collector archives no file larger than `MAX_ARCHIVED_FILE`).
pub const MAX_FRAME: usize = 256 << 20;
/// Room left in a frame beside one archived file's content.
pub const MAX_ARCHIVED_FILE: u64 = (MAX_FRAME - (1 << 20)) as u64;
/// The largest reply from the writer (a few counters and two reasons).
pub const MAX_REPLY: usize = 64 << 10;
/// Bytes of the length prefix.
const PREFIX: usize = 4;

/// Collector → writer, in this order: `Setup`, `Begin`, then `Events`,
/// `Archive`, `Completeness`, `End` and `Sync` as they come. `Log` may come
/// at any time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToWriter {
    /// Where the record goes, from the user's settings.
    Setup {
        database: PathBuf,
        spool_dir: PathBuf,
        busy_timeout_ms: u64,
    },
    Begin(CommandBegin),
    Events(Vec<FileEvent>),
    /// Contents kept by the script archive.
    Archive(Vec<ArchivedRead>),
    Completeness(Completeness),
    /// Processes of the command, each sent once, when final.
    Processes(Vec<ProcessRecord>),
    End(CommandEnd),
    /// One line for the collector log (the collector opens nothing in the
    /// user's directories).
    Log(String),
    /// Asks for a `SyncReport` once everything sent before is stored or spooled.
    Sync,
    /// The record is complete and its observation waits for another one:
    /// the database (or spool file) is closed and the record forgotten, so
    /// nothing is held open while the observation idles, and the next
    /// record starts from its own `Setup`. Not answered: a `Sync` after it
    /// is, once it is closed.
    Close,
}

/// Writer → collector: the answer to `Sync`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncReport {
    /// Events stored or spooled so far.
    pub events: u64,
    /// Why the record went to the spool instead of the database.
    pub spooled: Option<String>,
    /// Why (part of) the record could not be kept at all.
    pub lost: Option<String>,
    /// CPU time (user + system) the writer used so far.
    pub cpu_ns: u64,
    /// The fallback spool the record went to, the spool itself being
    /// unwritable too (`spooled` says why both failed).
    pub fallback: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("frame cut short")]
    Truncated,
    #[error("malformed frame: {0}")]
    Malformed(#[from] postcard::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Encodes `msg` as one frame into `buf` (cleared first; its capacity is
/// reused from frame to frame).
pub fn encode_frame<T: Serialize>(msg: &T, max: usize, buf: &mut Vec<u8>) -> Result<(), FrameError> {
    let mut out = std::mem::take(buf);
    out.clear();
    out.extend_from_slice(&[0; PREFIX]);
    let mut out = postcard::to_extend(msg, out)?;
    let len = out.len() - PREFIX;
    if len > max {
        *buf = out;
        return Err(FrameError::TooLarge { len, max });
    }
    out[..PREFIX].copy_from_slice(&(len as u32).to_le_bytes());
    *buf = out;
    Ok(())
}

/// Decodes one whole frame (length prefix included) of at most `max` payload
/// bytes. Trailing bytes, a wrong length or a payload that is not exactly
/// one message are errors.
pub fn decode_frame<T: DeserializeOwned>(frame: &[u8], max: usize) -> Result<T, FrameError> {
    let (prefix, payload) = frame.split_at_checked(PREFIX).ok_or(FrameError::Truncated)?;
    let len = u32::from_le_bytes(prefix.try_into().map_err(|_| FrameError::Truncated)?) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    if payload.len() != len {
        return Err(FrameError::Truncated);
    }
    let (msg, rest) = postcard::take_from_bytes(payload)?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(postcard::Error::DeserializeBadEncoding));
    }
    Ok(msg)
}

/// A frame to the writer, for fuzzing and the writer's reader.
pub fn decode_to_writer(frame: &[u8]) -> Result<ToWriter, FrameError> {
    decode_frame(frame, MAX_FRAME)
}

/// A reply from the writer.
pub fn decode_reply(frame: &[u8]) -> Result<SyncReport, FrameError> {
    decode_frame(frame, MAX_REPLY)
}

/// Reads one whole frame into `buf`; false at a clean end of the stream
/// (before a frame's first byte). Memory grows only as bytes arrive, never
/// past `max` plus the prefix.
pub fn read_frame(r: &mut impl Read, max: usize, buf: &mut Vec<u8>) -> Result<bool, FrameError> {
    buf.clear();
    let mut prefix = [0u8; PREFIX];
    let mut got = 0;
    while got < PREFIX {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    buf.extend_from_slice(&prefix);
    r.take(len as u64).read_to_end(buf)?;
    if buf.len() != PREFIX + len {
        return Err(FrameError::Truncated);
    }
    Ok(true)
}

/// Encodes `msg` and writes it as one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T, max: usize, buf: &mut Vec<u8>) -> Result<(), FrameError> {
    encode_frame(msg, max, buf)?;
    w.write_all(buf)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::HashParams;
    use crate::record::Access;

    fn event(i: u64) -> FileEvent {
        FileEvent {
            access: if i.is_multiple_of(2) { Access::Read } else { Access::Write },
            path: format!("/home/user/project/src/module{i}/file_{i}.rs").into_bytes(),
            size: 1000 + i * 37,
            mtime_ns: 1_763_900_000_123_456_789 + i as i64,
            hash: (!i.is_multiple_of(7)).then_some(0x9e37_79b9_7f4a_7c15 ^ i),
            hash_params: HashParams::default(),
            pid: Some(4000 + i as u32),
        }
    }

    fn every_message() -> Vec<ToWriter> {
        vec![
            ToWriter::Setup {
                database: "/home/u/.local/share/prov/prov.db".into(),
                spool_dir: "/home/u/.local/state/prov/spool".into(),
                busy_timeout_ms: 5000,
            },
            ToWriter::Begin(CommandBegin {
                uuid: "0197-uuid".into(),
                session: "s".into(),
                seq: 3,
                text: b"echo \xff > f".to_vec(),
                cwd: b"/tmp".to_vec(),
                host: "h".into(),
                user: "u".into(),
                shell: "run".into(),
                start_ns: -1,
                env: None,
            }),
            ToWriter::Events(vec![event(1), event(7), FileEvent { path: b"/\xfe\x00\n".to_vec(), ..event(2) }]),
            ToWriter::Archive(vec![ArchivedRead {
                path: b"/x/run.sh".to_vec(),
                mode: 0o755,
                mtime_ns: 5,
                content: b"#!/bin/sh\n\xff".to_vec(),
            }]),
            ToWriter::Completeness(Completeness { denied: 2, unmarked_mounts: 1, ..Default::default() }),
            ToWriter::End(CommandEnd::with_status(9, 130)),
            ToWriter::End(CommandEnd { text: Some(b"ls".to_vec()), ..CommandEnd::with_status(9, 0) }),
            ToWriter::Log("record spooled".into()),
            ToWriter::Sync,
            ToWriter::Close,
        ]
    }

    #[test]
    fn every_message_survives_a_frame_and_a_stream() {
        let mut stream = Vec::new();
        let mut buf = Vec::new();
        for msg in every_message() {
            encode_frame(&msg, MAX_FRAME, &mut buf).unwrap();
            assert_eq!(decode_to_writer(&buf).unwrap(), msg);
            write_frame(&mut stream, &msg, MAX_FRAME, &mut buf).unwrap();
        }
        let mut reader = &stream[..];
        let mut frame = Vec::new();
        for msg in every_message() {
            assert!(read_frame(&mut reader, MAX_FRAME, &mut frame).unwrap());
            assert_eq!(decode_to_writer(&frame).unwrap(), msg);
        }
        assert!(!read_frame(&mut reader, MAX_FRAME, &mut frame).unwrap(), "clean end");
        let report = SyncReport {
            events: 3,
            spooled: Some("locked".into()),
            lost: None,
            cpu_ns: 7,
            fallback: Some("/tmp/prov-1000/spool".into()),
        };
        encode_frame(&report, MAX_REPLY, &mut buf).unwrap();
        assert_eq!(decode_reply(&buf).unwrap(), report);
    }

    #[test]
    fn hostile_frames_are_errors_not_panics_or_huge_allocations() {
        let mut buf = Vec::new();
        encode_frame(&ToWriter::Events(vec![event(1), event(2)]), MAX_FRAME, &mut buf).unwrap();
        // Every truncation and every single-byte change of a valid frame.
        for cut in 0..buf.len() {
            assert!(decode_to_writer(&buf[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..buf.len() {
            for b in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut bad = buf.clone();
                bad[i] = b;
                let _ = decode_to_writer(&bad);
            }
        }
        let mut trailing = buf.clone();
        trailing.push(0);
        assert!(decode_to_writer(&trailing).is_err());
        // A length past the limit is refused before anything is read.
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(matches!(decode_to_writer(&huge), Err(FrameError::TooLarge { .. })));
        let mut stream = &huge[..];
        assert!(matches!(read_frame(&mut stream, MAX_FRAME, &mut buf), Err(FrameError::TooLarge { .. })));
        // A vector claiming 2^60 events in a small frame: an error, at once.
        let mut claim = vec![2u8]; // variant Events
        claim.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        let mut frame = (claim.len() as u32).to_le_bytes().to_vec();
        frame.extend(claim);
        assert!(decode_to_writer(&frame).is_err());
        // A stream that ends inside a frame.
        encode_frame(&ToWriter::Sync, MAX_FRAME, &mut buf).unwrap();
        let mut cut = &buf[..buf.len() - 1];
        let mut frame = Vec::new();
        assert!(matches!(read_frame(&mut cut, MAX_FRAME, &mut frame), Err(FrameError::Truncated)));
        // A reply frame larger than replies may be.
        let big = SyncReport { lost: Some("x".repeat(MAX_REPLY)), ..Default::default() };
        assert!(matches!(encode_frame(&big, MAX_REPLY, &mut buf), Err(FrameError::TooLarge { .. })));
    }

    /// The cost the pipe adds per file event: one encode and one decode.
    /// Run with `--release -- --nocapture --ignored` for the figure.
    #[test]
    #[ignore]
    fn cost_per_event() {
        let events: Vec<FileEvent> = (0..4096).map(event).collect();
        let msg = ToWriter::Events(events);
        let mut buf = Vec::new();
        let rounds = 200;
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            encode_frame(&msg, MAX_FRAME, &mut buf).unwrap();
        }
        let encoded = start.elapsed();
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(decode_to_writer(&buf).unwrap());
        }
        let decoded = start.elapsed();
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / (rounds * 4096) as f64;
        let json = serde_json::to_vec(&msg).unwrap().len();
        println!(
            "per event: encode {:.3} µs, decode {:.3} µs, {} bytes (JSON: {} bytes)",
            per(encoded),
            per(decoded),
            buf.len() / 4096,
            json / 4096
        );
    }
}
