//! `prov query` filters, `--stat`, sessions, `prov delete` and `prov stats`
//! on records made by the real tracer, checked as a user would.

use std::process::Output;

use prov_e2e::*;
use serde_json::Value;

/// `prov run` as the user, in `dir` below the work directory, in session `session`.
fn run_in(case: &Case, dir: &str, session: &str, script: &str) -> Output {
    let cwd = case.work.join(dir);
    std::fs::create_dir_all(&cwd).unwrap();
    case.chown_tree(&cwd);
    let out = case
        .command(case.inst.prov())
        .args(["run", "--", "sh", "-c", script])
        .env("PROV_SESSION", session)
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert_traced(&out);
    out
}

fn texts(found: &[Value]) -> Vec<String> {
    found
        .iter()
        .map(|c| c["text"].as_str().unwrap().trim_start_matches("sh -c ").trim_matches('\'').to_string())
        .collect()
}

/// A small project: a.csv made, sorted, copied elsewhere, a failing step,
/// a big file, in two sessions and two directories.
fn project(case: &Case) -> Vec<Value> {
    run_in(case, "p", "sess-one-1111", "printf \"b,2\\na,1\\n\" > a.csv");
    run_in(case, "p", "sess-one-1111", "sort a.csv > sorted.csv");
    run_in(case, "p/sub", "sess-two-2222", "cat ../sorted.csv > copy.txt");
    let failed = run_in(case, "q", "sess-two-2222", "head -c 20000 /dev/zero > big.bin; exit 3");
    assert_eq!(failed.status.code(), Some(3));
    run_in(case, "q", "sess-one-1111", "cat big.bin > /dev/null");
    let all = case.query(["history", "-n", "100"]);
    assert_eq!(all.len(), 5, "{all:#?}");
    all
}

fn q(case: &Case, args: &[&str]) -> Vec<String> {
    let mut full = vec!["history", "-n", "100"];
    full.extend_from_slice(args);
    texts(&case.query(full))
}

#[test]
fn every_filter_alone_and_combined() {
    let case = Case::new("query-filters");
    let all = project(&case);
    assert_eq!(
        texts(&all),
        [
            "cat big.bin > /dev/null",
            "head -c 20000 /dev/zero > big.bin; exit 3",
            "cat ../sorted.csv > copy.txt",
            "sort a.csv > sorted.csv",
            "printf \"b,2\\na,1\\n\" > a.csv",
        ]
    );
    let p = case.work.join("p");
    let p = p.to_str().unwrap();
    // Command text.
    assert_eq!(q(&case, &["--text", "sort a"]), ["sort a.csv > sorted.csv"]);
    assert_eq!(q(&case, &["--text", "cat", "--text", "big"]), ["cat big.bin > /dev/null"]);
    assert_eq!(q(&case, &["--text-glob", "*head -c*"]), ["head -c 20000 /dev/zero > big.bin; exit 3"]);
    // Directory: exactly, or at and below.
    assert_eq!(q(&case, &["--cwd", p]).len(), 2);
    assert_eq!(q(&case, &["--below", p]).len(), 3);
    // Relative directories are taken from where prov runs (the work dir).
    assert_eq!(q(&case, &["--below", "p/sub"]), ["cat ../sorted.csv > copy.txt"]);
    // Time: between the second and the fourth command's start.
    let start = |i: usize| all[4 - i]["start"].as_str().unwrap().to_string();
    assert_eq!(q(&case, &["--since", &start(1), "--until", &start(3)]).len(), 2);
    assert_eq!(q(&case, &["--since", "1h"]).len(), 5);
    assert!(q(&case, &["--until", "1h"]).is_empty());
    // Session (prefix), host, user.
    assert_eq!(q(&case, &["--session", "sess-two"]).len(), 2);
    let host = all[0]["host"].as_str().unwrap();
    assert_eq!(q(&case, &["--host", host]).len(), 5);
    assert!(q(&case, &["--host", "no-such-host"]).is_empty());
    assert_eq!(q(&case, &["--user", TEST_USER]).len(), 5);
    // Exit status.
    assert_eq!(q(&case, &["--failed"]), ["head -c 20000 /dev/zero > big.bin; exit 3"]);
    assert_eq!(q(&case, &["--exit", "3"]).len(), 1);
    assert_eq!(q(&case, &["--exit", "0"]).len(), 4);
    // Files: name (exact and glob), directory, access, size, mtime, hash.
    assert_eq!(q(&case, &["--name", "copy.txt"]), ["cat ../sorted.csv > copy.txt"]);
    assert_eq!(q(&case, &["--name", "*.csv", "--access", "write"]).len(), 2);
    assert_eq!(q(&case, &["--name", "*.csv", "--access", "read"]).len(), 2);
    assert_eq!(q(&case, &["--dir", "p/sub"]), ["cat ../sorted.csv > copy.txt"]);
    assert_eq!(q(&case, &["--size", ">10KiB"]).len(), 2, "big.bin written and read");
    assert_eq!(q(&case, &["--size", ">10KiB", "--access", "write"]).len(), 1);
    assert_eq!(q(&case, &["--size", "1..100"]).len(), 3, "the csv and txt files");
    assert_eq!(q(&case, &["--mtime", ">1h"]).len(), 5);
    assert!(q(&case, &["--mtime", "<1h"]).is_empty());
    let sorted = case.query(["wrote", "p/sorted.csv", "--text", "sort a"]).pop().unwrap();
    let hash = sorted["files"].as_array().unwrap().iter().find(|f| f["access"] == "write").unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_string();
    let by_hash = q(&case, &["--hash", &hash]);
    assert_eq!(
        by_hash,
        ["cat ../sorted.csv > copy.txt", "sort a.csv > sorted.csv"],
        "written, then read with that content"
    );
    // Combined: command and file filters.
    assert_eq!(q(&case, &["--session", "sess-one", "--access", "read"]).len(), 2);
    assert_eq!(q(&case, &["--below", p, "--name", "*.txt", "--access", "write"]), ["cat ../sorted.csv > copy.txt"]);
    assert!(q(&case, &["--session", "sess-one", "--failed"]).is_empty());
    // Matched files are listed and marked.
    let found = case.query(["history", "--name", "copy.txt"]);
    let matched: Vec<_> = found[0]["files"].as_array().unwrap().iter().filter(|f| f["matched"] == true).collect();
    assert_eq!(matched.len(), 1);
    assert!(matched[0]["path"].as_str().unwrap().ends_with("/p/sub/copy.txt"));
    // `wrote` names the writer first, the copy as identical content, and
    // takes the filters too.
    let found = case.query(["wrote", "p/sorted.csv"]);
    assert_eq!(texts(&found), ["sort a.csv > sorted.csv", "cat ../sorted.csv > copy.txt"]);
    assert_eq!((found[0]["match"].as_str(), found[1]["match"].as_str()), (Some("path"), Some("content")));
    assert_eq!(texts(&case.query(["wrote", "p/sorted.csv", "--session", "sess-one"])), ["sort a.csv > sorted.csv"]);
    assert_eq!(texts(&case.query(["wrote", "p/sorted.csv", "--below", "p/sub"])), ["cat ../sorted.csv > copy.txt"]);
}

