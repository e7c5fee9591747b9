//! Fills a prov database with synthetic but realistic records, through the
//! store's public API, for the query-latency benchmark (benches/).
//!
//!     cargo run --release -p prov-store --example gen_db -- PATH N_EVENTS [EVENTS_PER_COMMAND]
//!
//! Commands look like a developer's day: builds, greps, editors, copies; each
//! reads and writes files spread over a few thousand directories of a few
//! projects, with a realistic share of repeated paths (the same sources are
//! read by many builds) and of repeated content (copies share a hash). The
//! sequence is deterministic, so every run produces the same database and
//! benches/ can name a file it knows was written and read.
//!
//! Prints one JSON line: commands, events, seconds, events_per_s, and a few
//! sample paths (a written one, a read one) for the queries to ask about.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use prov_model::{Access, CommandBegin, CommandEnd, Completeness, FileEvent, HashParams};
use prov_store::Store;

const DEFAULT_EVENTS_PER_COMMAND: usize = 50;
const PROJECTS: usize = 8;
const DIRS_PER_PROJECT: usize = 400; // 3 200 directories in all
const FILES_PER_DIR: usize = 40;
const VERBS: &[&str] =
    &["make -j8", "cargo build", "grep -rn TODO", "cp -r", "vim", "python3 gen.py", "tar xf", "git checkout"];

/// A deterministic pseudo-random sequence (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct Args {
    path: PathBuf,
    events: usize,
    per_command: usize,
}

fn parse_args() -> Args {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!("usage: gen_db PATH N_EVENTS [EVENTS_PER_COMMAND]");
        std::process::exit(2);
    }
    let num = |s: &str| {
        s.replace('_', "").parse::<usize>().unwrap_or_else(|_| {
            eprintln!("gen_db: not a number: {s}");
            std::process::exit(2)
        })
    };
    Args {
        path: PathBuf::from(&a[0]),
        events: num(&a[1]),
        per_command: a.get(2).map_or(DEFAULT_EVENTS_PER_COMMAND, |s| num(s)).max(1),
    }
}

fn dir_path(project: usize, dir: usize) -> String {
    // Nested a few levels, like a source tree: src/mod3/sub17
    format!("/home/dev/proj{project}/src/mod{}/sub{dir}", dir % 23)
}

fn file_path(project: usize, dir: usize, file: usize) -> Vec<u8> {
    let ext = ["c", "h", "rs", "o", "py", "txt"][file % 6];
    format!("{}/file{file}.{ext}", dir_path(project, dir)).into_bytes()
}

/// Content hash of a file "version": the same (path, version) always
/// gives the same hash, so reads after a write find the writer by content.
fn content_hash(path: &[u8], version: u64) -> u64 {
    let mut r =
        Rng(version
            ^ path.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)));
    r.next()
}

fn make_command(rng: &mut Rng, seq: u64, start_ns: i64) -> (CommandBegin, usize) {
    let project = rng.below(PROJECTS);
    let verb = VERBS[rng.below(VERBS.len())];
    let begin = CommandBegin {
        uuid: format!("00000000-0000-7000-8000-{seq:012x}"),
        session: format!("gen-session-{}", seq / 200),
        seq: seq % 200,
        text: format!("{verb} target{}", rng.below(1000)).into_bytes(),
        cwd: format!("/home/dev/proj{project}").into_bytes(),
        host: "benchhost".into(),
        user: "dev".into(),
        shell: "bash".into(),
        start_ns,
        env: None,
    };
    (begin, project)
}

fn make_events(rng: &mut Rng, project: usize, n: usize, seq: u64, mtime_ns: i64) -> Vec<FileEvent> {
    // A command works in a handful of neighbouring directories.
    let base_dir = rng.below(DIRS_PER_PROJECT);
    (0..n)
        .map(|i| {
            let dir = (base_dir + rng.below(6)) % DIRS_PER_PROJECT;
            let file = rng.below(FILES_PER_DIR);
            let path = file_path(project, dir, file);
            // About one event in four is a write; a file's content changes
            // every ~500 commands, so many reads share the hash of one write.
            let access = if i % 4 == 3 { Access::Write } else { Access::Read };
            let version = seq / 500;
            FileEvent {
                hash: Some(content_hash(&path, version)),
                path,
                access,
                size: 200 + rng.below(60_000) as u64,
                mtime_ns,
                hash_params: HashParams::default(),
                pid: Some(1000 + (seq % 30_000) as u32),
            }
        })
        .collect()
}

fn main() {
    let args = parse_args();
    let mut store = Store::open(&args.path, Duration::from_secs(30)).unwrap_or_else(|e| {
        eprintln!("gen_db: {e}");
        std::process::exit(1)
    });
    let mut rng = Rng(42);
    let commands = args.events.div_ceil(args.per_command);
    // Start a week ago, a command every ~3 s.
    let t0 = 1_700_000_000_000_000_000i64;
    let started = Instant::now();
    let mut written = 0usize;
    for seq in 0..commands as u64 {
        let start_ns = t0 + seq as i64 * 3_000_000_000;
        let (begin, project) = make_command(&mut rng, seq, start_ns);
        let n = args.per_command.min(args.events - written);
        let events = make_events(&mut rng, project, n, seq, start_ns);
        let id = store.begin_command(&begin).and_then(|id| {
            store.add_events(id, &events)?;
            store.set_completeness(id, &Completeness::default())?;
            store.end_command(id, &CommandEnd::with_status(start_ns + 1_500_000_000, 0))?;
            Ok(id)
        });
        if let Err(e) = id {
            eprintln!("gen_db: {e}");
            std::process::exit(1);
        }
        written += n;
    }
    let secs = started.elapsed().as_secs_f64();
    // Command 0's events are deterministic: event 3 is a write, event 0 a read.
    let mut r = Rng(42);
    let (_, project) = make_command(&mut r, 0, t0);
    let sample = make_events(&mut r, project, args.per_command.min(4), 0, t0);
    let show = |i: usize| sample.get(i).map(|e| String::from_utf8_lossy(&e.path).into_owned());
    println!(
        "{{\"commands\": {commands}, \"events\": {written}, \"seconds\": {secs:.3}, \"events_per_s\": {:.0}, \"sample_write\": {:?}, \"sample_read\": {:?}}}",
        written as f64 / secs,
        show(3).unwrap_or_default(),
        show(0).unwrap_or_default(),
    );
}
