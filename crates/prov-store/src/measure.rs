//! Measurements of the store at scale: bytes per event and insert rate,
//! and lookups over the filled tables. Ignored by default (they take a while
//! in a debug build and print numbers for a human); run them with
//!   cargo test -p prov-store --release -- --ignored --nocapture size_per_event
//! PROV_STORE_BENCH_EVENTS, PROV_STORE_BENCH_KERNEL_FILES and
//! PROV_STORE_BENCH_BATCH change the scale (see each test).

use std::time::{Duration, Instant};

use prov_model::{Access, FileEvent, HashParams};

use crate::testutil::{begin, open, Rng, TempDir};
use crate::Store;

/// Realistic-ish events: a few hundred directories under a home directory,
/// short file names, random hashes, sizes and mtimes.
fn synthetic_events(rng: &mut Rng, n: usize) -> Vec<FileEvent> {
    (0..n)
        .map(|_| {
            let r = rng.next();
            let dir = r % 300;
            let path = format!("/home/user/projects/app/src/module{dir}/file_{}.rs", (r >> 16) % 5000);
            FileEvent {
                access: if r >> 60 < 4 { Access::Write } else { Access::Read },
                path: path.into_bytes(),
                size: rng.next() % 2_000_000,
                mtime_ns: 1_700_000_000_000_000_000 + (rng.next() % 100_000_000_000_000_000) as i64,
                hash: Some(rng.next()),
                hash_params: HashParams::default(),
                pid: Some(1000 + (r >> 32) as u32 % 400_000),
            }
        })
        .collect()
}

fn pages(s: &Store) -> i64 {
    s.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap()
}

/// Environment overrides for the measurements below.
fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok())
}

/// Adds `events` in batches of `batch`, spread round-robin over `commands`
/// commands; prints bytes per event (all tables and indexes) with a
/// breakdown, and the insert rate overall and for each tenth of the events.
/// Returns bytes per event.
fn fill_and_measure(label: &str, s: &mut Store, events: &[FileEvent], batch: usize, commands: &[i64]) -> f64 {
    let n = events.len();
    s.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    let before = pages(s);
    let mut tenths = Vec::new();
    let start = Instant::now();
    let mut tenth_start = (start, 0);
    for (k, chunk) in events.chunks(batch).enumerate() {
        s.add_events(commands[k % commands.len()], chunk).unwrap();
        let done = (k * batch + chunk.len()).min(n);
        if done * 10 / n > tenth_start.1 * 10 / n || done == n {
            let rate = (done - tenth_start.1) as f64 / tenth_start.0.elapsed().as_secs_f64();
            tenths.push(format!("{:.0}k", rate / 1000.0));
            tenth_start = (Instant::now(), done);
        }
    }
    let took = start.elapsed();
    s.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    let page_size: i64 = s.conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let bytes_per_event = ((pages(s) - before) * page_size) as f64 / n as f64;
    let mut breakdown = s.conn.prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").unwrap();
    let parts: Vec<String> = breakdown
        .query_map([], |r| Ok(format!("{} {:.1}", r.get::<_, String>(0)?, r.get::<_, f64>(1)? / n as f64)))
        .unwrap()
        .map(Result::unwrap)
        .filter(|p| !p.ends_with(" 0.0"))
        .collect();
    println!(
        "{label}: {n} events in batches of {batch}: {bytes_per_event:.1} bytes/event ({}); \
         insert {:.0} events/s (per tenth, events/s: {})",
        parts.join(", "),
        n as f64 / took.as_secs_f64(),
        tenths.join(" ")
    );
    bytes_per_event
}

/// Times `f` (a lookup) as the best of 5 runs.
fn best_of_5<T>(mut f: impl FnMut() -> T) -> (T, Duration) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..5 {
        let start = Instant::now();
        out = Some(f());
        best = best.min(start.elapsed());
    }
    (out.unwrap(), best)
}

#[test]
#[ignore = "a measurement: see the module docs for how to run it"]
fn size_per_event_and_insert_rate() {
    // PROV_STORE_BENCH_EVENTS=1000000 to measure at a larger scale,
    // PROV_STORE_BENCH_BATCH=65536 for the collector's largest transactions.
    let n = env_usize("PROV_STORE_BENCH_EVENTS").unwrap_or(100_000);
    let batch = env_usize("PROV_STORE_BENCH_BATCH").unwrap_or(4096);
    let dir = TempDir::new("size");
    let mut s = open(&dir);
    let mut rng = Rng(42);
    let events = synthetic_events(&mut rng, n);
    // Several commands, as in real use.
    let ids: Vec<i64> = (0..10).map(|i| s.begin_command(&begin(&format!("c{i}"), i)).unwrap()).collect();
    let bytes_per_event = fill_and_measure("synthetic", &mut s, &events, batch, &ids);
    assert!(bytes_per_event < 200.0, "{bytes_per_event} bytes/event");

    // Lookups on the filled table.
    let probe = &events[n / 2];
    let (by_content, t_content) = best_of_5(|| {
        s.find_file_events(probe.access, &[(probe.hash.unwrap(), probe.size, probe.hash_params)], None, Some(20))
            .unwrap()
    });
    let (by_path, t_path) = best_of_5(|| s.find_file_events(probe.access, &[], Some(&probe.path), Some(20)).unwrap());
    // The command of the middle batch (batches go to the commands in turn).
    let k = n / 2 / batch % ids.len();
    let (files, t_files) = best_of_5(|| s.files_of(ids[k]).unwrap());
    println!(
        "lookups over {n} events: by content {t_content:?}, by path {t_path:?}, \
         files_of ({} events) {t_files:?}",
        files.len()
    );
    assert_eq!(by_content.len(), 1);
    assert!(by_content[0].1.iter().any(|f| f.path == probe.path));
    assert!(!by_path.is_empty());
    assert!(by_path.iter().flat_map(|(_, f)| f).all(|f| f.path == probe.path));
    let expected = events.chunks(batch).skip(k).step_by(ids.len()).map(<[_]>::len).sum::<usize>();
    assert_eq!(files.len(), expected);
}

#[test]
#[ignore = "a measurement: see the module docs for how to run it"]
fn size_per_event_of_a_kernel_copy() {
    // One `cp -r` of a kernel tree: every path new, written once.
    let n = env_usize("PROV_STORE_BENCH_KERNEL_FILES").unwrap_or(80_000);
    let batch = env_usize("PROV_STORE_BENCH_BATCH").unwrap_or(4096);
    let dir = TempDir::new("kernel");
    let mut s = open(&dir);
    let start_ns = 1_750_000_000_000_000_000;
    let id = s.begin_command(&begin("cp", start_ns)).unwrap();
    let events = crate::testutil::kernel_copy_events(&mut Rng(7), n, start_ns);
    let bytes_per_event = fill_and_measure("kernel copy", &mut s, &events, batch, &[id]);
    assert!(bytes_per_event < 200.0, "{bytes_per_event} bytes/event");
    let (files, t_files) = best_of_5(|| s.files_of(id).unwrap());
    println!("files_of the copy: {} events in {t_files:?}", files.len());
    let mut want: Vec<&[u8]> = events.iter().map(|e| &e.path[..]).collect();
    want.sort();
    assert!(files.iter().map(|f| &f.path[..]).eq(want.iter().copied()));
}
