//! Behaviour of the store as a whole: schema, writes, queries, spool.

use std::time::{Duration, Instant};

use prov_model::{Access, CommandEnd, Completeness, FileEvent, HashParams};
use rusqlite::Connection;

use crate::query::{
    command_sql, file_sql, BY_COMMAND_WHERE, BY_CONTENT_WHERE, BY_PATH_WHERE, HISTORY_TAIL,
};
use crate::testutil::{begin, event, Rng, TempDir};
use crate::{spool, SpoolEntry, SpoolWriter, Store, StoreError, SCHEMA_VERSION};

const T: Duration = Duration::from_secs(5);

fn open(dir: &TempDir) -> Store {
    Store::open(&dir.db(), T).unwrap()
}

#[test]
fn migrations_twice_are_idempotent() {
    let dir = TempDir::new("migrate");
    let mut s = open(&dir);
    let id = s.begin_command(&begin("u1", 1)).unwrap();
    drop(s);
    let mut s = open(&dir);
    crate::schema::migrate(&mut s.conn, &dir.db()).unwrap();
    assert_eq!(crate::schema::user_version(&s.conn, &dir.db()).unwrap(), SCHEMA_VERSION);
    assert_eq!(s.command(id).unwrap().unwrap().uuid, "u1");
}

#[test]
fn open_creates_a_private_parent_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("parent");
    let db = dir.path().join("a/b/prov.db");
    Store::open(&db, T).unwrap();
    let mode = std::fs::metadata(dir.path().join("a/b")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn newer_schema_is_refused() {
    let dir = TempDir::new("newer");
    drop(open(&dir));
    Connection::open(dir.db())
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    for err in
        [Store::open(&dir.db(), T).err().unwrap(), Store::open_read_only(&dir.db()).err().unwrap()]
    {
        assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("written by a newer prov (schema {})", SCHEMA_VERSION + 1)),
            "{msg}"
        );
        assert!(msg.contains(&dir.db().display().to_string()), "{msg}");
    }
}

#[test]
fn read_only_open_of_a_missing_database_says_so() {
    let dir = TempDir::new("missing");
    let err = Store::open_read_only(&dir.db()).err().unwrap();
    assert!(matches!(err, StoreError::NoDatabase(ref p) if *p == dir.db()), "{err}");
    assert!(!dir.db().exists());
}

#[test]
fn read_only_open_migrates_an_empty_database() {
    let dir = TempDir::new("empty");
    std::fs::write(dir.db(), b"").unwrap();
    let s = Store::open_read_only(&dir.db()).unwrap();
    assert!(s.history(None).unwrap().is_empty());
}

#[test]
fn command_round_trip() {
    let dir = TempDir::new("roundtrip");
    let mut s = open(&dir);
    let b = begin("u1", 1_000);
    let id = s.begin_command(&b).unwrap();
    let running = s.command(id).unwrap().unwrap();
    assert_eq!((running.end_ns, running.exit_status), (None, None));
    assert!(running.completeness.is_complete());

    let mut unreadable = event(Access::Read, b"/data/in.csv", 0, 12);
    unreadable.hash = None;
    unreadable.pid = None;
    unreadable.hash_params = HashParams { chunk_size: 4096, chunks: 5 };
    let events = vec![
        event(Access::Write, b"/data/out.csv", u64::MAX, u64::MAX),
        unreadable,
        event(Access::Read, b"/top", 1 << 63, 0),
    ];
    s.add_events(id, &events).unwrap();
    let c =
        Completeness { queue_overflows: 1, denied: 2, unmarked_mounts: 3, ..Default::default() };
    s.set_completeness(id, &Completeness { unreadable: 9, ..Default::default() }).unwrap();
    s.set_completeness(id, &c).unwrap();
    s.end_command(id, &CommandEnd { end_ns: 2_000, exit_status: 130, text: Some(b"typed later".to_vec()) }).unwrap();

    let row = s.command(id).unwrap().unwrap();
    assert_eq!(
        (row.id, &row.uuid, &row.session, row.seq, &row.cwd),
        (id, &b.uuid, &b.session, b.seq, &b.cwd)
    );
    assert_eq!(row.text, b"typed later", "a text given at the end replaces the begin's");
    assert_eq!(
        (&row.host, &row.user, &row.shell, row.start_ns),
        (&b.host, &b.user, &b.shell, b.start_ns)
    );
    assert_eq!((row.end_ns, row.exit_status, row.completeness), (Some(2_000), Some(130), c));

    let files = s.files_of(id).unwrap();
    let back: Vec<FileEvent> = files
        .iter()
        .map(|f| FileEvent {
            access: f.access,
            path: f.path.clone(),
            size: f.size,
            mtime_ns: f.mtime_ns,
            hash: f.hash,
            hash_params: f.hash_params,
            pid: f.pid,
        })
        .collect();
    // Reads first, each access by path.
    assert_eq!(back, vec![events[1].clone(), events[2].clone(), events[0].clone()]);
    assert!(files.iter().all(|f| f.command_id == id));
    assert_eq!(
        s.hash_params_in_use().unwrap(),
        vec![HashParams::default(), HashParams { chunk_size: 4096, chunks: 5 }]
    );
}

