//! Helpers for the unit tests: temporary directories and sample records.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prov_model::{Access, CommandBegin, FileEvent, HashParams};

use crate::{FileRow, Store};

/// The busy timeout of the tests' stores.
pub(crate) const T: Duration = Duration::from_secs(5);

/// The store of `dir`, opened for writing.
pub(crate) fn open(dir: &TempDir) -> Store {
    Store::open(&dir.db(), T).unwrap()
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("prov-store-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.0.join("prov.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn begin(uuid: &str, start_ns: i64) -> CommandBegin {
    CommandBegin {
        uuid: uuid.into(),
        session: "session-1".into(),
        seq: 7,
        text: format!("make {uuid}").into_bytes(),
        cwd: b"/home/u/project".to_vec(),
        host: "host".into(),
        user: "u".into(),
        shell: "bash".into(),
        start_ns,
        env: None,
    }
}

/// A stored event as the event it was stored from.
pub(crate) fn event_of(f: &FileRow) -> FileEvent {
    FileEvent {
        access: f.access,
        path: f.path.clone(),
        size: f.size,
        mtime_ns: f.mtime_ns,
        hash: f.hash,
        hash_params: f.hash_params,
        pid: f.pid,
    }
}

pub(crate) fn event(access: Access, path: &[u8], hash: u64, size: u64) -> FileEvent {
    FileEvent {
        access,
        path: path.to_vec(),
        size,
        mtime_ns: 1_700_000_000_123_456_789,
        hash: Some(hash),
        hash_params: HashParams::default(),
        pid: Some(4242),
    }
}

/// A deterministic pseudo-random sequence (splitmix64).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Rng {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Events of a `cp -r` of a Linux source tree: `files` distinct paths in
/// about `files / 16` directories, each written once by one process, in
/// the order a depth-first copy writes them. Modelled on linux-6.1 (78 635
/// files, 4 777 directories, 60 055 distinct names, names of 12.7 bytes and
/// directories of 44 bytes on average): a quarter of the files have a name
/// shared with other directories (Makefile, Kconfig, core.c, ...), the rest
/// a name of their own; mtimes fall within the 3 s the copy takes.
pub(crate) fn kernel_copy_events(rng: &mut Rng, files: usize, start_ns: i64) -> Vec<FileEvent> {
    const ROOT: &str = "/home/user/src/linux-copy";
    const EXT: &[&str] = &[".c", ".c", ".c", ".h", ".h", ".S", ".rst", ".txt", ".yaml", ".dts"];
    const COMMON: &[&str] = &[
        "Makefile",
        "Kconfig",
        ".gitignore",
        "index.rst",
        "Kbuild",
        "core.c",
        "main.c",
        "setup.c",
        "Build",
        "irq.c",
        "core.h",
        "common.h",
        "init.c",
        "trace.h",
        "config",
    ];
    let word = |rng: &mut Rng, len: u64| -> String { (0..len).map(|_| (b'a' + rng.below(26) as u8) as char).collect() };
    // A tree of directories: each one under a random earlier one, so
    // depths vary like a source tree's (arch/x86/kernel/cpu/...).
    let n_dirs = files.div_ceil(16);
    let mut dirs: Vec<(String, usize)> = vec![(ROOT.to_owned(), 0)];
    let mut children: Vec<Vec<usize>> = vec![Vec::new()];
    while dirs.len() < n_dirs {
        let parent = rng.below(dirs.len() as u64) as usize;
        if dirs[parent].1 >= 6 {
            continue;
        }
        let len = 3 + rng.below(8);
        let path = format!("{}/{}", dirs[parent].0, word(rng, len));
        dirs.push((path, dirs[parent].1 + 1));
        children.push(Vec::new());
        children[parent].push(dirs.len() - 1);
    }
    // Depth-first order, as cp -r visits them.
    let mut order = Vec::with_capacity(dirs.len());
    let mut stack = vec![0usize];
    while let Some(d) = stack.pop() {
        order.push(d);
        stack.extend(children[d].iter().rev());
    }
    let mut events = Vec::with_capacity(files);
    let per_dir = files as f64 / order.len() as f64;
    let mut owed = 0.0;
    for (k, &d) in order.iter().enumerate() {
        owed += per_dir;
        let mut here = std::collections::HashSet::new();
        while owed >= 1.0 || (k + 1 == order.len() && events.len() < files) {
            owed -= 1.0;
            let name = loop {
                let name = if rng.below(4) == 0 {
                    COMMON[rng.below(COMMON.len() as u64) as usize].to_owned()
                } else {
                    let len = 5 + rng.below(14);
                    word(rng, len) + EXT[rng.below(EXT.len() as u64) as usize]
                };
                if here.insert(name.clone()) {
                    break name;
                }
            };
            let i = events.len() as i64;
            events.push(FileEvent {
                access: Access::Write,
                path: format!("{}/{name}", dirs[d].0).into_bytes(),
                // Mostly a few KiB, some large: 2^(6..18) bytes.
                size: 1 << (6 + rng.below(12)) | rng.below(64),
                // 3 s for the whole copy.
                mtime_ns: start_ns + i * 37_500 + rng.below(30_000) as i64,
                hash: Some(rng.next()),
                hash_params: HashParams::default(),
                pid: Some(123_456),
            });
        }
    }
    events.truncate(files);
    events
}
