//! Unit tests of the page's data: escaping, caps, lossy text, sessions,
//! charts. The page itself is tested in a real browser (tests/browser.rs
//! and the end-to-end tests/report.rs).

use std::collections::BTreeMap;

use prov_model::{Access, HashParams};
use prov_store::{CommandRow, FileRow};
use serde_json::Value;

use crate::model::{build, Cut, FILES_PER_ACCESS, TEXT_BYTES};
use crate::{write_report, ArchivedScript, ReportInput};

fn command(id: i64, session: &str, start_s: i64, text: &[u8]) -> CommandRow {
    CommandRow {
        uuid: format!("uuid-{id}"),
        session: session.into(),
        text: text.to_vec(),
        cwd: b"/home/u/proj".to_vec(),
        host: "host".into(),
        start_ns: start_s * 1_000_000_000,
        end_ns: Some(start_s * 1_000_000_000 + 500_000_000),
        ..CommandRow::fixture(id)
    }
}

fn file(command_id: i64, access: Access, path: &[u8]) -> FileRow {
    FileRow {
        id: 0,
        command_id,
        access,
        path: path.to_vec(),
        size: 42,
        mtime_ns: 1_700_000_000_000_000_000,
        hash: Some(0x0123_4567_89ab_cdef),
        hash_params: HashParams::default(),
        pid: None,
    }
}

fn input(records: Vec<(CommandRow, Vec<FileRow>)>) -> ReportInput {
    ReportInput { title: "t".into(), records, ..ReportInput::default() }
}

