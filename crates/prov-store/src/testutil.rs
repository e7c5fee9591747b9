//! Helpers for the unit tests: temporary directories and sample records.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use prov_model::{Access, CommandBegin, FileEvent, HashParams};

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("prov-store-{name}-{}-{n}", std::process::id()));
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
