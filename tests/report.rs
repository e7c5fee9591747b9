//! `prov report`: records of two sessions made by the real tracer, the
//! report written by the test user, opened in headless Chromium (Debian's
//! chromium and chromium-driver) and checked in the rendered page: its
//! lanes, boxes, list and charts, and a click on a box showing the
//! command's directory, files and hashes. A screenshot is left in
//! `<target>/test-output/report.png`.

#[path = "../crates/prov-report/tests/webdriver/mod.rs"]
mod webdriver;

use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use std::time::Duration;

use prov_e2e::*;
use serde_json::Value;
use webdriver::Browser;

const SESSION_A: &str = "0192a6c4-0000-7000-8000-00000000000a";
const SESSION_B: &str = "0192a6c4-0000-7000-8000-00000000000b";

/// `prov run -- sh -c SCRIPT` in session `session`, traced.
fn run_in(case: &Case, session: &str, script: &str) -> Output {
    let out = case
        .command(case.inst.prov())
        .env("PROV_SESSION", session)
        .args(["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_traced(&out);
    out
}

fn ok(out: Output) {
    assert!(out.status.success(), "{}", describe(&out));
}

/// The data a report embeds, read the way the browser delimits it.
fn embedded(page: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"prov-data\">";
    let from = page.find(open).expect("data element") + open.len();
    let len = page[from..].find("</script").unwrap();
    serde_json::from_str(&page[from..from + len]).expect("embedded JSON")
}

/// JavaScript string literal of `s`.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn report_of_two_sessions_in_chromium() {
    let case = Case::new("report_two_sessions");
    ok(run_in(&case, SESSION_A, "printf 'alpha\\n' > in.txt"));
    ok(run_in(&case, SESSION_B, "tr a-z A-Z < in.txt > out.txt"));
    ok(run_in(&case, SESSION_A, "echo '</script><b>bold</b>' > tag.txt"));
    let failed = run_in(&case, SESSION_B, "ls /nonexistent-prov-report");
    assert_eq!(failed.status.code(), Some(2), "{}", describe(&failed));
    ok(run_in(&case, SESSION_A, "cat in.txt out.txt > both.txt"));

    let history = case.query(["history", "-n", "100"]);
    assert_eq!(history.len(), 5, "{history:#?}");
    let writer = case.writer_of("out.txt");
    let id_of = |needle: &str| -> i64 {
        history.iter().find(|c| c["text"].as_str().unwrap().contains(needle)).unwrap()["id"].as_i64().unwrap()
    };
    let failed_id = id_of("nonexistent-prov-report");
    let tag_id = id_of("bold");
    let work = std::fs::canonicalize(&case.work).unwrap();
    let out_path = work.join("out.txt").to_str().unwrap().to_string();
    let in_path = work.join("in.txt").to_str().unwrap().to_string();
    let out_hash = writer["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == out_path.as_str())
        .expect("out.txt in its writer's files")["hash"]
        .as_str()
        .unwrap()
        .to_string();

    let made = case.prov(["report", "-o", "report.html"]);
    assert!(made.status.success(), "{}", describe(&made));
    assert!(
        String::from_utf8_lossy(&made.stderr).contains("report of 5 commands written to report.html"),
        "{}",
        describe(&made)
    );
    let page_path = case.work.join("report.html");
    assert_eq!(
        std::fs::metadata(&page_path).unwrap().permissions().mode() & 0o777,
        0o600,
        "the report is as private as the journal"
    );

    let browser = Browser::start();
    browser.open(&page_path);
    browser.wait_for("return document.body.dataset.ready", Duration::from_secs(30));

    // One lane per session, one box per command, one list row per command.
    let lanes = browser
        .eval("return [...document.querySelectorAll('#lanes .lane[data-session]')].map((l) => l.dataset.session)");
    assert_eq!(lanes, serde_json::json!([SESSION_A, SESSION_B]));
    let canvas = browser.eval("const d = document.getElementById('tl-canvas').dataset; return [d.lanes, d.inView]");
    assert_eq!(canvas, serde_json::json!(["2", "5"]));
    assert_eq!(browser.find_all("#list .row").len(), 5);
    let listed = browser.eval("return document.getElementById('list-count').textContent");
    assert_eq!(listed, "5 commands, newest first");
    // Charts: four commands wrote files, two sessions, the work directory busiest.
    let bars = browser.eval(
        "return ['writes', 'sessions', 'dirs'].map((c) => document.querySelectorAll(`#chart-${c} g.bar-row`).length)",
    );
    assert_eq!(bars.as_array().unwrap()[..2], [4, 2], "bars of the writes and sessions charts");
    // in.txt written, read 2x; out.txt written, read; tag.txt, both.txt written.
    let top_dir = browser.eval("return document.querySelector('#chart-dirs g.bar-row title').textContent");
    assert_eq!(top_dir, format!("{}: 7", work.display()));

    // A click on the writer's box shows where it ran and what it read and wrote.
    let writer_id = writer["id"].as_i64().unwrap();
    browser.click_timeline_box(writer_id);
    browser.wait_for(
        &format!("return document.getElementById('details').dataset.command === '{writer_id}'"),
        Duration::from_secs(10),
    );
    let cwd = browser.eval("return document.querySelector('#details dd[data-field=directory]').textContent");
    assert_eq!(cwd, work.to_str().unwrap());
    let written = browser.eval("return [...document.querySelectorAll('#details table.written tr.file')].map((r) => [...r.cells].map((c) => c.textContent))");
    let out_row = written
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == out_path.as_str())
        .unwrap_or_else(|| panic!("{out_path} not in {written}"));
    assert_eq!(out_row[3], out_hash.as_str(), "hash of out.txt as prov query shows it");
    let read = browser.eval(&format!(
        "return [...document.querySelectorAll('#details table.read td.path')].some((c) => c.textContent === {})",
        js(&in_path)
    ));
    assert_eq!(read, true, "in.txt among the files read");

    // The failing command, picked from the list.
    browser.click(&browser.find_all(&format!("#list .row[data-id='{failed_id}']"))[0]);
    let exit = browser.wait_for(
        &format!("const d = document.getElementById('details'); return d.dataset.command === '{failed_id}' && [d.querySelector('dd[data-field=\"exit status\"]').textContent, d.querySelector('dd[data-field=\"exit status\"]').className]"),
        Duration::from_secs(10),
    );
    assert_eq!(exit, serde_json::json!(["2", "fail"]));

    // Markup typed in a command is shown as text, not made into elements.
    browser.click(&browser.find_all(&format!("#list .row[data-id='{tag_id}']"))[0]);
    let shown = browser.wait_for(
        &format!("const d = document.getElementById('details'); return d.dataset.command === '{tag_id}' && [d.querySelector('pre.cmd').textContent, d.querySelectorAll('b').length]"),
        Duration::from_secs(10),
    );
    assert!(shown[0].as_str().unwrap().contains("</script><b>bold</b>"), "{shown}");
    assert_eq!(shown[1], 0);

    // Nothing was fetched: the page is self-contained.
    assert_eq!(browser.eval("return performance.getEntriesByType('resource').length"), 0);

    browser.click(&browser.find_all(&format!("#list .row[data-id='{writer_id}']"))[0]);
    browser.eval("window.scrollTo(0, 0); return true");
    let png = browser.screenshot();
    let (w, h) = webdriver::png_size(&png);
    assert!(w >= 800 && h >= 600 && png.len() > 20_000, "a {w}x{h} screenshot of {} bytes", png.len());
    let shot = webdriver::test_output_dir(env!("CARGO_TARGET_TMPDIR")).join("report.png");
    std::fs::write(&shot, &png).unwrap();
    println!("screenshot of the report: {}", shot.display());
}

#[test]
fn report_limit_stdout_and_errors() {
    let case = Case::new("report_limit");
    // Nothing recorded yet: no report, and a reason.
    let empty = case.prov(["report", "-o", "empty.html"]);
    assert_eq!(empty.status.code(), Some(1), "{}", describe(&empty));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no records yet"));
    assert!(!case.work.join("empty.html").exists());

    // A file name that is not UTF-8 (latin-1 "café") is shown lossily.
    ok(run_in(&case, SESSION_A, "printf x > \"$(printf 'caf\\351')\""));
    for k in 1..=3 {
        ok(run_in(&case, SESSION_A, &format!("echo {k} > f{k}")));
    }
    ok(case.prov(["report", "-o", "last2.html", "-n", "2"]));
    let data = embedded(&std::fs::read_to_string(case.work.join("last2.html")).unwrap());
    let texts: Vec<&str> =
        data["commands"].as_array().unwrap().iter().map(|c| c["text"][0].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].contains("echo 2 > f2") && texts[1].contains("echo 3 > f3"),
        "the last two, oldest first: {texts:?}"
    );

    // The query filters select what the report shows.
    let filtered = case.prov(["report", "-o", "-", "--text", "echo 2", "--name", "f2"]);
    assert!(filtered.status.success(), "{}", describe(&filtered));
    let data = embedded(&String::from_utf8(filtered.stdout).unwrap());
    let texts: Vec<&str> =
        data["commands"].as_array().unwrap().iter().map(|c| c["text"][0].as_str().unwrap()).collect();
    assert!(texts.len() == 1 && texts[0].contains("echo 2 > f2"), "{texts:?}");
    // Archived scripts a command read are in the report.
    std::fs::write(case.work.join("job.sh"), "echo from-job > job.out\n").unwrap();
    case.chown_tree(&case.work.join("job.sh"));
    ok(run_in(&case, SESSION_A, "sh job.sh"));
    let with_script = case.prov(["report", "-o", "-", "--text", "sh job.sh"]);
    let data = embedded(&String::from_utf8(with_script.stdout).unwrap());
    let scripts = &data["commands"][0]["scripts"];
    assert!(scripts[0][0].as_str().unwrap().ends_with("/job.sh"), "{data:#}");
    let text = &data["scripts"][scripts[0][1].as_u64().unwrap() as usize][0];
    assert_eq!(text, "echo from-job > job.out\n");
    let deleted = case.prov(["delete", "--text", "sh job.sh", "--yes"]);
    assert!(String::from_utf8_lossy(&deleted.stdout).contains("deleted 1 command(s)"), "{}", describe(&deleted));
    let none = case.prov(["report", "-o", "none.html", "--failed"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no recorded command passes the filters"));
    assert!(!case.work.join("none.html").exists());

    let stdout = case.prov(["report", "-o", "-"]);
    assert!(stdout.status.success(), "{}", describe(&stdout));
    let page = String::from_utf8(stdout.stdout).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    let all = embedded(&page);
    assert_eq!(all["commands"].as_array().unwrap().len(), 4);
    let work = std::fs::canonicalize(&case.work).unwrap();
    let written = &all["commands"][0]["w"][0];
    let dir = &all["dirs"][written[0].as_u64().unwrap() as usize];
    assert_eq!((dir.as_str().unwrap(), written[1].as_str().unwrap()), (work.to_str().unwrap(), "caf\u{fffd}"));

    // [report] files_per_command caps the files listed, not the counts.
    ok(run_in(&case, SESSION_A, "echo a > two1; echo b > two2"));
    let config = case.home.join(".config/prov/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[report]\nfiles_per_command = 1\n").unwrap();
    case.chown_tree(&case.home.join(".config"));
    let capped = case.prov(["report", "-o", "-", "--name", "two2"]);
    assert!(capped.status.success(), "{}", describe(&capped));
    let data = embedded(&String::from_utf8(capped.stdout).unwrap());
    assert_eq!(data["files_per_access"], 1);
    let c = &data["commands"][0];
    assert_eq!((c["n_w"].as_u64(), c["w"].as_array().unwrap().len()), (Some(2), 1), "{c:#}");
    std::fs::remove_file(&config).unwrap();

    // An unwritable destination: one line naming it.
    let bad = case.prov(["report", "-o", "/nonexistent-prov-dir/r.html"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write the report to /nonexistent-prov-dir/r.html"), "{err}");
    // A report that cannot be completed (here: no new file may be made in
    // ro/) leaves the earlier one as it was.
    let ro = case.work.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ro.join("r.html"), "earlier").unwrap();
    case.chown_tree(&ro);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let denied = case.prov(["report", "-o", "ro/r.html"]);
    assert_eq!(denied.status.code(), Some(1), "{}", describe(&denied));
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("cannot write the report to ro/r.html"),
        "{}",
        describe(&denied)
    );
    assert_eq!(std::fs::read_to_string(ro.join("r.html")).unwrap(), "earlier");
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 1, "nothing left behind in ro/");
}

/// A path a command read leads to the entry of the command that wrote it,
/// and every listed file to its lineage, drawn as `prov query lineage`
/// draws it (a moved file and a command typed on two lines included).
/// Sessions are named as sessions, not as a `#N` that reads like a command
/// id; the shell's exit and `clear` neither fill the list nor the charts.
#[test]
fn report_links_files_to_writers_and_lineage() {
    let case = Case::new("report_links");
    ok(run_in(&case, SESSION_A, "printf 'b,2\\na,1\\n' > data.csv\necho made"));
    ok(run_in(&case, SESSION_A, "mv data.csv raw.csv"));
    ok(run_in(&case, SESSION_B, "sort raw.csv > sorted.csv"));
    // The shell's own exit writes its history files; here a stand-in named
    // `exit` on PATH does the writing.
    let bin = case.work.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("exit"), "#!/bin/sh\nfor f in 1 2 3 4; do echo $f > .hist$f; done\n").unwrap();
    std::fs::set_permissions(bin.join("exit"), std::fs::Permissions::from_mode(0o755)).unwrap();
    case.chown_tree(&bin);
    let path = format!("{}:/usr/bin:/bin", bin.display());
    for word in ["exit", "clear"] {
        let out = case
            .command(case.inst.prov())
            .env("PROV_SESSION", SESSION_A)
            .env("PATH", &path)
            .env("TERM", "dumb")
            .args(["run", "--", word])
            .output()
            .unwrap();
        assert_traced(&out);
    }

    let history = case.query(["history", "-n", "100"]);
    let id_of = |text: &str| -> i64 {
        history.iter().find(|c| c["text"].as_str().unwrap().starts_with(text)).unwrap_or_else(|| panic!("{text}"))["id"]
            .as_i64()
            .unwrap()
    };
    let (made, sorted) = (id_of("sh -c 'printf"), id_of("sh -c 'sort"));
    let work = std::fs::canonicalize(&case.work).unwrap();
    let raw = work.join("raw.csv").to_str().unwrap().to_string();
    let sorted_csv = work.join("sorted.csv").to_str().unwrap().to_string();
    // Asked from outside the work directory, the CLI shows whole paths, as
    // the report does.
    let cli = case
        .command(case.inst.prov())
        .current_dir("/")
        .args(["query", "lineage", "--no-pager", &sorted_csv])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", describe(&cli));
    let cli_tree = String::from_utf8(cli.stdout).unwrap();
    assert!(cli_tree.contains("moved since"), "{cli_tree}");

    ok(case.prov(["report", "-o", "report.html"]));
    let browser = Browser::start();
    browser.open(&case.work.join("report.html"));
    browser.wait_for("return document.body.dataset.ready", Duration::from_secs(30));

    // exit and clear are left out of the list until asked for, and of the chart.
    let listed = browser.eval("return document.getElementById('list-count').textContent");
    assert_eq!(listed, "3 commands, newest first (2 not listed: exit, clear and prov's own commands)");
    assert_eq!(browser.find_all("#list .row").len(), 3);
    let top = browser
        .eval("return [...document.querySelectorAll('#chart-writes g.bar-row title')].map((t) => t.textContent)");
    assert!(top.as_array().unwrap().iter().all(|t| !t.as_str().unwrap().starts_with("exit")), "{top}");
    browser.click(&browser.find_all("#show-aside")[0]);
    browser.wait_for("return document.querySelectorAll('#list .row').length === 5", Duration::from_secs(10));

    // The session is named as one, not as a number like a command id.
    browser.click(&browser.find_all(&format!("#list .row[data-id='{sorted}']"))[0]);
    let session = browser.wait_for(
        &format!("const d = document.getElementById('details'); return d.dataset.command === '{sorted}' && d.querySelector('dd[data-field=session]').textContent"),
        Duration::from_secs(10),
    );
    let session = session.as_str().unwrap();
    assert!(session.contains("session 0000000b"), "{session}");
    assert!(!session.contains('#'), "{session}");
    let lane = browser.eval("return document.querySelector('#lanes .lane[data-session]').textContent");
    assert!(lane.as_str().unwrap().contains("session 0000000a"), "{lane}");

    // raw.csv, read by sort, leads to the command that wrote it as data.csv.
    let link = browser.eval(&format!(
        "const a = [...document.querySelectorAll('#details table.read a.writer')].find((a) => a.textContent === {}); return a ? a.dataset.writer : null",
        js(&raw)
    ));
    assert_eq!(link, made.to_string());
    browser.eval(&format!(
        "[...document.querySelectorAll('#details table.read a.writer')].find((a) => a.textContent === {}).click(); return true",
        js(&raw)
    ));
    browser.wait_for(
        &format!("return document.getElementById('details').dataset.command === '{made}'"),
        Duration::from_secs(10),
    );

    // sorted.csv's lineage, from sort's entry: what the CLI prints.
    browser.click(&browser.find_all(&format!("#list .row[data-id='{sorted}']"))[0]);
    browser.wait_for(
        &format!("return document.getElementById('details').dataset.command === '{sorted}'"),
        Duration::from_secs(10),
    );
    browser.eval(&format!(
        "[...document.querySelectorAll('#details table.written tr.file')].find((r) => r.cells[0].textContent === {}).querySelector('button.show-lineage').click(); return true",
        js(&sorted_csv)
    ));
    let shown = browser.wait_for(
        &format!("const p = document.getElementById('lineage-panel'); return !p.hidden && p.dataset.path === {} && p.querySelector('pre.lineage').textContent", js(&sorted_csv)),
        Duration::from_secs(10),
    );
    assert_eq!(shown.as_str().unwrap(), cli_tree);
    // The command typed on two lines keeps its second line inside the tree.
    let second = cli_tree.lines().find(|l| l.contains("echo made")).unwrap();
    assert!(second.chars().take_while(|c| *c == ' ' || *c == '│').count() > 4, "{cli_tree}");
    let png = browser.screenshot();
    std::fs::write(webdriver::test_output_dir(env!("CARGO_TARGET_TMPDIR")).join("report-lineage.png"), &png).unwrap();
}
