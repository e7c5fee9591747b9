//! The shell shim's messages against these definitions: the shim writes
//! its messages and parses the answers by hand, in C. This builds
//! preload/tests/messages.c, which prints every message the shim's code
//! (preload/shim_messages.h) writes and what its parsers
//! (preload/shim_parse.h) make of the messages written here, and reads
//! both with the Rust types: a field renamed on either side fails here.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use prov_model::CommandEnd;

use crate::control::{BeginAnswer, EndSent, StoreReport, ToCaller, ToCollector};
use crate::shell_preparer::{self, FromShim, Request};
use crate::{long_text, VERSION};

/// The harness, built once per test process.
fn harness() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let preload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../preload");
            let binary = std::env::temp_dir().join(format!("prov-shim-messages-{}", std::process::id()));
            let build = Command::new("cc")
                .args(["-O1", "-Wall", "-Wextra", "-Werror", "-Wmissing-prototypes", "-o"])
                .arg(&binary)
                .arg(preload.join("tests/messages.c"))
                .output()
                .expect("cc runs");
            assert!(build.status.success(), "messages.c does not build:\n{}", String::from_utf8_lossy(&build.stderr));
            binary
        })
        .clone()
}

/// The harness's lines for `input`, each split at its first tab.
fn run(mode: &str, input: &str) -> Vec<(String, String)> {
    let mut child = Command::new(harness())
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the harness runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "messages {mode} failed");
    // The shim's messages are bytes; these are ASCII (texts travel as hex).
    let text = String::from_utf8(out.stdout).expect("ASCII messages");
    text.lines()
        .map(|l| {
            let (kind, msg) = l.split_once('\t').expect("KIND<TAB>MESSAGE");
            (kind.to_string(), msg.to_string())
        })
        .collect()
}

fn written() -> std::collections::HashMap<String, String> {
    run("write", "").into_iter().collect()
}

#[test]
fn every_begin_the_shim_writes_is_a_begin() {
    let m = written();
    let text = b"echo \"a\\b\"\n\t\xff\xfe ok".to_vec();
    let Ok(ToCollector::Begin(held)) = serde_json::from_str(&m["begin-held"]) else { panic!("{}", m["begin-held"]) };
    assert_eq!((held.seq, &held.text, held.start_ns), (7, &text, 1_700_000_000_123_456_789));
    assert_eq!(held.cwd, b"/home/u/\xe9t\xe9");
    assert!(held.reuse);
    assert_eq!((held.awaits, held.end), (BeginAnswer::Nothing, EndSent::WhenIdle));
    assert_eq!(held.text_in_fd, None);
    assert_eq!(held.env.as_deref(), Some(&b"SLURM_JOB_ID=4242\0LANG=C.UTF-8\0"[..]));

    // To the preparer (a command without an observation): no hand-back.
    let Ok(FromShim::Begin(plain)) = serde_json::from_str(&m["begin"]) else { panic!("{}", m["begin"]) };
    assert_eq!((plain.seq, plain.text.len(), plain.cwd.as_slice()), (u64::MAX, 0, &b"/"[..]));
    assert!(!plain.reuse);
    assert_eq!((plain.awaits, plain.end), (BeginAnswer::Nothing, EndSent::AtExit));

    let Ok(ToCollector::Begin(in_fd)) = serde_json::from_str(&m["begin-in-fd"]) else { panic!("{}", m["begin-in-fd"]) };
    assert_eq!(in_fd.text_in_fd, Some(long_text::INLINE_MAX as u64 + 1));
    assert!(in_fd.text.is_empty());
    // The shim puts a text in a memfd where prov's own callers do.
    assert_eq!(m["inline-text-max"], long_text::INLINE_MAX.to_string());
}

#[test]
fn every_end_the_shim_writes_is_an_end() {
    let m = written();
    let Ok(ToCollector::End(end)) = serde_json::from_str(&m["end"]) else { panic!("{}", m["end"]) };
    assert_eq!((end.end_ns, end.exit_status), (1_700_000_000_999_999_999, Some(130)));
    assert_eq!(CommandEnd { end_ns: 0, ..end }, CommandEnd { end_ns: 0, ..CommandEnd::with_status(0, 130) });

    let Ok(FromShim::End { end_ns, exit_status, why }) = serde_json::from_str(&m["end-why"]) else {
        panic!("{}", m["end-why"])
    };
    assert_eq!((end_ns, exit_status, why.as_slice()), (5, 0, &b"helper \"x\" is not setuid\n"[..]));

    let Ok(FromShim::Orphan { end_ns, exit_status }) = serde_json::from_str(&m["orphan"]) else {
        panic!("{}", m["orphan"])
    };
    assert_eq!((end_ns, exit_status), (9, 2));
}

#[test]
fn the_shims_requests_and_version_are_prov_protocols() {
    let m = written();
    assert_eq!(Request::read(m["prepare"].as_bytes()), Some(Request::Prepare));
    assert_eq!(Request::read(m["again"].as_bytes()), Some(Request::Again));
    assert_eq!(m["version"], VERSION.to_string());
    assert_eq!(shell_preparer::refusal_of_shim(m["version"].parse().ok()), None);
}

#[test]
fn the_shim_reads_prepare_answers_as_written() {
    let lines = [
        shell_preparer::ready(4242, true, 12, 300, "PATH,SLURM_*"),
        shell_preparer::ready(7, false, 0, 0, ""),
        shell_preparer::refused("helper /usr/libexec/prov/prov-helper is not setuid root"),
    ];
    let input: String = lines.iter().map(|l| format!("prepared\t{}\n", String::from_utf8_lossy(l))).collect();
    let read: Vec<String> = run("read", &input).into_iter().map(|(_, parsed)| parsed).collect();
    assert_eq!(read, ["R 4242 1 12 300", "R 7 0 0 0", "E 0 0 -1 -1"]);
}

#[test]
fn the_shim_reads_stored_answers_as_written() {
    let stored = |report: StoreReport| serde_json::to_string(&ToCaller::Stored(report)).unwrap();
    let lines = [
        stored(StoreReport { reusable: true, ..Default::default() }),
        stored(StoreReport { lost: Some("disk \"full\"".into()), ..Default::default() }),
        stored(StoreReport {
            spooled: Some("database locked".into()),
            fallback: Some("/tmp/prov-spool-1000".into()),
            ..Default::default()
        }),
        stored(StoreReport { spooled: Some("database locked".into()), ..Default::default() }),
    ];
    let input: String = lines.iter().map(|l| format!("stored\t{l}\n")).collect();
    let read: Vec<String> = run("read", &input).into_iter().map(|(_, parsed)| parsed).collect();
    assert_eq!(
        read,
        [
            "1\t0\t\t0\t",
            // JSON escapes are left as they are.
            "0\t1\tdisk \\\"full\\\"\t1\trecords are lost: disk \\\"full\\\"",
            "0\t0\t\t1\trecords are kept in /tmp/prov-spool-1000 until the journal can take them: database locked",
            "0\t0\t\t0\t",
        ]
    );
}