fn page(input: &ReportInput) -> String {
    let mut out = Vec::new();
    write_report(input, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The embedded JSON, exactly as a browser's parser would delimit it.
fn embedded_json(page: &str) -> &str {
    let open = "<script type=\"application/json\" id=\"prov-data\">";
    let from = page.find(open).expect("data element") + open.len();
    let len = page[from..].find("</script").expect("data element closed");
    &page[from..from + len]
}

#[test]
fn markup_in_recorded_text_stays_data() {
    let nasty = "echo '</script><script>alert(1)</script>' <!-- & > x </SCRIPT \u{2028}";
    let mut c = command(1, "s", 1, nasty.as_bytes());
    c.cwd = b"/tmp/</script>".to_vec();
    let mut inp = input(vec![(c, vec![file(1, Access::Write, b"/tmp/<b>&amp;.txt")])]);
    inp.title = "<title></title></script>".into();
    inp.archived.insert(1, vec![ArchivedScript { path: b"/s</script>.sh".to_vec(), text: "</script>".into() }]);
    let page = page(&inp);

    let json = embedded_json(&page);
    assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'), "raw markup characters in {json}");
    let v: Value = serde_json::from_str(json).expect("embedded data is JSON");
    assert_eq!(v["commands"][0]["text"][0], nasty);
    assert_eq!(v["commands"][0]["cwd"], "/tmp/</script>");
    let written = &v["commands"][0]["w"][0];
    assert_eq!(
        (&v["dirs"][written[0].as_u64().unwrap() as usize], &written[1]),
        (&"/tmp".into(), &"<b>&amp;.txt".into())
    );
    assert_eq!(v["title"], "<title></title></script>");
    assert_eq!(v["scripts"][0][0], "</script>");
    // Two script elements, closed where the page closes them.
    assert_eq!(page.matches("</script>").count(), 2);
}

#[test]
fn assets_cannot_end_their_elements_early() {
    for (name, text) in [("report.js", crate::JS), ("report.css", crate::CSS)] {
        let lower = text.to_lowercase();
        assert!(!lower.contains("</script") && !lower.contains("</style") && !lower.contains("<!--"), "{name}");
    }
}

#[test]
fn no_network_reference_in_the_page() {
    let page = page(&input(vec![(command(1, "s", 1, b"true"), vec![])]));
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for needle in ["http://", "https://", "src=\"", "href=\"", "@import", "url("] {
        // The SVG namespace is a name, not a request.
        let hits = page.matches(needle).count()
            - if needle == "http://" { page.matches("http://www.w3.org/2000/svg").count() } else { 0 };
        assert_eq!(hits, 0, "{needle} in the page");
    }
}

#[test]
fn files_are_capped_per_access_and_counted() {
    let mut files: Vec<FileRow> =
        (0..100_000).map(|k| file(1, Access::Write, format!("/big/tree/f{k}").as_bytes())).collect();
    files.extend((0..3).map(|k| file(1, Access::Read, format!("/src/r{k}").as_bytes())));
    let inp = input(vec![(command(1, "s", 1, b"cp -r src big"), files)]);
    let data = build(&inp);
    let c = &data.commands[0];
    assert_eq!((c.n_w, c.w.len()), (100_000, FILES_PER_ACCESS));
    assert_eq!((c.n_r, c.r.len()), (3, 3));
    assert_eq!((data.dirs[c.w[0].0].as_str(), c.w[0].1.as_str()), ("/big/tree", "f0"));
    assert_eq!(c.w[0].4.as_deref(), Some("0123456789abcdef"));
    // One directory, stored once.
    assert_eq!(data.dirs, ["/big/tree", "/src"]);
    // The chart counts every event, not the capped list.
    assert_eq!(data.charts.writes[0].count, 100_000);
    assert_eq!(data.charts.dirs[0].label, "/big/tree");
    assert_eq!(data.charts.dirs[0].count, 100_000);
    let size = page(&inp).len();
    assert!(size < 200_000, "a 100 000-file command made a {size}-byte page");
}

#[test]
fn long_text_is_cut_on_a_character_boundary() {
    assert_eq!(Cut::new("abc", 3), Cut("abc".into(), 0));
    // "é" is two bytes: a cut inside it moves before it.
    assert_eq!(Cut::new("aé", 2), Cut("a".into(), 2));
    let long = "x".repeat(TEXT_BYTES + 10);
    let data = build(&input(vec![(command(1, "s", 1, long.as_bytes()), vec![])]));
    assert_eq!(data.commands[0].text, Cut("x".repeat(TEXT_BYTES), 10));
}

#[test]
fn non_utf8_bytes_are_shown_lossily() {
    let mut c = command(1, "s", 1, b"cat caf\xe9");
    c.cwd = b"/d\xff".to_vec();
    let data = build(&input(vec![(c, vec![file(1, Access::Read, b"/d\xff/caf\xe9")])]));
    let c = &data.commands[0];
    assert_eq!(c.text.0, "cat caf\u{fffd}");
    assert_eq!(c.cwd, "/d\u{fffd}");
    assert_eq!((data.dirs[c.r[0].0].as_str(), c.r[0].1.as_str()), ("/d\u{fffd}", "caf\u{fffd}"));
}

#[test]
fn bidi_controls_are_shown_escaped_in_texts_and_paths() {
    let mut c = command(1, "s", 1, "cat notes\u{202e}hs.txt\u{2066}".as_bytes());
    c.cwd = "/w\u{202e}d".as_bytes().to_vec();
    let data = build(&input(vec![(c, vec![file(1, Access::Read, "/w/a\u{202e}b".as_bytes())])]));
    let c = &data.commands[0];
    assert_eq!(c.text.0, "cat notes\\u{202e}hs.txt\\u{2066}");
    assert_eq!(c.cwd, "/w\\u{202e}d");
    assert_eq!(c.r[0].1, "a\\u{202e}b");
    let page = page(&input(vec![(command(2, "s", 1, "x\u{202e}y".as_bytes()), vec![])]));
    assert!(!page.contains('\u{202e}'), "no raw override anywhere in the page");
}

#[test]
fn sessions_are_lanes_in_order_of_their_first_command() {
    // "a" comes first in the input, but "b" started first: "b" is lane 0.
    let records = vec![
        (command(1, "a", 10, b"one"), vec![]),
        (command(2, "b", 5, b"two"), vec![]),
        (command(3, "a", 20, b"three"), vec![]),
    ];
    let data = build(&input(records));
    let ids: Vec<&str> = data.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    assert_eq!(data.commands.iter().map(|c| c.s).collect::<Vec<_>>(), [1, 0, 1]);
    assert_eq!(data.sessions[1].commands, 2);
    assert_eq!(data.charts.sessions[0].session, Some(1));
    assert_eq!(data.charts.sessions[0].count, 2);
}

#[test]
fn archived_scripts_are_stored_once() {
    let mut inp = input((1..=3).map(|id| (command(id, "s", id, b"sh build.sh"), vec![])).collect());
    let script = |p: &[u8]| ArchivedScript { path: p.to_vec(), text: "make all\n".into() };
    inp.archived = BTreeMap::from([(1, vec![script(b"/p/build.sh")]), (3, vec![script(b"/q/build.sh")])]);
    let data = build(&inp);
    assert_eq!(data.scripts, [Cut("make all\n".into(), 0)]);
    assert_eq!(data.commands[0].scripts, [("/p/build.sh".to_string(), 0)]);
    assert!(data.commands[1].scripts.is_empty());
    assert_eq!(data.commands[2].scripts, [("/q/build.sh".to_string(), 0)]);
}

#[test]
fn charts_rank_by_count() {
    let writes =
        |id: i64, n: usize| (0..n).map(|k| file(id, Access::Write, format!("/o{id}/f{k}").as_bytes())).collect();
    let data = build(&input(vec![
        (command(1, "s", 1, b"small"), writes(1, 2)),
        (command(2, "s", 2, b"big"), writes(2, 7)),
        (command(3, "s", 3, b"none"), vec![file(3, Access::Read, b"/o2/f0")]),
    ]));
    let w: Vec<(&str, u64)> = data.charts.writes.iter().map(|b| (b.label.as_str(), b.count)).collect();
    assert_eq!(w, [("big", 7), ("small", 2)]);
    assert_eq!(data.charts.writes[0].command, Some(1));
    let d: Vec<(&str, u64)> = data.charts.dirs.iter().map(|b| (b.label.as_str(), b.count)).collect();
    assert_eq!(d, [("/o2", 8), ("/o1", 2)]);
}

#[test]
fn provs_own_work_counts_in_the_charts_only_when_asked() {
    let writes =
        |id: i64, n: usize| (0..n).map(|k| file(id, Access::Write, format!("/o{id}/f{k}").as_bytes())).collect();
    let records = vec![
        (command(1, "s", 1, b"make all"), writes(1, 2)),
        (command(2, "s", 2, b"prov query lineage out.csv | less"), writes(2, 9)),
    ];
    let labels = |include_prov| {
        let data = build(&ReportInput { include_prov, ..input(records.clone()) });
        let w: Vec<String> = data.charts.writes.iter().map(|b| b.label.clone()).collect();
        let d: Vec<String> = data.charts.dirs.iter().map(|b| b.label.clone()).collect();
        (w, d)
    };
    assert_eq!(labels(false), (vec!["make all".to_string()], vec!["/o1".to_string()]));
    assert_eq!(labels(true).0, ["prov query lineage out.csv | less", "make all"]);
}

#[test]
fn the_shells_exit_and_clear_are_housekeeping() {
    let writes =
        |id: i64, n: usize| (0..n).map(|k| file(id, Access::Write, format!("/o{id}/f{k}").as_bytes())).collect();
    // The shell's exit writes its history file (and more with a plugin).
    let data = build(&input(vec![
        (command(1, "s", 1, b"make all"), writes(1, 2)),
        (command(2, "s", 2, b"exit"), writes(2, 5)),
        (command(3, "s", 3, b"clear"), writes(3, 3)),
        (command(4, "s", 4, b"exit 3"), writes(4, 4)),
        (command(5, "s", 5, b"./exit-handler"), writes(5, 1)),
    ]));
    let w: Vec<&str> = data.charts.writes.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(w, ["make all", "./exit-handler"]);
    let aside: Vec<bool> = data.commands.iter().map(|c| c.aside).collect();
    assert_eq!(aside, [false, true, true, true, false]);
    let d: Vec<&str> = data.charts.dirs.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(d, ["/o1", "/o5"]);
}

#[test]
fn file_paths_share_their_directories() {
    let data = build(&input(vec![(
        command(1, "s", 1, b"x"),
        vec![
            file(1, Access::Read, b"/a/b/c"),
            file(1, Access::Read, b"/top"),
            file(1, Access::Write, b"/a/b/d"),
            file(1, Access::Write, b"rel"),
        ],
    )]));
    let c = &data.commands[0];
    let path = |f: &crate::model::File| (data.dirs[f.0].clone(), f.1.clone());
    assert_eq!(c.r.iter().map(path).collect::<Vec<_>>(), [("/a/b".into(), "c".into()), ("/".into(), "top".into())]);
    assert_eq!(c.w.iter().map(path).collect::<Vec<_>>(), [("/a/b".into(), "d".into()), ("".into(), "rel".into())]);
    assert_eq!(data.dirs, ["/a/b", "", "/"]);
}

#[test]
fn an_empty_report_is_a_page() {
    let page = page(&input(vec![]));
    let v: Value = serde_json::from_str(embedded_json(&page)).unwrap();
    assert_eq!(v["commands"].as_array().unwrap().len(), 0);
}

#[test]
fn records_ended_short_or_untraced_are_shown_incomplete() {
    let short = CommandRow { incomplete: Some("the collector was killed".into()), ..command(1, "s", 1, b"a") };
    let untraced = CommandRow { untraced: Some("helper missing".into()), ..command(2, "s", 2, b"b") };
    let data = build(&input(vec![(short, vec![]), (untraced, vec![]), (command(3, "s", 3, b"c"), vec![])]));
    let shown: Vec<&[(&str, u64)]> = data.commands.iter().map(|c| c.incomplete.as_slice()).collect();
    assert_eq!(shown, [&[("ended_short", 1)][..], &[("untraced", 1)][..], &[][..]]);
}

#[test]
fn a_commands_process_tree_is_embedded_capped_and_counted() {
    use crate::model::PROCESSES_PER_COMMAND;
    use crate::ProcessLine;
    let mut inp = input(vec![(command(1, "s", 10, b"make all"), vec![]), (command(2, "s", 20, b"ls"), vec![])]);
    let line = |depth, pid, label: &str| ProcessLine { depth, label: label.into(), pid, writes: 1 };
    let mut lines = vec![line(0, 100, "make all"), line(1, 101, "cc -c <a>.c")];
    lines.extend((0..PROCESSES_PER_COMMAND).map(|i| line(2, 200 + i as u32, "as")));
    inp.processes.insert(1, lines);
    let html = page(&inp);
    let data: Value = serde_json::from_str(embedded_json(&html)).unwrap();
    let c = &data["commands"][0];
    assert_eq!(c["n_p"], PROCESSES_PER_COMMAND + 2);
    assert_eq!(c["p"].as_array().unwrap().len(), PROCESSES_PER_COMMAND);
    assert_eq!(c["p"][1], serde_json::json!([1, 101, "cc -c <a>.c", 1]));
    assert!(!html.contains("cc -c <a>"), "markup stays data");
    // A command without recorded processes carries none.
    assert!(data["commands"][1].get("p").is_none());
}

/// A command's details show its environment and programs; an environment
/// shared by several commands is embedded once.
#[test]
fn environments_are_embedded_once_and_shown_per_command() {
    use crate::CommandEnvironment;
    use prov_model::env::{Environment, GitState};
    let env = Environment {
        vars: b"PATH=/usr/bin\0SLURM_JOB_ID=4242\0".to_vec(),
        git: Some(GitState {
            root: b"/home/u/proj".to_vec(),
            commit: Some("ab".repeat(20)),
            branch: Some("main".into()),
            dirty: Some(true),
        }),
    };
    let tool = prov_store::Executable {
        path: b"/usr/bin/samtools".to_vec(),
        file: Some(prov_model::ExeFile {
            size: 1234,
            mtime_ns: 0,
            hash: Some(0xfeed),
            hash_params: HashParams::default(),
        }),
    };
    let mut inp = input(vec![
        (command(1, "s", 1, b"a"), vec![]),
        (command(2, "s", 2, b"b"), vec![]),
        (command(3, "s", 3, b"c"), vec![]),
    ]);
    for id in [1, 2] {
        inp.environments
            .insert(id, CommandEnvironment { env: Some((7, env.clone())), executables: vec![tool.clone()] });
    }
    let v: Value = serde_json::from_str(embedded_json(&page(&inp))).unwrap();
    assert_eq!(v["envs"].as_array().unwrap().len(), 1);
    assert_eq!(v["envs"][0][1], "SLURM_JOB_ID=4242");
    assert_eq!(v["envs"][0][2], format!("git: /home/u/proj {} (main), dirty", "ab".repeat(6)));
    assert_eq!((&v["commands"][0]["env"], &v["commands"][1]["env"]), (&0.into(), &0.into()));
    assert!(v["commands"][2].get("env").is_none());
    assert_eq!(v["commands"][0]["x"][0], "/usr/bin/samtools  1234 bytes  hash 000000000000feed");
}