#[test]
fn unknown_command_is_an_error() {
    let dir = TempDir::new("unknown");
    let mut s = open(&dir);
    let err = s.end_command(99, &CommandEnd { end_ns: 1, exit_status: 0, text: None }).unwrap_err();
    assert!(matches!(err, StoreError::NoCommand { id: 99, .. }), "{err}");
    assert!(s.add_events(99, &[event(Access::Read, b"/x", 1, 1)]).is_err());
    assert_eq!(
        s.conn.query_row("SELECT count(*) FROM file_events", [], |r| r.get::<_, i64>(0)).unwrap(),
        0
    );
}

#[test]
fn non_utf8_bytes_round_trip_exactly() {
    let dir = TempDir::new("bytes");
    let mut s = open(&dir);
    let mut b = begin("u1", 1);
    b.text = b"cat \xff\xfe\n\0x".to_vec();
    b.cwd = b"/home/\xe9t\xe9".to_vec();
    let id = s.begin_command(&b).unwrap();
    let paths: Vec<&[u8]> =
        vec![b"/home/\xe9t\xe9/\x80\x81 name\n", b"/\xff", b"/a/\xc3\x28/b\xa0\xa1"];
    let events: Vec<FileEvent> = paths.iter().map(|p| event(Access::Write, p, 5, 5)).collect();
    s.add_events(id, &events).unwrap();
    let row = s.command(id).unwrap().unwrap();
    assert_eq!((row.text, row.cwd), (b.text, b.cwd));
    let mut got: Vec<Vec<u8>> = s.files_of(id).unwrap().into_iter().map(|f| f.path).collect();
    let mut want: Vec<Vec<u8>> = paths.iter().map(|p| p.to_vec()).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    for p in paths {
        let found = s.find_file_events(Access::Write, &[], Some(p), None).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1[0].path, p);
    }
}

