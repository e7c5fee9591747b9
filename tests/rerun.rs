//! `prov rerun` and `prov diff` as a user meets them: pipelines recorded
//! by the real tracer, re-run in the sandbox (a real user and mount
//! namespace with overlays) and checked, the user's directory compared
//! file by file before and after.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use prov_e2e::*;
use serde_json::Value;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file below `dir`: its content and mtime (ns).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            let content = if m.is_file() { std::fs::read(&p).unwrap() } else { Vec::new() };
            out.insert(p, (content, m.mtime() * 1_000_000_000 + m.mtime_nsec()));
        }
    }
    out
}

/// The id of the newest record.
fn last_id(case: &Case) -> String {
    case.last_command_ended()["id"].as_i64().unwrap().to_string()
}

/// A scratch directory for the re-runs, outside the case's home.
fn scratch(case: &Case) -> String {
    let dir = case.home.parent().unwrap().join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    case.chown_tree(&dir);
    dir.to_string_lossy().into_owned()
}

fn rerun(case: &Case, args: &[&str]) -> Output {
    let scratch = scratch(case);
    let mut all = vec!["rerun", "--scratch", &scratch];
    all.extend_from_slice(args);
    case.prov(&all)
}

fn rerun_json(case: &Case, args: &[&str]) -> (Output, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = rerun(case, &all);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    (out, v)
}

/// A mount below a directory the re-run must cover (here HOME, a tmpfs in
/// it): the kernel lets no unprivileged overlay cover it, so the re-run
/// says which mount is in the way, runs nothing and leaves the user's
/// files as they were.
#[test]
fn a_mount_below_a_covered_directory_is_named() {
    let case = Case::new("rerun-mount-below");
    case.write("in.txt", b"pear\napple\n");
    case.run_sh("sort in.txt > sorted.txt");
    let id = last_id(&case);
    let _mounted = mount_tmpfs(&case.home.join("mnt"));
    let before = snapshot(&case.work);
    let out = rerun(&case, &[&id]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "cannot lay the scratch layer over {}: {} is mounted below it",
        case.home.display(),
        case.home.join("mnt").display()
    );
    assert!(err.contains(&expected), "{}", describe(&out));
    assert_eq!(snapshot(&case.work), before, "the re-run wrote in the user's directory");
}