#[test]
fn stat_tells_up_to_date_modified_and_missing() {
    let case = Case::new("query-stat");
    case.write("in.txt", b"input\n");
    case.write("keep.txt", b"keep\n");
    case.run_sh("cat in.txt keep.txt > out.txt; cp out.txt gone.txt");
    // Change the input's content (same size), delete an output.
    std::fs::write(case.work.join("in.txt"), b"INPUT\n").unwrap();
    std::fs::remove_file(case.work.join("gone.txt")).unwrap();
    let found = case.query(["wrote", "out.txt", "--stat"]);
    assert_eq!(found.len(), 1);
    let state = |name: &str| -> Value {
        found[0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["path"].as_str().unwrap().ends_with(&format!("/{name}"))
                    && (name != "out.txt" || f["access"] == "write")
            })
            .unwrap_or_else(|| panic!("{name} in {:#}", found[0]))["now"]
            .clone()
    };
    assert_eq!(state("keep.txt")["state"], "up-to-date");
    assert_eq!(state("out.txt")["state"], "up-to-date");
    assert_eq!(state("in.txt")["state"], "modified");
    let differs = state("in.txt")["differs"].as_array().unwrap().clone();
    assert!(differs.contains(&"hash".into()), "{differs:?}");
    assert!(!differs.contains(&"size".into()), "same size: {differs:?}");
    assert_eq!(state("gone.txt")["state"], "missing");
    // Human output says the same.
    let out = case.prov(["query", "wrote", "out.txt", "--stat"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[missing]") && text.contains("[modified (mtime, hash)]") && text.contains("[up to date]"),
        "{text}"
    );
    // history --stat lists files too.
    let h = case.query(["history", "-n", "1", "--stat"]);
    assert!(h[0]["files"].as_array().unwrap().iter().all(|f| f["now"]["state"].is_string()));
}