#[test]
fn find_by_content_and_by_path() {
    let dir = TempDir::new("find");
    let mut s = open(&dir);
    let p = HashParams::default();
    // c1 writes data.csv; c2 renames it (writes report.csv, same content);
    // c3 reads the renamed file; c4 writes data.csv again with new content.
    let c1 = s.begin_command(&begin("c1", 10)).unwrap();
    s.add_events(c1, &[event(Access::Write, b"/w/data.csv", 0xAA, 100)]).unwrap();
    let c2 = s.begin_command(&begin("c2", 20)).unwrap();
    s.add_events(c2, &[event(Access::Write, b"/w/report.csv", 0xAA, 100)]).unwrap();
    let c3 = s.begin_command(&begin("c3", 30)).unwrap();
    s.add_events(c3, &[event(Access::Read, b"/w/report.csv", 0xAA, 100)]).unwrap();
    let c4 = s.begin_command(&begin("c4", 40)).unwrap();
    s.add_events(
        c4,
        &[
            event(Access::Write, b"/w/data.csv", 0xBB, 100),
            event(Access::Write, b"/w/other", 0xAA, 101),
        ],
    )
    .unwrap();

    let ids = |r: Vec<(crate::CommandRow, Vec<crate::FileRow>)>| -> Vec<(i64, Vec<Vec<u8>>)> {
        r.into_iter().map(|(c, f)| (c.id, f.into_iter().map(|f| f.path).collect())).collect()
    };
    // By content: the rename is found; size and params must match too.
    let found = s.find_file_events(Access::Write, &[(0xAA, 100, p)], None, None).unwrap();
    assert_eq!(
        ids(found),
        vec![(c2, vec![b"/w/report.csv".to_vec()]), (c1, vec![b"/w/data.csv".to_vec()])]
    );
    let other_params = HashParams { chunk_size: 1, chunks: 1 };
    assert!(s
        .find_file_events(Access::Write, &[(0xAA, 100, other_params)], None, None)
        .unwrap()
        .is_empty());
    // By path.
    let found = s.find_file_events(Access::Write, &[], Some(b"/w/data.csv"), None).unwrap();
    assert_eq!(
        ids(found),
        vec![(c4, vec![b"/w/data.csv".to_vec()]), (c1, vec![b"/w/data.csv".to_vec()])]
    );
    assert!(s.find_file_events(Access::Write, &[], Some(b"/nowhere/x"), None).unwrap().is_empty());
    // Either; an event matching both keys is listed once; limit.
    let found = s
        .find_file_events(
            Access::Write,
            &[(0xAA, 100, p), (0xAA, 100, p)],
            Some(b"/w/data.csv"),
            Some(2),
        )
        .unwrap();
    assert_eq!(
        ids(found),
        vec![(c4, vec![b"/w/data.csv".to_vec()]), (c2, vec![b"/w/report.csv".to_vec()])]
    );
    let found =
        s.find_file_events(Access::Write, &[(0xAA, 100, p)], Some(b"/w/data.csv"), None).unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(found[2].1.len(), 1);
    // Access is respected.
    let found = s.find_file_events(Access::Read, &[(0xAA, 100, p)], None, None).unwrap();
    assert_eq!(ids(found), vec![(c3, vec![b"/w/report.csv".to_vec()])]);
}

#[test]
fn results_are_newest_first() {
    let dir = TempDir::new("order");
    let mut s = open(&dir);
    // Inserted out of time order (as spooled records are); ties by id.
    let a = s.begin_command(&begin("a", 300)).unwrap();
    let b = s.begin_command(&begin("b", 100)).unwrap();
    let c = s.begin_command(&begin("c", 300)).unwrap();
    let d = s.begin_command(&begin("d", 200)).unwrap();
    for id in [a, b, c, d] {
        s.add_events(id, &[event(Access::Read, b"/f", 1, 1)]).unwrap();
    }
    let hist: Vec<i64> = s.history(None).unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(hist, vec![c, a, d, b]);
    let hist: Vec<i64> = s.history(Some(2)).unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(hist, vec![c, a]);
    let found: Vec<i64> = s
        .find_file_events(Access::Read, &[], Some(b"/f"), None)
        .unwrap()
        .into_iter()
        .map(|r| r.0.id)
        .collect();
    assert_eq!(found, vec![c, a, d, b]);
}

#[test]
fn begin_command_is_idempotent_by_uuid() {
    let dir = TempDir::new("idem");
    let mut s = open(&dir);
    let id = s.begin_command(&begin("same", 1)).unwrap();
    assert_eq!(s.begin_command(&begin("same", 999)).unwrap(), id);
    assert_eq!(s.history(None).unwrap().len(), 1);
    assert_eq!(s.command(id).unwrap().unwrap().start_ns, 1);
}