#[test]
fn a_deterministic_pipeline_reproduces_without_touching_the_users_files() {
    let case = Case::new("rerun-deterministic");
    case.write("in.txt", b"pear\napple\nfig\n");
    case.run_sh("sort in.txt > sorted.txt && wc -l < sorted.txt > count.txt");
    let id = last_id(&case);
    let before = snapshot(&case.work);

    let out = rerun(&case, &[&id, "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out).trim(), "reproduced: 2 of 2 outputs identical", "{}", describe(&out));
    assert_eq!(snapshot(&case.work), before, "the re-run wrote in the user's directory");

    let (out, v) = rerun_json(&case, &[&id, "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v["reproduced"], true);
    assert_eq!((v["identical"].as_u64(), v["total"].as_u64()), (Some(2), Some(2)));
    let states: BTreeSet<&str> =
        v["outputs"].as_array().unwrap().iter().map(|o| o["state"].as_str().unwrap()).collect();
    assert_eq!(states, BTreeSet::from(["identical"]));
    // The re-run's own files, in the scratch layer: sorted as recorded.
    let layer = Path::new(v["scratch"].as_str().unwrap()).join("upper");
    let made: Vec<PathBuf> = snapshot(&layer).into_keys().filter(|p| p.ends_with("work/sorted.txt")).collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(std::fs::read(&made[0]).unwrap(), b"apple\nfig\npear\n");
    assert_eq!(snapshot(&case.work), before);

    // Traced like any command: the re-run has its record, which says that
    // what ran inside the sandbox's namespace was not seen by the tracer.
    let history = case.query(["history", "-n", "3"]);
    let sandboxed: Vec<&Value> = history.iter().filter(|c| c["text"].as_str().unwrap().contains("__sandbox")).collect();
    assert!(!sandboxed.is_empty(), "{history:?}");
    assert!(
        sandboxed[0]["incomplete_reason"].as_str().unwrap_or("").contains("made a mount namespace of its own"),
        "{:?}",
        sandboxed[0]
    );
}

#[test]
fn a_timestamp_is_reported_as_differing_and_only_that_file() {
    let case = Case::new("rerun-date");
    case.write("in.txt", b"b\na\n");
    case.run_sh("sort in.txt > sorted.txt; date +%N > stamp.txt");
    let id = last_id(&case);
    let before = snapshot(&case.work);

    let out = rerun(&case, &[&id, "--check"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["stamp.txt differs (content)", "not reproduced: 1 of 2 outputs identical"], "{text}");
    assert_eq!(snapshot(&case.work), before);

    let (_, v) = rerun_json(&case, &[&id, "--check"]);
    let differing: Vec<&str> = v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["state"] != "identical")
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert_eq!(differing.len(), 1);
    assert!(differing[0].ends_with("/stamp.txt"), "{differing:?}");
}

#[test]
fn an_input_edited_since_is_named_first() {
    let case = Case::new("rerun-edited");
    case.write("in.txt", b"pear\napple\n");
    case.run_sh("sort in.txt > sorted.txt");
    let id = last_id(&case);
    case.write("in.txt", b"pear\napple\nfig\n");

    let out = rerun(&case, &[&id, "--check"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "input in.txt changed since the recording (size 11 → 15, content)",
            "sorted.txt differs (size 11 → 15, content)",
            "not reproduced: 0 of 1 outputs identical"
        ],
        "{text}"
    );
}

#[test]
fn lineage_rebuilds_a_deleted_output_in_the_sandbox_only() {
    let case = Case::new("rerun-lineage");
    case.write("in.txt", b"pear\napple\nfig\n");
    case.run_sh("sort in.txt > sorted.txt");
    case.run_sh("echo unrelated > other.txt");
    case.run_sh("head -n 2 sorted.txt > top.txt");
    std::fs::remove_file(case.work.join("top.txt")).unwrap();
    let before = snapshot(&case.work);

    let (out, v) = rerun_json(&case, &["--lineage", "top.txt", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let texts: Vec<&str> = v["commands"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["sh -c 'sort in.txt > sorted.txt'", "sh -c 'head -n 2 sorted.txt > top.txt'"]);
    assert_eq!((v["identical"].as_u64(), v["total"].as_u64()), (Some(2), Some(2)), "{v}");
    assert_eq!(snapshot(&case.work), before, "the user's directory changed");
    assert!(!case.work.join("top.txt").exists());
    let layer = Path::new(v["scratch"].as_str().unwrap()).join("upper");
    let top: Vec<PathBuf> = snapshot(&layer).into_keys().filter(|p| p.ends_with("work/top.txt")).collect();
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!(std::fs::read(&top[0]).unwrap(), b"apple\nfig\n");

    let out = rerun(&case, &["--lineage", "top.txt", "--check"]);
    assert_eq!(stdout(&out).trim(), "reproduced: 2 of 2 outputs identical", "{}", describe(&out));
}

#[test]
fn in_place_rewrites_the_outputs() {
    let case = Case::new("rerun-in-place");
    case.write("in.txt", b"b\na\n");
    case.run_sh("sort in.txt > sorted.txt");
    let id = last_id(&case);
    std::fs::write(case.work.join("sorted.txt"), b"spoiled\n").unwrap();
    let out = rerun(&case, &[&id, "--in-place", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(std::fs::read(case.work.join("sorted.txt")).unwrap(), b"a\nb\n");
}

const PIPELINE: &str = "sort a.txt > a.sorted\nsort b.txt > b.sorted\ncat a.sorted b.sorted > all.txt\n";

/// The (name, change) pairs of a diff's inputs or outputs.
fn changed(v: &Value, kind: &str) -> BTreeSet<String> {
    v[kind].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn diff_of_two_runs_names_the_edited_input_and_what_was_made_from_it() {
    let case = Case::new("diff-runs");
    case.write("pipeline.sh", PIPELINE.as_bytes());
    case.write("a.txt", b"2\n1\n");
    case.write("b.txt", b"y\nx\n");
    case.run_sh("sh pipeline.sh");
    let first = last_id(&case);
    case.write("a.txt", b"3\n2\n1\n");
    case.run_sh("sh pipeline.sh");
    let second = last_id(&case);

    let out = case.prov(["diff", &first, &second, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(changed(&v, "inputs"), names(&["a.txt"]), "{v}");
    assert_eq!(changed(&v, "outputs"), names(&["a.sorted", "all.txt"]), "{v}");
    assert_eq!(v["text_differs"], false);

    let out = case.prov(["diff", &first, &second]);
    let text = stdout(&out);
    assert!(text.lines().any(|l| l.contains("input") && l.contains("a.txt") && l.contains("size 4 → 6")), "{text}");
    assert!(!text.contains("b.sorted") && !text.contains("b.txt"), "{text}");

    // The same run twice: nothing differs.
    let out = case.prov(["diff", &second, &second]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[test]
fn diff_of_two_files_compares_their_lineages() {
    let case = Case::new("diff-lineages");
    for (dir, a) in [("r1", &b"2\n1\n"[..]), ("r2", &b"3\n2\n1\n"[..])] {
        std::fs::create_dir_all(case.work.join(dir)).unwrap();
        case.write(format!("{dir}/a.txt"), a);
        case.write(format!("{dir}/b.txt"), b"y\nx\n");
        case.chown_tree(&case.work);
        for step in PIPELINE.lines() {
            let out = case
                .command(case.inst.prov())
                .args(["run", "--", "sh", "-c", step])
                .current_dir(case.work.join(dir))
                .output()
                .unwrap();
            assert!(out.status.success(), "{step}: {}", describe(&out));
        }
    }
    let out = case.prov(["diff", "r1/all.txt", "r2/all.txt", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Paths compare relative to each run's directory.
    assert_eq!(changed(&v, "inputs"), names(&["a.txt"]), "{v}");
    assert_eq!(changed(&v, "outputs"), names(&["a.sorted", "all.txt"]), "{v}");
    assert_eq!(v["text_differs"], false, "{v}");
}

#[test]
fn bad_input_is_one_line() {
    let case = Case::new("rerun-bad");
    case.run_sh("echo x > made.txt");
    case.write("unrecorded.txt", b"nobody recorded this\n");
    for (args, says) in [
        (&["rerun", "999999"][..], "prov: no recorded command has the id 999999"),
        (&["rerun", "--lineage", "unrecorded.txt"][..], "prov: no recorded command wrote "),
        (&["diff", "999999", "made.txt"][..], "prov: no recorded command has the id 999999"),
        (&["diff", "made.txt", "unrecorded.txt"][..], "prov: no recorded command wrote "),
    ] {
        let out = case.prov(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
    }
    let out = case.prov(["rerun"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

/// `prov run -- sh -c SCRIPT` with extra variables set.
fn run_with_env(case: &Case, script: &str, env: &[(&str, &str)]) {
    let mut cmd = case.command(case.inst.prov());
    cmd.args(["run", "--", "sh", "-c", script]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{script}: {}", describe(&out));
}

#[test]
fn a_rerun_gets_the_recorded_variables_over_the_current_ones() {
    let case = Case::new("rerun-env");
    run_with_env(&case, "echo \"$OMP_NUM_THREADS\" > threads.txt", &[("OMP_NUM_THREADS", "3")]);
    let id = last_id(&case);
    // Now the user's environment says 5; the recorded 3 applies.
    let mut cmd = case.command(case.inst.prov());
    cmd.args(["rerun", "--scratch", &scratch(&case), &id, "--check"]).env("OMP_NUM_THREADS", "5");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out).trim(), "reproduced: 1 of 1 outputs identical");
}

#[test]
fn diff_names_changed_variables_and_executables() {
    let case = Case::new("diff-env");
    case.write("tool.sh", b"#!/bin/sh\necho one > out.txt\n");
    std::fs::set_permissions(case.work.join("tool.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    run_with_env(&case, "./tool.sh", &[("SLURM_JOB_ID", "4241")]);
    let first = last_id(&case);
    case.write("tool.sh", b"#!/bin/sh\necho two, longer > out.txt\n");
    run_with_env(&case, "./tool.sh", &[("SLURM_JOB_ID", "4242")]);
    let second = last_id(&case);

    let out = case.prov(["diff", &first, &second, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let env: Vec<(&str, &str)> = v["environment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["change"].as_str().unwrap()))
        .collect();
    assert_eq!(env, [("SLURM_JOB_ID", "4241 → 4242")], "{v}");
    let programs: Vec<(&str, &str)> = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["change"].as_str().unwrap()))
        .collect();
    assert!(
        programs
            .iter()
            .any(|(exe, change)| exe.ends_with("/tool.sh") && change.starts_with("executable changed (size")),
        "{v}"
    );
    assert_eq!(changed(&v, "outputs"), names(&["out.txt"]), "{v}");
    let text = stdout(&case.prov(["diff", &first, &second]));
    assert!(text.lines().any(|l| l.contains("env") && l.contains("SLURM_JOB_ID | 4241 → 4242")), "{text}");
}

#[test]
fn a_line_typed_in_bash_is_run_again_by_bash() {
    let case = Case::new("rerun-bash");
    case.write("in.txt", b"b\na\n");
    let mut shell = prov_e2e::pty::Shell::start(&case, "bash");
    // bash syntax sh would not read: a here-string and [[ ]].
    shell.run("[[ -e in.txt ]] && sort <<< \"$(cat in.txt)\" > sorted.txt");
    shell.exit();
    let found = case.query(["history", "--text", "sort <<<"]);
    let recorded = &found[0];
    assert_eq!(recorded["shell"], "bash", "{recorded}");
    let id = recorded["id"].as_i64().unwrap().to_string();
    let out = rerun(&case, &[&id, "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out).trim(), "reproduced: 1 of 1 outputs identical");
}
