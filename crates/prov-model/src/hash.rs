//! The partial content hash (the seed paper's scheme).
//!
//! A file of `size` bytes is hashed whole when `size <= chunks * chunk_size`.
//! Otherwise `chunks` pieces of `chunk_size` bytes are read at the offsets
//! `k * floor(size / chunks)` for `k in 0..chunks`. The hash is xxh3-64 of the
//! bytes read, in offset order. The parameters are stored with every hash so a
//! later `--stat` or a by-content query recomputes it the same way.

use std::cell::RefCell;
use std::io;
use std::os::unix::fs::FileExt;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HashParams {
    /// Bytes read per chunk (`b`).
    pub chunk_size: u32,
    /// Number of chunks (`N`).
    pub chunks: u32,
}

impl Default for HashParams {
    fn default() -> Self {
        HashParams { chunk_size: 256, chunks: 3 }
    }
}

impl HashParams {
    /// Files up to this size are hashed whole.
    pub fn whole_file_limit(&self) -> u64 {
        u64::from(self.chunk_size) * u64::from(self.chunks)
    }
}

/// Hashes `file` (whose size the caller already knows from fstat) through
/// positional reads, so the caller's file offset is untouched.
///
/// A file that shrinks while it is read hashes the bytes that were there;
/// the stored size then tells that the hash is of a moving target.
pub fn partial_hash(file: &impl FileExt, size: u64, params: HashParams) -> io::Result<u64> {
    // One buffer per thread, reused: this runs once per file event.
    thread_local! {
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; BUF_SIZE]);
    }
    BUF.with(|buf| {
        let buf = &mut buf.borrow_mut()[..];
        let mut hasher = Xxh3::new();
        let stride = size / u64::from(params.chunks.max(1));
        if size <= params.whole_file_limit() {
            hash_range(file, 0, size, buf, &mut hasher)?;
        } else if size <= ONE_READ_LIMIT as u64 {
            // The same bytes as chunk by chunk, in one read.
            let got = read_up_to(file, &mut buf[..size as usize])?;
            for k in 0..u64::from(params.chunks) {
                let start = usize::try_from(k * stride).unwrap_or(usize::MAX).min(got);
                let end = start.saturating_add(params.chunk_size as usize).min(got);
                hasher.update(&buf[start..end]);
            }
        } else {
            for k in 0..u64::from(params.chunks) {
                hash_range(file, k * stride, u64::from(params.chunk_size), buf, &mut hasher)?;
            }
        }
        Ok(hasher.digest())
    })
}

/// Reads up to this many bytes at a time.
const BUF_SIZE: usize = 64 * 1024;
/// Files up to this size that are not hashed whole are read in one go and
/// their chunks hashed from memory: one system call instead of one per
/// chunk, cheaper up to about this size (measured: 0.74 µs against 0.97 µs
/// for 3 × 256 bytes of a 16 KiB file on tmpfs, 0.59 against 1.19 at 8 KiB).
const ONE_READ_LIMIT: usize = 16 * 1024;
const _: () = assert!(ONE_READ_LIMIT <= BUF_SIZE, "one read must fit the buffer");

/// Fills `buf` from offset 0 as far as the file goes; the bytes read.
pub fn read_up_to(file: &impl FileExt, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn hash_range(file: &impl FileExt, mut offset: u64, len: u64, buf: &mut [u8], hasher: &mut Xxh3) -> io::Result<()> {
    let end = offset + len;
    while offset < end {
        let want = usize::try_from(end - offset).unwrap_or(usize::MAX).min(buf.len());
        let got = match file.read_at(&mut buf[..want], offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..got]);
        offset += got as u64;
    }
    Ok(())
}

/// Hashes the file at `path` the way the collector would have.
pub fn hash_path(path: &std::path::Path, params: HashParams) -> io::Result<(u64, u64)> {
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    Ok((partial_hash(&file, size, params)?, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_64;

    fn hash_of(content: &[u8], params: HashParams) -> u64 {
        let dir = std::env::temp_dir().join(format!("prov-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("f{n}"));
        std::fs::write(&path, content).unwrap();
        hash_path(&path, params).unwrap().0
    }

    #[test]
    fn small_files_are_hashed_whole() {
        for size in [0usize, 1, 255, 256, 767, 768] {
            let content: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            assert_eq!(hash_of(&content, HashParams::default()), xxh3_64(&content), "size {size}");
        }
    }

    #[test]
    fn large_files_hash_three_chunks_at_thirds() {
        // Read chunk by chunk, and (up to 16 KiB) in one read: the same bytes.
        for size in [769usize, 4096, 16383, 16384, 16385, 21567, 101978] {
            let content: Vec<u8> = (0..size).map(|i| (i * 13 % 253) as u8).collect();
            let stride = size / 3;
            let mut expected = Vec::new();
            for k in 0..3 {
                expected.extend_from_slice(&content[k * stride..k * stride + 256]);
            }
            assert_eq!(hash_of(&content, HashParams::default()), xxh3_64(&expected), "size {size}");
        }
    }

    #[test]
    fn parameters_change_the_hash() {
        let content = vec![5u8; 10_000];
        let mut other = content.clone();
        other[9_000] = 6;
        let default = HashParams::default();
        let wide = HashParams { chunk_size: 4096, chunks: 3 };
        assert_eq!(hash_of(&content, default), hash_of(&other, default));
        assert_ne!(hash_of(&content, wide), hash_of(&other, wide));
    }
}