#[test]
fn queries_use_the_indexes() {
    let dir = TempDir::new("plan");
    let s = open(&dir);
    let plan = |sql: &str| -> String {
        let mut st = s.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let n = st.parameter_count();
        let rows: Vec<String> = st
            .query_map(rusqlite::params_from_iter(vec![1i64; n]), |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.join("; ")
    };
    let p = plan(&file_sql(BY_CONTENT_WHERE));
    assert!(p.contains("USING INDEX file_events_content (hash=? AND size=?)"), "{p}");
    let p = plan(&file_sql(BY_PATH_WHERE));
    assert!(p.contains("USING INDEX file_events_path (name=? AND dir_id=?)"), "{p}");
    let p = plan(&file_sql(BY_COMMAND_WHERE));
    assert!(p.contains("USING INDEX file_events_command (command_id=?)"), "{p}");
    let p = plan(&command_sql(HISTORY_TAIL));
    assert!(p.contains("SCAN c USING INDEX commands_start") && !p.contains("TEMP B-TREE"), "{p}");
    let p = plan("SELECT id FROM dirs WHERE path = ?1");
    assert!(p.contains("USING COVERING INDEX sqlite_autoindex_dirs_1"), "{p}");
    let p = plan("SELECT id FROM commands WHERE uuid = ?1");
    assert!(p.contains("USING COVERING INDEX sqlite_autoindex_commands_1"), "{p}");
}

#[test]
fn locked_database_fails_within_the_busy_timeout() {
    let dir = TempDir::new("locked");
    drop(open(&dir));
    let other = Connection::open(dir.db()).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let timeout = Duration::from_millis(200);
    let start = Instant::now();
    let err = Store::open(&dir.db(), timeout)
        .and_then(|mut s| s.begin_command(&begin("u", 1)))
        .unwrap_err();
    let took = start.elapsed();
    assert!(err.is_busy(), "{err}");
    assert!(err.to_string().contains(&dir.db().display().to_string()), "{err}");
    assert!(took >= timeout / 2 && took < timeout * 5, "took {took:?}");
    other.execute_batch("COMMIT").unwrap();
}

#[test]
fn read_only_database_gives_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("readonly");
    drop(open(&dir));
    // A read-only connection (what a query holds) cannot write.
    let mut ro = Store::open_read_only(&dir.db()).unwrap();
    let start = Instant::now();
    let err = ro.begin_command(&begin("u", 1)).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(err.to_string().contains("readonly"), "{err}");
    drop(ro);
    // A read-only directory and file; root ignores permissions, so only
    // check when they are in force.
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).unwrap();
    let db = sub.join("prov.db");
    drop(Store::open(&db, T).unwrap());
    for f in ["prov.db-wal", "prov.db-shm"] {
        let _ = std::fs::remove_file(sub.join(f));
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o400)).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o500)).unwrap();
    let enforced = std::fs::write(sub.join("probe"), b"").is_err();
    if enforced {
        let start = Instant::now();
        let r = Store::open(&db, Duration::from_millis(200))
            .and_then(|mut s| s.begin_command(&begin("u", 1)));
        assert!(r.is_err());
        assert!(start.elapsed() < Duration::from_secs(2));
    } else {
        eprintln!("running as root: permission check skipped");
    }
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// Writes the same record directly and through the spool.
fn sample_record() -> Vec<SpoolEntry> {
    let mut b = begin("0190a1b2-0000-7000-8000-000000000001", 500);
    b.text = b"sort \xff > out".to_vec();
    vec![
        SpoolEntry::Begin(b),
        SpoolEntry::Events(vec![
            event(Access::Read, b"/in/\xfe", 1, 2),
            event(Access::Write, b"/out", 3, 4),
        ]),
        SpoolEntry::Events(vec![event(Access::Write, b"/out2", 5, 6)]),
        SpoolEntry::Completeness(Completeness { denied: 1, ..Default::default() }),
        SpoolEntry::End(CommandEnd { end_ns: 900, exit_status: 1, text: None }),
    ]
}

fn apply_directly(s: &mut Store, entries: &[SpoolEntry]) -> i64 {
    let mut id = 0;
    for e in entries {
        match e {
            SpoolEntry::Begin(b) => id = s.begin_command(b).unwrap(),
            SpoolEntry::Events(ev) => s.add_events(id, ev).unwrap(),
            SpoolEntry::Completeness(c) => s.set_completeness(id, c).unwrap(),
            SpoolEntry::End(e) => s.end_command(id, e).unwrap(),
        }
    }
    id
}

