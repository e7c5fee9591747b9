//! A report of 10 000 commands (and one of 100 000 files) in headless
//! Chromium: it loads, draws, zooms and answers a click. Prints the page's
//! size and timings; asserts behaviour, never times. Needs Debian's
//! chromium and chromium-driver (.ci/run installs them).

mod webdriver;

use std::time::{Duration, Instant};

use prov_model::{Access, Completeness, HashParams};
use prov_report::{write_report, ArchivedScript, ReportInput};
use prov_store::{CommandRow, FileRow};
use webdriver::Browser;

const COMMANDS: usize = 10_000;
const SESSIONS: usize = 20;
const HUGE_FILES: usize = 100_000;

/// A month of work: sessions of a day or so, commands seconds apart with
/// idle nights in between; the 5000th command copies a tree of 100 000 files.
fn month_of_records() -> Vec<(CommandRow, Vec<FileRow>)> {
    let verbs = ["make -j8", "cargo build", "grep -rn TODO src", "vim notes.md", "python3 gen.py", "git status"];
    let t0: i64 = 1_760_000_000 * 1_000_000_000;
    let mut records = Vec::with_capacity(COMMANDS);
    let mut event_id = 0;
    for k in 0..COMMANDS {
        let id = k as i64 + 1;
        let session = k * SESSIONS / COMMANDS;
        // 500 commands per session, 20 s apart, sessions a day and a half apart.
        let start_ns = t0 + (session as i64) * 129_600 * 1_000_000_000 + (k % 500) as i64 * 20_000_000_000;
        let project = k % 7;
        let command = CommandRow {
            id,
            uuid: format!("uuid-{id}"),
            session: format!("0192a6c4-0000-7000-8000-{session:012x}"),
            seq: (k % 500) as u64 + 1,
            text: format!("{} # step {k}", verbs[k % verbs.len()]).into_bytes(),
            cwd: format!("/home/dev/proj{project}").into_bytes(),
            host: format!("host{}", session % 3),
            user: "dev".into(),
            shell: ["bash", "zsh"][session % 2].into(),
            start_ns,
            end_ns: Some(start_ns + ((k % 13) as i64 + 1) * 700_000_000),
            exit_status: Some(if k % 17 == 0 { 1 } else { 0 }),
            completeness: Completeness::default(),
            incomplete: None,
            untraced: None,
        };
        let n_files = if k == COMMANDS / 2 { HUGE_FILES } else { 1 + k % 8 };
        let files = (0..n_files)
            .map(|f| {
                event_id += 1;
                FileRow {
                    id: event_id,
                    command_id: id,
                    access: if f % 3 == 0 { Access::Write } else { Access::Read },
                    path: format!("/home/dev/proj{project}/src/mod{}/file{f}.rs", f % 40).into_bytes(),
                    size: (f as u64 + 1) * 1000,
                    mtime_ns: start_ns - 1_000_000_000,
                    hash: Some((f as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ id as u64),
                    hash_params: HashParams::default(),
                    pid: Some(1000 + f as u32),
                }
            })
            .collect();
        records.push((command, files));
    }
    records
}

#[test]
fn ten_thousand_commands_load_draw_zoom_and_click() {
    let records = month_of_records();
    let huge_id = records[COMMANDS / 2].0.id;
    // Every python3 command ran gen.py, archived once for all of them.
    let gen_py = ArchivedScript { path: b"/home/dev/gen.py".to_vec(), text: "print('</script>')\n".repeat(50) };
    let archived = records
        .iter()
        .filter(|(c, _)| c.text.starts_with(b"python3"))
        .map(|(c, _)| (c.id, vec![gen_py.clone()]))
        .collect();
    let input = ReportInput {
        title: "a month of work".into(),
        description: "synthetic".into(),
        generated_ns: 1_763_000_000 * 1_000_000_000,
        records,
        archived,
        files_per_access: None,
        processes: Default::default(),
        include_prov: false,
        writers: Default::default(),
        lineages: Default::default(),
        environments: Default::default(),
    };
    let out_dir = webdriver::test_output_dir(env!("CARGO_TARGET_TMPDIR"));
    let page = out_dir.join("report-10000.html");
    let started = Instant::now();
    let mut file = std::io::BufWriter::new(std::fs::File::create(&page).unwrap());
    write_report(&input, &mut file).unwrap();
    drop(file);
    let size = std::fs::metadata(&page).unwrap().len();
    println!("report of {COMMANDS} commands: {} ({size} bytes) written in {:?}", page.display(), started.elapsed());

    let browser = Browser::start();
    let opened = Instant::now();
    browser.open(&page);
    let ready_ms = browser.wait_for("return document.body.dataset.ready", Duration::from_secs(60));
    println!("loaded and drawn in {:?} (script ready at {ready_ms} ms after navigation start)", opened.elapsed());

    let lanes = browser.eval("return document.getElementById('tl-canvas').dataset.lanes");
    assert_eq!(lanes, SESSIONS.to_string());
    let counted = browser.eval("return document.getElementById('list-count').textContent");
    assert_eq!(counted, format!("{COMMANDS} commands, newest first"));
    // The list is virtual: a screenful of rows, not 10 000.
    let rows = browser.find_all("#list .row").len();
    assert!((5..100).contains(&rows), "{rows} rows in the DOM");
    let in_view: usize =
        browser.eval("return +document.getElementById('tl-canvas').dataset.inView").as_u64().unwrap() as usize;
    assert!(in_view > 0, "no command drawn in view");

    let redraw = browser.eval("const t = performance.now(); provReport.redraw(); return performance.now() - t");
    println!("one full redraw at fit: {redraw} ms, {in_view} commands in view");

    // Zoom in with the button: fewer commands in view, still drawn.
    let zoom_in = &browser.find_all("#zoom-in")[0];
    for _ in 0..6 {
        browser.click(zoom_in);
    }
    let zoomed = browser.wait_for(
        &format!("const n = +document.getElementById('tl-canvas').dataset.inView; return n < {in_view} && n"),
        Duration::from_secs(10),
    );
    println!("after zooming in 64x: {zoomed} commands in view");
    browser.click(&browser.find_all("#zoom-fit")[0]);

    // Click where a box is drawn: the details are of the command hit there.
    browser.click_timeline_box(huge_id);
    let details = browser.wait_for(
        &format!("return document.getElementById('details').dataset.command == {huge_id} && document.getElementById('details').innerText"),
        Duration::from_secs(10),
    );
    let details = details.as_str().unwrap();
    let shown = prov_report::model::FILES_PER_ACCESS;
    let writes = HUGE_FILES.div_ceil(3);
    assert!(details.contains(&format!("Files written ({writes})")), "{details}");
    assert!(details.contains(&format!("and {} more", writes - shown)), "{details}");
    let written_rows = browser.eval("return document.querySelectorAll('#details table.written tr.file').length");
    assert_eq!(written_rows, shown);

    // An archived script: collapsed until its name is clicked.
    // "python3 gen.py" is verb 4 (k % 6 == 4), ids are k + 1: k = 5002 is
    // two rows from the huge command, where the click scrolled the list.
    let python = huge_id + 2;
    browser.click(&browser.find_all(&format!("#list .row[data-id='{python}']"))[0]);
    browser.wait_for(
        &format!("return document.getElementById('details').dataset.command === '{python}'"),
        Duration::from_secs(10),
    );
    let script = browser.eval("const s = document.querySelector('#details details.script'); return [s.open, s.querySelector('summary').textContent]");
    assert_eq!(script, serde_json::json!([false, "/home/dev/gen.py"]));
    browser.click(&browser.find_all("#details details.script summary")[0]);
    let text = browser.eval("const s = document.querySelector('#details details.script'); return s.open && s.querySelector('pre').textContent");
    assert_eq!(text.as_str().unwrap(), gen_py.text);

    // Filtering 10 000 commands by text.
    let filter = &browser.find_all("#filter")[0];
    let typed = Instant::now();
    browser.type_into(filter, "step 4999");
    let matched = browser.wait_for(
        "const t = document.getElementById('list-count').textContent; return t.includes('match') && t",
        Duration::from_secs(10),
    );
    assert_eq!(matched, format!("1 of {COMMANDS} commands match"));
    println!("filter applied in {:?}", typed.elapsed());

    let png = browser.screenshot();
    let shot = out_dir.join("report-10000.png");
    std::fs::write(&shot, &png).unwrap();
    println!("screenshot: {}", shot.display());
}