#[test]
fn sessions_are_listed_and_shown_in_order() {
    let case = Case::new("query-session");
    for i in 0..3 {
        run_in(&case, ".", "alpha-5555", &format!("echo {i} > a{i}"));
        run_in(&case, ".", "beta-6666", &format!("echo {i} > b{i}"));
    }
    let sessions = case.query(["session"]);
    let names: Vec<&str> = sessions.iter().map(|s| s["session"].as_str().unwrap()).collect();
    assert_eq!(names, ["beta-6666", "alpha-5555"], "most recent first");
    assert!(sessions.iter().all(|s| s["commands"] == 3));
    let alpha = texts(&case.query(["session", "alp"]));
    assert_eq!(alpha, ["echo 0 > a0", "echo 1 > a1", "echo 2 > a2"], "in the order they ran");
    let out = case.prov(["query", "session", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session \"nope\""));
    // Human listing names the sessions by their short form (the last 8
    // characters), which the filters take too.
    let alpha_short = sessions[1]["short"].as_str().unwrap();
    assert_eq!(alpha_short, "pha-5555");
    let out = case.prov(["query", "session"]);
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listing.lines().any(|l| l.starts_with("pha-5555 ")), "{listing}");
    assert_eq!(texts(&case.query(["session", alpha_short])), alpha);
}