fn dump(s: &Store) -> Vec<(crate::CommandRow, Vec<crate::FileRow>)> {
    s.history(None)
        .unwrap()
        .into_iter()
        .map(|c| {
            let f = s.files_of(c.id).unwrap();
            (c, f)
        })
        .collect()
}

fn spool_uuid(entries: &[SpoolEntry]) -> &str {
    match &entries[0] {
        SpoolEntry::Begin(b) => &b.uuid,
        _ => unreachable!(),
    }
}

#[test]
fn spooled_record_equals_direct_write() {
    let dir = TempDir::new("spool");
    let record = sample_record();
    let mut direct = Store::open(&dir.path().join("direct.db"), T).unwrap();
    apply_directly(&mut direct, &record);

    let spool_dir = dir.path().join("state/spool");
    let mut w = SpoolWriter::create(&spool_dir, spool_uuid(&record)).unwrap();
    for e in &record {
        w.append(e).unwrap();
    }
    let file = w.path().to_owned();
    drop(w);
    let mut via = Store::open(&dir.path().join("via.db"), T).unwrap();
    assert_eq!(via.ingest_spool(&spool_dir).unwrap(), 1);
    assert!(!file.exists());
    assert_eq!(dump(&via), dump(&direct));
    assert_eq!(via.ingest_spool(&spool_dir).unwrap(), 0);
}

#[test]
fn locked_spool_file_is_skipped_until_released() {
    let dir = TempDir::new("spool-locked");
    let record = sample_record();
    let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
    w.append(&record[0]).unwrap();
    let mut s = Store::open(&dir.db(), T).unwrap();
    assert_eq!(s.ingest_spool(dir.path()).unwrap(), 0);
    assert!(w.path().exists());
    assert!(s.history(None).unwrap().is_empty());
    for e in &record[1..] {
        w.append(e).unwrap();
    }
    drop(w);
    assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
    assert_eq!(dump(&s).len(), 1);
    assert_eq!(dump(&s)[0].1.len(), 3);
}

#[test]
fn torn_line_is_ignored_and_garbage_is_set_aside() {
    let dir = TempDir::new("spool-bad");
    let record = sample_record();
    let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
    w.append(&record[0]).unwrap();
    w.append(&record[1]).unwrap();
    let good = w.path().to_owned();
    drop(w);
    // A crash in the middle of the third line.
    let line = serde_json::to_vec(&record[2]).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&good).unwrap();
    std::io::Write::write_all(&mut f, &line[..line.len() / 2]).unwrap();
    std::fs::write(dir.path().join("garbage.jsonl"), b"not json\n{\"Begin\":1}\n").unwrap();
    std::fs::write(
        dir.path().join("orphan.jsonl"),
        serde_json::to_string(&record[1]).unwrap() + "\n",
    )
    .unwrap();

    let mut s = Store::open(&dir.db(), T).unwrap();
    let err = s.ingest_spool(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, StoreError::SpoolBad { ingested: 1, ref bad, .. } if bad.len() == 2),
        "{msg}"
    );
    assert!(msg.contains("garbage.jsonl") && msg.contains("orphan.jsonl"), "{msg}");
    assert!(dir.path().join("garbage.jsonl.bad").exists());
    assert!(dir.path().join("orphan.jsonl.bad").exists());
    assert!(!good.exists());
    let rows = dump(&s);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1.len(), 2);
    assert_eq!(s.ingest_spool(dir.path()).unwrap(), 0);
}

#[test]
fn writer_cuts_a_torn_tail_before_appending() {
    let dir = TempDir::new("spool-tail");
    let record = sample_record();
    let mut w = SpoolWriter::create(dir.path(), "x").unwrap();
    w.append(&record[0]).unwrap();
    let path = w.path().to_owned();
    drop(w);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, b"{\"Events\":[{\"acc").unwrap();
    let mut w = SpoolWriter::create(dir.path(), "x").unwrap();
    w.append(&record[4]).unwrap();
    let content = std::fs::read(&path).unwrap();
    assert_eq!(spool::parse(&content).unwrap(), vec![record[0].clone(), record[4].clone()]);
    assert!(SpoolWriter::create(dir.path(), "../escape").is_err());
}

