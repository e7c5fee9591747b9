//! The fuzz smoke of the test command (tests/run): every file of
//! corpus/TARGET/, regressions/TARGET/ and (after a local fuzz run)
//! artifacts/TARGET/ goes through the target's body once. Quick, needs no
//! libFuzzer, and fails when a target panics on any of them.

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["corpus", "regressions", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else { continue };
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

fn replay(target: &str) {
    let (_, body) = prov_fuzz::TARGETS.iter().find(|(name, _)| *name == target).expect("a known target");
    let files = inputs(target);
    assert!(!files.is_empty(), "{target}: no corpus (fuzz/corpus/{target}/)");
    let failed: Vec<String> = files
        .iter()
        .filter(|file| {
            let data = std::fs::read(file).unwrap();
            std::panic::catch_unwind(|| body(&data)).is_err()
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target} fails on {} of {} inputs:\n{}", failed.len(), files.len(), failed.join("\n"));
}

#[test]
fn every_target_is_replayed_here() {
    let mut names: Vec<&str> = prov_fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    names.sort();
    assert_eq!(
        names,
        ["config", "filter_values", "protocol", "spool", "spool_ingest", "writer_pipe"],
        "add a #[test] below for a new target"
    );
}

#[test]
fn spool() {
    replay("spool");
}

#[test]
fn spool_ingest() {
    replay("spool_ingest");
}

#[test]
fn protocol() {
    replay("protocol");
}

#[test]
fn config() {
    replay("config");
}

#[test]
fn filter_values() {
    replay("filter_values");
}

#[test]
fn writer_pipe() {
    replay("writer_pipe");
}

/// Writes the seeds of corpus/writer_pipe/: one frame of each message the
/// collector sends and a reply, as `writer_pipe::encode_frame` makes them
/// (`cargo test --no-default-features -- --ignored writer_pipe_seeds`).
#[test]
#[ignore]
fn writer_pipe_seeds() {
    use prov_model::*;
    use prov_protocol::writer_pipe::{encode_frame, SyncReport, ToWriter, MAX_FRAME};
    let begin = CommandBegin {
        uuid: "0192c0de-0000-7000-8000-000000000001".into(),
        session: "0192c0de-0000-7000-8000-000000000002".into(),
        seq: 3,
        text: b"sort data.csv > \xffsorted.csv".to_vec(),
        cwd: b"/home/u/proj".to_vec(),
        host: "node17".into(),
        user: "u".into(),
        shell: "bash".into(),
        start_ns: 1_763_900_000_000_000_000,
        env: None,
    };
    let event = |access, path: &[u8], hash| FileEvent {
        access,
        path: path.to_vec(),
        size: 4096,
        mtime_ns: 1_763_900_000_123_456_789,
        hash,
        hash_params: HashParams::default(),
        pid: Some(4242),
    };
    let messages = [
        (
            "setup",
            ToWriter::Setup {
                database: "/home/u/.local/share/prov/prov.db".into(),
                spool_dir: "/home/u/.local/state/prov/spool".into(),
                busy_timeout_ms: 5000,
            },
        ),
        ("begin", ToWriter::Begin(begin)),
        (
            "events",
            ToWriter::Events(vec![
                event(Access::Read, b"/home/u/proj/data.csv", Some(0x1234_5678_9abc_def0)),
                event(Access::Write, b"/home/u/proj/\xffsorted.csv", None),
            ]),
        ),
        (
            "archive",
            ToWriter::Archive(vec![ArchivedRead {
                path: b"/home/u/proj/run.sh".to_vec(),
                mode: 0o755,
                mtime_ns: 1,
                content: b"#!/bin/sh\nsort \"$1\"\n".to_vec(),
            }]),
        ),
        ("completeness", ToWriter::Completeness(Completeness { queue_overflows: 1, denied: 2, ..Default::default() })),
        (
            "end",
            ToWriter::End(CommandEnd {
                text: Some(b"late text".to_vec()),
                ..CommandEnd::with_status(1_763_900_001_000_000_000, 7)
            }),
        ),
        ("log", ToWriter::Log("record 0192c0de goes to the spool: database is locked".into())),
        ("sync", ToWriter::Sync),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/writer_pipe");
    std::fs::create_dir_all(&dir).unwrap();
    let mut frame = Vec::new();
    let mut stream = Vec::new();
    for (name, message) in &messages {
        encode_frame(message, MAX_FRAME, &mut frame).unwrap();
        std::fs::write(dir.join(format!("seed-{name}")), &frame).unwrap();
        stream.extend_from_slice(&frame);
    }
    std::fs::write(dir.join("seed-stream"), &stream).unwrap();
    let reply = SyncReport {
        events: 2,
        spooled: Some("database is locked".into()),
        lost: None,
        cpu_ns: 1_000_000,
        fallback: None,
    };
    encode_frame(&reply, MAX_FRAME, &mut frame).unwrap();
    std::fs::write(dir.join("seed-reply"), &frame).unwrap();
}
