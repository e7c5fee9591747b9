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
        ["config", "filter_values", "protocol", "spool", "spool_ingest"],
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