#[test]
fn spool_tail_without_begin_joins_its_command() {
    let dir = TempDir::new("spool-tail-only");
    let record = sample_record();
    let mut direct = Store::open(&dir.path().join("direct.db"), T).unwrap();
    apply_directly(&mut direct, &record);
    // The database took the beginning, the spool got the rest.
    let mut s = Store::open(&dir.db(), T).unwrap();
    apply_directly(&mut s, &record[..2]);
    let mut w = SpoolWriter::create(&dir.path().join("spool"), spool_uuid(&record)).unwrap();
    for e in &record[2..] {
        w.append(e).unwrap();
    }
    drop(w);
    assert_eq!(s.ingest_spool(&dir.path().join("spool")).unwrap(), 1);
    assert_eq!(dump(&s), dump(&direct));
}

#[test]
fn a_spool_file_is_applied_once_even_if_its_deletion_was_lost() {
    let dir = TempDir::new("spool-once");
    let record = sample_record();
    let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
    for e in &record {
        w.append(e).unwrap();
    }
    let path = w.path().to_owned();
    drop(w);
    let content = std::fs::read(&path).unwrap();
    let mut s = Store::open(&dir.db(), T).unwrap();
    assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
    // As if the process had died between the commit and the unlink.
    std::fs::write(&path, &content).unwrap();
    assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
    assert!(!path.exists());
    assert_eq!(dump(&s)[0].1.len(), 3);
}

/// Realistic-ish events: a few hundred directories under a home directory,
/// short file names, random hashes, sizes and mtimes.
fn synthetic_events(rng: &mut Rng, n: usize) -> Vec<FileEvent> {
    (0..n)
        .map(|_| {
            let r = rng.next();
            let dir = r % 300;
            let path =
                format!("/home/user/projects/app/src/module{dir}/file_{}.rs", (r >> 16) % 5000);
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

#[test]
fn size_per_event_and_insert_rate() {
    // PROV_STORE_BENCH_EVENTS=1000000 to measure at a larger scale.
    let n_env = std::env::var("PROV_STORE_BENCH_EVENTS").ok().and_then(|v| v.parse().ok());
    let n: usize = n_env.unwrap_or(100_000);
    const BATCH: usize = 4096;
    let dir = TempDir::new("size");
    let mut s = open(&dir);
    let mut rng = Rng(42);
    let events = synthetic_events(&mut rng, n);
    // Several commands, as in real use.
    let ids: Vec<i64> =
        (0..10).map(|i| s.begin_command(&begin(&format!("c{i}"), i)).unwrap()).collect();
    let before = pages(&s);
    let start = Instant::now();
    for (k, batch) in events.chunks(BATCH).enumerate() {
        s.add_events(ids[k % ids.len()], batch).unwrap();
    }
    let took = start.elapsed();
    s.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    let page_size: i64 = s.conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let bytes_per_event = ((pages(&s) - before) * page_size) as f64 / n as f64;
    let mut breakdown = s
        .conn
        .prepare(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'file_events%' GROUP BY name",
        )
        .unwrap();
    let parts: Vec<String> = breakdown
        .query_map([], |r| {
            Ok(format!("{} {:.1}", r.get::<_, String>(0)?, r.get::<_, f64>(1)? / n as f64))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    println!(
        "{n} events: {bytes_per_event:.1} bytes/event ({}); insert {:.0} events/s",
        parts.join(", "),
        n as f64 / took.as_secs_f64()
    );
    assert!(bytes_per_event < 200.0, "{bytes_per_event} bytes/event");

    // Lookups on the filled table.
    let probe = &events[n / 2];
    let start = Instant::now();
    let by_content = s
        .find_file_events(
            probe.access,
            &[(probe.hash.unwrap(), probe.size, probe.hash_params)],
            None,
            Some(20),
        )
        .unwrap();
    let by_path = s.find_file_events(probe.access, &[], Some(&probe.path), Some(20)).unwrap();
    println!("two lookups over {n} events: {:?}", start.elapsed());
    assert_eq!(by_content.len(), 1);
    assert!(!by_path.is_empty());
}
