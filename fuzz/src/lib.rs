//! The bodies of the fuzz targets, as plain functions: `cargo fuzz` runs
//! them under libFuzzer (fuzz_targets/), and `cargo test` replays every
//! corpus and regression file through them without it (tests/replay.rs).
//! Each one panics when the parser it drives breaks a promise: it must never
//! panic, its errors are one line, and what it reads and the matching writer
//! writes agree.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::{Local, SecondsFormat, TimeZone, Utc};
use prov_model::Config;
use prov_protocol::control::{ToCaller, ToCollector};
use prov_protocol::writer_pipe::{self, SyncReport, ToWriter};
use prov_store::spool::{self, SpoolEntry};
use prov_store::{Store, StoreError};

/// A target's body: panics when the parser breaks a promise on `data`.
pub type Body = fn(data: &[u8]);

/// Every target: its name (the directory of its corpus) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("spool", spool),
    ("spool_ingest", spool_ingest),
    ("protocol", protocol),
    ("config", config),
    ("filter_values", filter_values),
    ("writer_pipe", writer_pipe),
];

/// A spool file (`prov_store::spool::parse`): anyone with the user's uid
/// can write one, and the collector ingests it. Every entry read is written
/// back as the writer would and must read back equal, alone, as a whole
/// file, and with a torn last line after it.
pub fn spool(data: &[u8]) {
    let entries = match spool::parse(data) {
        Ok(entries) => entries,
        Err(why) => return one_line_error(&why, Some("line ")),
    };
    let mut file = Vec::new();
    for entry in &entries {
        let line = spool::encode_line(entry).expect("a parsed entry can be written");
        assert_eq!(line.iter().position(|&b| b == b'\n'), Some(line.len() - 1), "an entry is one line");
        assert_eq!(spool::parse(&line).expect("a written entry reads back"), std::slice::from_ref(entry));
        file.extend_from_slice(&line);
    }
    assert_eq!(spool::parse(&file).expect("a written file reads back"), entries);
    file.extend_from_slice(b"{\"End\":{\"end_ns\":1,");
    let read: Vec<SpoolEntry> = spool::parse(&file).expect("a torn last line is ignored");
    assert_eq!(read, entries, "a torn last line is ignored");
}

/// A spool file ingested into a real database (`Store::ingest_spool`), as
/// the collector and every `prov` that can write the database do. A file is
/// taken in or set aside as bad; nothing in it may stop the ingestion (a
/// database error leaves the file in place, before every later one).
pub fn spool_ingest(data: &[u8]) {
    thread_local! {
        static STORE: RefCell<Option<ScratchStore>> = const { RefCell::new(None) };
    }
    STORE.with_borrow_mut(|slot| {
        // A fresh database now and then: one that only grows slows the run.
        if slot.as_ref().is_none_or(|s| s.inputs >= 500) {
            *slot = None;
            *slot = Some(ScratchStore::new());
        }
        let ScratchStore { dir, store, inputs } = slot.as_mut().unwrap();
        *inputs += 1;
        let spool_dir = dir.join("spool");
        // The uuid of the seeds' record, so files without a Begin find it.
        std::fs::write(spool_dir.join("01a209f6-7a01-72ce-9371-188e2089d487.jsonl"), data).unwrap();
        match store.ingest_spool(&spool_dir) {
            Ok(_) => {}
            Err(StoreError::SpoolBad { bad, .. }) => {
                for (path, why) in bad {
                    one_line_error(&why, None);
                    std::fs::remove_file(path).unwrap();
                }
            }
            Err(e) => panic!("a spool file stops the ingestion: {e}"),
        }
        let left: Vec<_> = std::fs::read_dir(&spool_dir).unwrap().collect();
        assert!(left.is_empty(), "every spool file is taken in or set aside: {left:?}");
    })
}

/// A database and spool directory of its own, removed when dropped.
struct ScratchStore {
    dir: PathBuf,
    store: Store,
    inputs: u32,
}

