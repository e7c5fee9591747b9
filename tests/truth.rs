//! Answers with known truth: which command wrote a file, and the lineage
//! behind it, when other files have the same content. Every scenario is
//! made by the real tracer as an ordinary user; the commands that really
//! wrote each file are known from the script, and every first answer must
//! be that command (or say that no recorded command wrote it), with how it
//! was matched.

use std::collections::BTreeSet;
use std::process::Output;

use prov_e2e::*;
use serde_json::Value;

/// `prov run -- sh -c SCRIPT` as the user in `dir` below the work
/// directory (made if missing); the new record's id.
fn traced(case: &Case, dir: &str, script: &str) -> i64 {
    let cwd = case.work.join(dir);
    std::fs::create_dir_all(&cwd).unwrap();
    case.chown_tree(&cwd);
    let out =
        case.command(case.inst.prov()).args(["run", "--", "sh", "-c", script]).current_dir(&cwd).output().unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{script}: {}", describe(&out));
    let last = case.last_command();
    assert!(last["text"].as_str().unwrap().contains(script.split(' ').next().unwrap()), "{last:#?}");
    last["id"].as_i64().unwrap()
}

/// `sh -c SCRIPT` as the user in `dir`, outside prov.
fn untraced(case: &Case, dir: &str, script: &str) {
    let cwd = case.work.join(dir);
    std::fs::create_dir_all(&cwd).unwrap();
    case.chown_tree(&cwd);
    let out = case.command("sh").args(["-c", script]).current_dir(&cwd).output().unwrap();
    assert!(out.status.success(), "{script}: {}", describe(&out));
}