#[test]
fn delete_with_filters_and_retention_and_stats() {
    let case = Case::new("query-delete");
    case.run_sh("echo 1 > one.txt");
    case.run_sh("echo 2 > two.txt; cat one.txt");
    case.run_sh("echo 3 > three.txt");
    let stats: Value = serde_json::from_slice(&case.prov(["stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["commands"], 3);
    assert_eq!(stats["file_events"], 4);
    assert_eq!(stats["incomplete_commands"], 0);
    assert!(stats["database_bytes"].as_u64().unwrap() > 0);

    // No filter: refused. No terminal, no --yes: refused, nothing lost.
    let out = case.prov(["delete"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a filter"));
    let out = case.prov(["delete", "--text", "two"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without --yes"), "{}", describe(&out));
    assert_eq!(case.query(["history"]).len(), 3);
    // Dry run says what would go.
    let out = case.prov(["delete", "--text", "two", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("would delete 1 command(s) with 2 file event(s)"),
        "{}",
        describe(&out)
    );
    let out = case.prov(["delete", "--text", "two", "--yes"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(texts(&case.query(["history"])), ["echo 3 > three.txt", "echo 1 > one.txt"]);
    assert!(same_file(case.query(["wrote", "two.txt"])).is_empty());
    assert_eq!(same_file(case.query(["wrote", "one.txt"])).len(), 1);
    // Retention: nothing is older than a day; everything is older than "now".
    let out = case.prov(["delete", "--older-than", "1d", "--yes"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to delete"));
    let out = case.prov(["delete", "--older-than", "now", "--yes"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(case.query(["history"]).is_empty());
    let stats: Value = serde_json::from_slice(&case.prov(["stats", "--json"]).stdout).unwrap();
    assert_eq!((stats["commands"].as_u64(), stats["file_events"].as_u64()), (Some(0), Some(0)));
}

#[test]
fn bad_filter_values_are_named() {
    let case = Case::new("query-bad");
    case.run_sh("true");
    for (args, says) in [
        (vec!["history", "--since", "last tuesday"], "\"last tuesday\" is not a time"),
        (vec!["history", "--size", ">ten"], "\"ten\" is not a size"),
        (vec!["history", "--hash", "xyz"], "\"xyz\" is not a hash"),
        (vec!["history", "--exit", "ok"], "is not an exit status"),
        (vec!["history", "--bogus"], "--bogus"),
    ] {
        let out = case.prov(["query"].into_iter().chain(args.iter().copied()));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // The record is still there.
    assert_eq!(case.query(["history"]).len(), 1);
}

#[test]
fn query_results_export_in_every_format() {
    let case = Case::new("query-export");
    case.run_sh("echo raw > raw.txt");
    case.run_sh("tr a-z A-Z < raw.txt > up.txt");
    // shournal's line format, one COMMAND line per command, oldest first.
    let out = case.prov(["query", "history", "--format", "shournal-json"]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("HEADER:") && lines.last().unwrap().starts_with("FOOTER:"), "{text}");
    let commands: Vec<Value> =
        lines.iter().filter_map(|l| l.strip_prefix("COMMAND:")).map(|j| serde_json::from_str(j).unwrap()).collect();
    assert_eq!(commands.len(), 2);
    assert!(commands[0]["command"].as_str().unwrap().contains("echo raw"));
    assert!(commands[1]["fileReadEvents"][0]["path"].as_str().unwrap().ends_with("/raw.txt"));
    // PROV-JSON to a new file; never over an existing one.
    let out = case.prov(["query", "history", "--text", "tr a-z", "--format", "prov-json", "-o", "p.json"]);
    assert!(out.status.success(), "{}", describe(&out));
    let doc: Value = serde_json::from_slice(&std::fs::read(case.work.join("p.json")).unwrap()).unwrap();
    assert_eq!(doc["activity"].as_object().unwrap().len(), 1, "only the filtered command: {doc:#}");
    let again = case.prov(["query", "history", "--format", "prov-json", "-o", "p.json"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwritten"));
    // An RO-Crate needs a directory; a Makefile rebuilds what was written.
    let crate_out = case.prov(["query", "history", "--format", "ro-crate"]);
    assert!(String::from_utf8_lossy(&crate_out.stderr).contains("give --output DIR"));
    let out = case.prov(["query", "wrote", "up.txt", "--format", "ro-crate", "-o", "crate"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(case.work.join("crate/ro-crate-metadata.json").exists());
    let make = case.prov(["query", "history", "--format", "makefile"]);
    let make = String::from_utf8(make.stdout).unwrap();
    assert!(make.contains("up.txt") && make.contains("tr a-z A-Z"), "{make}");
    // -o without --format is a usage error.
    let out = case.prov(["query", "history", "-o", "x"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn delete_frees_archived_scripts_nothing_else_uses() {
    let case = Case::new("query-delete-archive");
    case.write("a.sh", b"echo a > a.out\n");
    case.write("b.sh", b"echo b > b.out\n");
    case.run_sh("sh a.sh");
    case.run_sh("sh b.sh");
    case.run_sh("sh a.sh; true");
    let archive = |case: &Case| -> (u64, u64) {
        let s: Value = serde_json::from_slice(&case.prov(["stats", "--json"]).stdout).unwrap();
        (s["archived_files"].as_u64().unwrap(), s["archived_contents"].as_u64().unwrap())
    };
    assert_eq!(archive(&case), (3, 2), "a.sh read twice, stored once");
    // Listings say which read files can be restored.
    let found = case.query(["wrote", "b.out"]);
    let script = found[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("/b.sh"))
        .unwrap()
        .clone();
    assert_eq!(script["archived"], true, "{script:#}");
    let output = found[0]["files"].as_array().unwrap().iter().find(|f| f["access"] == "write").unwrap().clone();
    assert!(output.get("archived").is_none(), "{output:#}");
    let human = String::from_utf8(case.prov(["query", "wrote", "b.out"]).stdout).unwrap();
    assert!(human.lines().any(|l| l.contains(" b.sh ") && l.ends_with("[archived]")), "{human}");
    let out = case.prov(["delete", "--text", "b.sh", "--yes"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("and 1 archived content(s)"), "{}", describe(&out));
    assert_eq!(archive(&case), (2, 1));
    // a.sh's content stays while one command still refers to it.
    let out = case.prov(["delete", "--text-glob", "sh -c 'sh a.sh'", "--yes"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("deleted 1 command(s)"), "{}", describe(&out));
    assert_eq!(archive(&case), (1, 1));
    let restored = case.prov(["restore", "--file", "a.sh", "--stdout"]);
    assert_eq!(restored.stdout, b"echo a > a.out\n", "{}", describe(&restored));
    case.prov(["delete", "--text", "a.sh", "--yes"]);
    assert_eq!(archive(&case), (0, 0));
}

#[test]
fn query_defaults_come_from_the_config() {
    let case = Case::new("query-config");
    for i in 0..3 {
        case.run_sh(&format!("echo {i} > a{i}; echo {i} > b{i}"));
    }
    let config = case.home.join(".config/prov/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[query]\nlimit = 2\nfiles_shown = 1\n").unwrap();
    case.chown_tree(&case.home.join(".config"));
    assert_eq!(case.query(["history"]).len(), 2);
    assert_eq!(case.query(["history", "-n", "3"]).len(), 3, "-n still wins");
    let out = String::from_utf8(case.prov(["query", "history", "--files", "-n", "1"]).stdout).unwrap();
    assert!(out.contains("… and 1 more files"), "{out}");
    std::fs::write(&config, "[query]\nlimt = 2\n").unwrap();
    let out = case.prov(["query", "history"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml:2:") && err.contains("unknown field `limt`"), "{err}");
}

/// Every empty file has the same content: an empty file is found by its
/// path only, not as the output of every command that made one.
#[test]
fn empty_files_are_found_by_path_only() {
    let case = Case::new("query-empty");
    case.run_sh(": > a.txt");
    case.run_sh(": > b.txt");
    case.run_sh("echo data > c.txt");
    let a = case.query(["wrote", "a.txt"]);
    assert_eq!(texts(&a), vec![": > a.txt"], "{a:#?}");
    // A file with content is still found after a rename, by content.
    std::fs::rename(case.work.join("c.txt"), case.work.join("moved.txt")).unwrap();
    assert_eq!(texts(&case.query(["wrote", "moved.txt"])), vec!["echo data > c.txt"]);
}