impl ScratchStore {
    fn new() -> ScratchStore {
        static STORES: AtomicU32 = AtomicU32::new(0);
        let n = STORES.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("prov-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("spool")).unwrap();
        let store = Store::open(&dir.join("prov.db"), Duration::from_secs(1)).unwrap();
        ScratchStore { dir, store, inputs: 0 }
    }
}

impl Drop for ScratchStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A control datagram (`prov_protocol::control`), decoded as the collector
/// (`ToCollector`) and `prov` (`ToCaller`) decode them: any process of the
/// user can connect to these sockets' peers' ends it inherited. A message
/// decoded and encoded again must decode to the same message.
pub fn protocol(data: &[u8]) {
    round_trip_json::<ToCollector>(data);
    round_trip_json::<ToCaller>(data);
}

fn round_trip_json<T: serde::Serialize + serde::de::DeserializeOwned>(data: &[u8]) {
    let Ok(message) = serde_json::from_slice::<T>(data) else { return };
    let encoded = serde_json::to_vec(&message).expect("a decoded message can be encoded");
    let again: T = serde_json::from_slice(&encoded).expect("an encoded message decodes");
    assert_eq!(serde_json::to_vec(&again).unwrap(), encoded, "decode(encode(m)) == m");
}

/// The configuration file (`Config::parse`): its errors are one line,
/// `config.toml:LINE: message`, with a line the file has; a configuration
/// that parses, written back as TOML, parses to the same configuration.
pub fn config(data: &[u8]) {
    // Config::load reads the file as UTF-8 text and reports anything else.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("config.toml");
    match Config::parse(text, path) {
        Ok(parsed) => {
            let written = toml::to_string(&parsed).expect("a parsed configuration can be written");
            let again = Config::parse(&written, path).unwrap_or_else(|e| panic!("{e}\nin:\n{written}"));
            assert_eq!(again, parsed, "parse(write(c)) == c");
        }
        Err(e) => {
            let message = e.to_string();
            one_line_error(&message, Some("config.toml:"));
            let line: usize = message["config.toml:".len()..]
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no line number in {message:?}"));
            let lines = text.matches('\n').count() + 1;
            assert!((1..=lines).contains(&line), "line {line} of a {lines}-line file: {message:?}");
        }
    }
}

/// The values of `prov query`'s filters (`prov_cli::values`): a user's
/// command line. Every parser gets the input (as text, as clap hands it
/// over); a value parsed and printed the canonical way parses the same.
pub fn filter_values(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    use prov_cli::values::*;
    // A fixed "now" keeps a failure reproducible; parse_time_cmp uses the
    // real clock (ages from now) through the same code.
    let now = Local.with_ymd_and_hms(2026, 11, 21, 15, 30, 0).unwrap();
    match parse_size(s) {
        Ok(n) => assert_eq!(parse_size(&n.to_string()), Ok(n), "{s:?}"),
        Err(e) => one_line_error(&e, None),
    }
    match parse_hash(s) {
        Ok(h) => assert_eq!(parse_hash(&format!("{h:016x}")), Ok(h), "{s:?}"),
        Err(e) => one_line_error(&e, None),
    }
    match when_at(s, now) {
        Ok(ns) => {
            let utc = Utc.timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::Nanos, true);
            assert_eq!(when_at(&utc, now), Ok(ns), "{s:?} as {utc}");
        }
        Err(e) => one_line_error(&e, None),
    }
    for result in [parse_size_cmp(s).map(drop), parse_time_cmp(s).map(drop), parse_int_cmp(s).map(drop)] {
        if let Err(e) = result {
            one_line_error(&e, None);
        }
    }
    if let Err(e) = non_empty(s) {
        one_line_error(&e, None);
    }
}

fn one_line_error(message: &str, prefix: Option<&str>) {
    assert!(!message.trim().is_empty(), "an error says something");
    assert!(!message.contains('\n'), "an error is one line: {message:?}");
    assert!(!message.chars().any(char::is_control), "an error is plain text: {message:?}");
    if let Some(prefix) = prefix {
        assert!(message.starts_with(prefix), "{message:?} starts with {prefix:?}");
    }
}

/// The pipe between the collector and prov-writer
/// (`prov_protocol::writer_pipe`): the writer decodes the collector's frames,
/// and the collector decodes the writer's replies, which the user can forge
/// (prov-writer is the user's to ptrace). A frame that decodes, encoded
/// again, decodes to the same message; errors are one line; a stream of
/// frames read with `read_frame` gives what `decode_frame` gives.
pub fn writer_pipe(data: &[u8]) {
    frame_round_trip::<ToWriter>(data, writer_pipe::MAX_FRAME);
    frame_round_trip::<SyncReport>(data, writer_pipe::MAX_REPLY);
    let mut stream = data;
    let mut buf = Vec::new();
    for _ in 0..64 {
        match writer_pipe::read_frame(&mut stream, writer_pipe::MAX_REPLY, &mut buf) {
            Ok(true) => {
                assert!(buf.len() <= writer_pipe::MAX_REPLY + 4, "a frame within its limit");
                if let Err(e) = writer_pipe::decode_reply(&buf) {
                    one_line_error(&e.to_string(), None);
                }
            }
            Ok(false) => break,
            Err(e) => {
                one_line_error(&e.to_string(), None);
                break;
            }
        }
    }
}

fn frame_round_trip<T>(data: &[u8], max: usize)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let message: T = match writer_pipe::decode_frame(data, max) {
        Ok(message) => message,
        Err(e) => return one_line_error(&e.to_string(), None),
    };
    let mut frame = Vec::new();
    writer_pipe::encode_frame(&message, max, &mut frame).expect("a decoded message can be encoded");
    let again: T = writer_pipe::decode_frame(&frame, max).expect("an encoded frame decodes");
    assert_eq!(again, message, "decode(encode(m)) == m");
}