fn prov(case: &Case, args: &[&str]) -> Output {
    case.command(case.inst.prov()).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `prov query wrote FILE --json`: (id, match) of each command listed, in
/// order, and the exit status.
fn writers(case: &Case, file: &str) -> (Vec<(i64, String)>, Option<i32>) {
    let out = prov(case, &["query", "wrote", file, "--json"]);
    let listed = parse_json_lines(&out.stdout)
        .iter()
        .map(|c| (c["id"].as_i64().unwrap(), c["match"].as_str().unwrap_or("(none)").to_string()))
        .collect();
    (listed, out.status.code())
}

/// The command ids of `prov query lineage FILE --format json ARGS`.
fn lineage_ids(case: &Case, file: &str, args: &[&str]) -> BTreeSet<i64> {
    let mut all = vec!["query", "lineage", file, "--format", "json"];
    all.extend_from_slice(args);
    let out = prov(case, &all);
    assert!(out.status.success(), "lineage {file}: {}", describe(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["commands"].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect()
}

fn ids(v: &[i64]) -> BTreeSet<i64> {
    v.iter().copied().collect()
}

#[test]
fn the_writer_named_first_is_the_one_that_wrote_this_file() {
    let case = Case::new("truth-writers");
    let a = traced(&case, "A", "echo 0 > count.txt; seq 10 > data.txt");
    let b = traced(&case, "B", "echo 0 > count.txt; seq 10 > data.txt");
    let cp = traced(&case, ".", "cp A/data.txt C.txt");
    untraced(&case, "B", "mv data.txt moved.txt");
    untraced(&case, "D", "seq 10 > untraced.txt");

    // Two commands wrote the same content to two dirs: each file its own writer.
    let (listed, status) = writers(&case, "A/count.txt");
    assert_eq!(status, Some(0));
    assert_eq!(listed[0], (a, "path".into()), "{listed:?}");
    assert!(listed.contains(&(b, "content".into())), "B's twin is listed as content: {listed:?}");
    assert!(listed.iter().skip(1).all(|(_, m)| m != "path" && m != "moved"), "{listed:?}");
    let (listed, _) = writers(&case, "B/count.txt");
    assert_eq!(listed[0], (b, "path".into()), "{listed:?}");

    // A reader that copies is not the writer of what it read.
    let (listed, _) = writers(&case, "A/data.txt");
    assert_eq!(listed[0], (a, "path".into()), "{listed:?}");
    assert!(listed.contains(&(cp, "content".into())), "{listed:?}");

    // A file moved outside prov keeps its writer, matched as moved.
    let (listed, status) = writers(&case, "B/moved.txt");
    assert_eq!(status, Some(0));
    assert_eq!(listed[0], (b, "moved".into()), "{listed:?}");
    let human = stdout(&prov(&case, &["query", "wrote", "B/moved.txt"]));
    assert!(human.contains("moved since"), "{human}");

    // An untraced file with traced twins: nobody wrote it, and the twins
    // are labelled as such, for scripts (exit 1, match) and people.
    let (listed, status) = writers(&case, "D/untraced.txt");
    assert_eq!(status, Some(1), "no recorded command wrote it");
    assert_eq!(ids(&listed.iter().map(|l| l.0).collect::<Vec<_>>()), ids(&[a, b, cp]), "{listed:?}");
    assert!(listed.iter().all(|(_, m)| m == "content"), "{listed:?}");
    let out = prov(&case, &["query", "wrote", "D/untraced.txt"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no recorded command wrote") && err.contains("untraced.txt"), "{err}");
    let human = stdout(&out);
    assert!(human.contains("identical content"), "{human}");
    assert!(!human.contains("wrote this file"), "{human}");

    // The JSON's matched file says how it matched.
    let out = prov(&case, &["query", "wrote", "B/moved.txt", "--json"]);
    let first = &parse_json_lines(&out.stdout)[0];
    let matched: Vec<&Value> = first["files"].as_array().unwrap().iter().filter(|f| f["matched"] == true).collect();
    assert_eq!(matched.len(), 1, "{first:#?}");
    assert_eq!(matched[0]["match"], "moved");
    assert!(matched[0]["path"].as_str().unwrap().ends_with("/B/data.txt"));
}

#[test]
fn a_path_written_again_names_its_last_writer() {
    let case = Case::new("truth-rewrites");
    // The same content twice to one path: the second wrote it.
    let first = traced(&case, ".", "echo v > twice.txt");
    let second = traced(&case, ".", "echo v > twice.txt");
    let (listed, _) = writers(&case, "twice.txt");
    assert_eq!(listed[0], (second, "path".into()), "{listed:?}");
    assert!(listed.contains(&(first, "earlier".into())), "{listed:?}");

    // An append: the appender made the file as it is.
    let made = traced(&case, ".", "echo a > log.txt");
    let appended = traced(&case, ".", "echo b >> log.txt");
    let (listed, _) = writers(&case, "log.txt");
    assert_eq!(listed[0], (appended, "path".into()), "{listed:?}");
    assert!(listed.contains(&(made, "earlier".into())), "{listed:?}");

    // Rewritten outside prov with other content: no recorded command wrote it.
    let old = traced(&case, ".", "echo recorded > changed.txt");
    untraced(&case, ".", "echo by-hand > changed.txt");
    let (listed, status) = writers(&case, "changed.txt");
    assert_eq!(status, Some(1), "{listed:?}");
    assert_eq!(listed, vec![(old, "earlier".to_string())]);
    // Its lineage is of the last recorded version, said so, exit 1; never a
    // Makefile that would put that version back over the edit.
    let out = prov(&case, &["query", "lineage", "changed.txt", "--no-pager"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stdout(&out)
        .lines()
        .next()
        .unwrap()
        .ends_with(&format!("(changed since #{old} wrote it: the lineage of that version)")));
    let out = prov(&case, &["query", "lineage", "changed.txt", "--format", "makefile"]);
    assert!(!out.status.success() && out.stdout.is_empty(), "{}", describe(&out));
}

#[test]
fn lineage_has_no_ancestors_by_coincidence() {
    let case = Case::new("truth-lineage");
    // The reader of an untraced file with a traced twin: the twin's writer
    // never touched it.
    let twin = traced(&case, "a", "echo same-content-42 > x.txt");
    untraced(&case, "b", "echo same-content-42 > y.txt");
    let cp = traced(&case, "b", "cp y.txt z.txt");
    assert_eq!(lineage_ids(&case, "b/z.txt", &[]), ids(&[cp]));
    let tree = stdout(&prov(&case, &["query", "lineage", "b/z.txt", "--no-pager"]));
    assert!(!tree.contains("x.txt"), "{tree}");
    // Asked for, the content twin shows, labelled.
    assert_eq!(lineage_ids(&case, "b/z.txt", &["--by-content"]), ids(&[twin, cp]));
    let tree = stdout(&prov(&case, &["query", "lineage", "b/z.txt", "--by-content", "--no-pager"]));
    assert!(tree.contains("identical content"), "{tree}");

    // A chain whose input has a twin elsewhere stays in its own dir.
    traced(&case, "twin", "seq 20 | sort -r > in.txt");
    let made = traced(&case, "work", "seq 20 | sort -r > in.txt");
    let sorted = traced(&case, "work", "sort -n in.txt > out.txt");
    assert_eq!(lineage_ids(&case, "work/out.txt", &[]), ids(&[made, sorted]));

    // A command that reads its own temp file, while an earlier command
    // wrote the same content elsewhere.
    traced(&case, "elsewhere", "echo tmpdata > t");
    let own = traced(&case, "own", "echo tmpdata > t; cat t > out");
    assert_eq!(lineage_ids(&case, "own/out", &[]), ids(&[own]));
    let tree = stdout(&prov(&case, &["query", "lineage", "own/out", "--no-pager"]));
    assert!(tree.contains("written earlier by this command"), "{tree}");

    // Downstream follows the same links: the twin's writer has no readers.
    let down = prov(&case, &["query", "lineage", "a/x.txt", "--downstream", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&down.stdout).unwrap_or(Value::Null);
    let ids_down: Vec<i64> =
        doc["commands"].as_array().map(|a| a.iter().map(|c| c["id"].as_i64().unwrap()).collect()).unwrap_or_default();
    assert!(!ids_down.contains(&cp), "{ids_down:?}");
}

#[test]
fn a_pipeline_run_again_has_the_second_runs_lineage() {
    let case = Case::new("truth-rerun");
    let mut runs = Vec::new();
    for _ in 0..2 {
        let raw = traced(&case, "p", "seq 30 > raw.txt");
        let mid = traced(&case, "p", "sort -r raw.txt > mid.txt");
        let out = traced(&case, "p", "head -5 mid.txt > out.txt");
        runs.push([raw, mid, out]);
    }
    assert_eq!(lineage_ids(&case, "p/out.txt", &[]), ids(&runs[1]));
    let down = prov(&case, &["query", "lineage", "p/raw.txt", "--downstream", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&down.stdout).unwrap();
    let got: BTreeSet<i64> = doc["commands"].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(got, ids(&runs[1][1..]), "readers of the second raw.txt only");
}

#[test]
fn an_edit_in_place_links_to_the_version_it_read() {
    let case = Case::new("truth-sed");
    let made = traced(&case, ".", "printf 'Centre\\n' > s.csv");
    let edited = traced(&case, ".", "sed -i s/Centre/Center/ s.csv");
    let (listed, _) = writers(&case, "s.csv");
    assert_eq!(listed[0].0, edited, "{listed:?}");
    assert!(listed[0].1 == "moved" || listed[0].1 == "path", "{listed:?}");
    assert_eq!(lineage_ids(&case, "s.csv", &[]), ids(&[made, edited]));
}

/// Two copies of a small C project built with `make -j2`: each binary's
/// lineage, by commands and by processes, stays in its own directory,
/// although the compiler's temp files and the sources have the same
/// contents in both.
#[test]
fn two_builds_of_one_project_keep_their_own_lineage() {
    let case = Case::new("truth-make");
    let mut makefile = String::from("app: main.o f1.o f2.o f3.o\n\tcc -o app main.o f1.o f2.o f3.o\n");
    makefile.push_str("%.o: %.c\n\tcc -c -o $@ $<\n");
    for dir in ["one", "two"] {
        let d = case.work.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("Makefile"), &makefile).unwrap();
        let mut main = String::new();
        for i in 1..=3 {
            std::fs::write(d.join(format!("f{i}.c")), format!("int f{i}(void) {{ return {i}; }}\n")).unwrap();
            main.push_str(&format!("int f{i}(void);\n"));
        }
        main.push_str("int main(void) { return f1() + f2() + f3() - 6; }\n");
        std::fs::write(d.join("main.c"), main).unwrap();
        case.chown_tree(&d);
    }
    let first = traced(&case, "one", "make -j2");
    let second = traced(&case, "two", "make -j2");
    assert_eq!(lineage_ids(&case, "one/app", &[]), ids(&[first]));
    assert_eq!(lineage_ids(&case, "two/app", &[]), ids(&[second]));
    for (dir, other) in [("one", "two"), ("two", "one")] {
        let tree = stdout(&prov(&case, &["query", "lineage", &format!("{dir}/app"), "--processes", "--no-pager"]));
        let foreign = format!("/{other}/");
        assert!(!tree.contains(&foreign), "{dir}/app's process lineage names {other}:\n{tree}");
        assert!(tree.contains("f1.c"), "{tree}");
        assert!(!tree.contains(&format!("command {}", if dir == "one" { second } else { first })), "{tree}");
    }
}

/// `prov query …` run by the user is recorded, but its reads are not
/// anybody's lineage or readers.
#[test]
fn provs_own_commands_stay_out_of_the_answers() {
    let case = Case::new("truth-own");
    traced(&case, ".", "seq 3 > in.txt");
    let reader = traced(&case, ".", "cat in.txt > out.txt");
    let out = case
        .command(case.inst.prov())
        .args(["run", "--", case.inst.prov().to_str().unwrap(), "query", "lineage", "in.txt", "--downstream"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let readers: Vec<i64> = parse_json_lines(&prov(&case, &["query", "read", "in.txt", "--json"]).stdout)
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(readers, vec![reader]);
    let down = prov(&case, &["query", "lineage", "in.txt", "--downstream", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&down.stdout).unwrap();
    assert_eq!(doc["commands"].as_array().unwrap().len(), 1, "{doc:#?}");
}

const VENV: &str = "/opt/prov-test-venv/bin";

/// A data analysis as a new user writes it: a script writes a temp file,
/// which is moved into place and edited in place; the top three rows are
/// taken from it. Returns the ids (summarize, mv, sed, head).
fn analysis(case: &Case) -> [i64; 4] {
    let script = "import csv, sys\nrows = list(csv.reader(open('raw/regions.csv')))[1:]\nrows.sort(key=lambda r: -int(r[1]))\nprint('region,value')\nfor r in rows: print(r[0] + ',' + r[1])\n";
    std::fs::create_dir_all(case.work.join("raw")).unwrap();
    std::fs::create_dir_all(case.work.join("out")).unwrap();
    std::fs::write(case.work.join("summarize.py"), script).unwrap();
    std::fs::write(case.work.join("raw/regions.csv"), "region,value\nCentre,3\nNorth,5\nSouth,1\nEast,4\nWest,2\n")
        .unwrap();
    case.chown_tree(&case.work);
    [
        traced(case, ".", "python3 summarize.py > out/summary_tmp.csv"),
        traced(case, ".", "mv out/summary_tmp.csv out/summary.csv"),
        traced(case, ".", "sed -i 's/Centre/Center/' out/summary.csv"),
        traced(case, ".", "head -4 out/summary.csv > out/top3.csv"),
    ]
}

/// `make` or `snakemake` of an export as the user; its output.
fn rebuild(case: &Case, tool: &str, file: &std::path::Path) -> Output {
    let mut cmd = if tool == "make" {
        let mut c = case.command("make");
        c.arg("-f").arg(file);
        c
    } else {
        let mut c = case.command(format!("{VENV}/snakemake"));
        c.arg("-s").arg(file).args(["--cores", "1"]).env("XDG_CACHE_HOME", case.home.join(".cache"));
        c
    };
    cmd.output().unwrap()
}

fn export(case: &Case, target: &str, format: &str, name: &str) -> (std::path::PathBuf, Output) {
    let path = case.work.join(name);
    let _ = std::fs::remove_file(&path);
    let out = prov(case, &["query", "lineage", target, "--format", format, "--output", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    (path, out)
}

#[test]
fn exports_rebuild_through_moves_and_edits_in_place() {
    for tool in ["make", "snakemake"] {
        let case = Case::new(&format!("truth-rebuild-{tool}"));
        let [summarize, mv, sed, head] = analysis(&case);
        let top3 = case.work.join("out/top3.csv");
        let recorded = std::fs::read(&top3).unwrap();
        assert_eq!(String::from_utf8_lossy(&recorded), "region,value\nNorth,5\nEast,4\nCenter,3\n");
        // The tree shows the whole chain: the move found by content and mtime.
        let ids = lineage_ids(&case, "out/top3.csv", &[]);
        assert!(ids.contains(&summarize) && ids.contains(&sed) && ids.contains(&head), "{ids:?} (mv: {mv})");

        let format = if tool == "make" { "makefile" } else { "snakemake" };
        let (file, _) = export(&case, "out/top3.csv", format, &format!("rebuild.{tool}"));
        // Everything made is gone: the whole chain runs again.
        std::fs::remove_file(case.work.join("out/summary.csv")).unwrap();
        std::fs::remove_file(&top3).unwrap();
        let out = rebuild(&case, tool, &file);
        assert!(out.status.success(), "{tool}: {}", describe(&out));
        assert_eq!(std::fs::read(&top3).unwrap(), recorded, "{tool} rebuilt top3.csv as recorded");
        assert_eq!(
            std::fs::read_to_string(case.work.join("out/summary.csv")).unwrap().lines().nth(3),
            Some("Center,3")
        );

        // An edited raw input: the rebuild starts from it, never from stale data.
        std::fs::write(case.work.join("raw/regions.csv"), "region,value\nCentre,9\nNorth,5\nSouth,1\nEast,4\nWest,2\n")
            .unwrap();
        std::fs::remove_file(&top3).unwrap();
        let out = rebuild(&case, tool, &file);
        assert!(out.status.success(), "{tool}: {}", describe(&out));
        assert_eq!(std::fs::read_to_string(&top3).unwrap(), "region,value\nCenter,9\nNorth,5\nEast,4\n", "{tool}");
    }
}

#[test]
fn a_rebuild_that_cannot_be_faithful_names_the_file() {
    let case = Case::new("truth-refuse");
    analysis(&case);
    std::fs::remove_file(case.work.join("raw/regions.csv")).unwrap();
    let (file, out) = export(&case, "out/top3.csv", "makefile", "rebuild.mk");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot rebuild faithfully") && err.contains("raw/regions.csv"), "{err}");
    std::fs::remove_file(case.work.join("out/top3.csv")).unwrap();
    std::fs::remove_file(case.work.join("out/summary.csv")).unwrap();
    // The step runs without it and fails, naming it: never a result from nothing.
    let out = rebuild(&case, "make", &file);
    assert!(!out.status.success(), "the rebuild cannot succeed without its input");
    assert!(String::from_utf8_lossy(&out.stderr).contains("raw/regions.csv"), "{}", describe(&out));
}

#[test]
fn dot_joins_a_moved_file_and_stat_says_whether_the_result_is_stale() {
    let case = Case::new("truth-dot-stat");
    let [_, _, sed, _] = analysis(&case);
    let out = prov(&case, &["query", "lineage", "out/top3.csv", "--format", "dot"]);
    let dot = stdout(&out);
    let node = |name: &str| {
        dot.lines()
            .find(|l| l.contains("shape=ellipse") && l.contains(&format!("label=\"{name}\\n")))
            .and_then(|l| l.trim().split(' ').next())
            .unwrap_or_else(|| panic!("no node {name}:\n{dot}"))
            .to_string()
    };
    let (tmp, summary) = (node("summary_tmp.csv"), node("summary.csv"));
    assert!(dot.contains(&format!("{tmp} -> {summary} [style=bold, label=\"moved\"]")), "{dot}");

    let tree = stdout(&prov(&case, &["query", "lineage", "out/top3.csv", "--stat", "--no-pager"]));
    let last = tree.lines().last().unwrap();
    assert!(last.starts_with("up to date"), "{tree}");
    assert!(!tree.contains("modified"), "the version sed -i replaced is expected to differ:\n{tree}");
    assert!(tree.contains(&format!("rewritten since by #{sed}")), "{tree}");
    std::fs::write(case.work.join("raw/regions.csv"), "region,value\nCentre,9\n").unwrap();
    let tree = stdout(&prov(&case, &["query", "lineage", "out/top3.csv", "--stat", "--no-pager"]));
    assert_eq!(tree.lines().last().unwrap(), "stale: 1 input upstream changed since: raw/regions.csv", "{tree}");
}
