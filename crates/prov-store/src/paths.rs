//! Paths are stored as an interned directory plus a name, as raw bytes;
//! directories as an interned parent plus a last component.
//!
//! `/a/b/c` is ("/a/b", "c"); `/c` is ("/", "c"). Joining gives back the
//! exact bytes for every path the kernel reports (absolute, no `//`). A path
//! without a slash is stored with the empty directory and also round-trips.

/// Splits at the last `/`.
pub(crate) fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b"", path),
    }
}

/// Inverse of [`split`].
pub(crate) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    // "/" already ends with the separator; "" is a relative path's directory.
    if !dir.is_empty() && dir != b"/" {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A directory's parent and last component, or `None` for a root: `/`,
/// the empty directory and any directory that [`join`] would not give back
/// (`//x`), which is then stored whole. Walking up from any directory ends at a root, since
/// the parent is always shorter.
pub(crate) fn split_dir(dir: &[u8]) -> Option<(&[u8], &[u8])> {
    if dir.is_empty() || dir == b"/" {
        return None;
    }
    let (parent, name) = split(dir);
    let exact = parent.len() + usize::from(!parent.is_empty() && parent != b"/") + name.len() == dir.len();
    exact.then_some((parent, name))
}

/// A path's file_events.path_key: its directory's id and a 16-bit hash of
/// the path (of the name, seeded with the directory id), in one integer.
pub(crate) fn path_key(dir_id: i64, name: &[u8]) -> i64 {
    let hash = xxhash_rust::xxh3::xxh3_64_with_seed(name, dir_id as u64);
    dir_id << 16 | i64::from(hash as u16)
}

/// The directory id in a [`path_key`].
pub(crate) fn path_key_dir(key: i64) -> i64 {
    key >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_round_trip() {
        for p in [&b"/a"[..], b"/a/b", b"/a/b/c.txt", b"/tmp/\xff\xfe/\x80name", b"/dir/", b"relative", b"rel/x"] {
            let (d, n) = split(p);
            assert_eq!(join(d, n), p, "{:?}", String::from_utf8_lossy(p));
        }
        assert_eq!(split(b"/x"), (&b"/"[..], &b"x"[..]));
        assert_eq!(split(b"/a/b/c"), (&b"/a/b"[..], &b"c"[..]));
    }

    /// Rebuilds a directory from its chain of components, as a query does.
    fn rebuild(dir: &[u8]) -> Vec<u8> {
        match split_dir(dir) {
            None => dir.to_vec(),
            Some((parent, name)) => {
                assert!(parent.len() < dir.len());
                join(&rebuild(parent), name)
            }
        }
    }

    #[test]
    fn directories_round_trip_through_their_components() {
        for d in [
            &b""[..],
            b"/",
            b"/a",
            b"/a/b/c",
            b"/tmp/\xff\xfe/\x80name",
            b"/dir/",
            b"//",
            b"//x",
            b"//x/y",
            b"/a//b",
            b"///",
            b"rel",
            b"rel/x/",
        ] {
            assert_eq!(rebuild(d), d, "{:?}", String::from_utf8_lossy(d));
        }
        assert_eq!(split_dir(b"/a"), Some((&b"/"[..], &b"a"[..])));
        assert_eq!(split_dir(b"//x"), None);
        assert_eq!(split_dir(b"/"), None);
    }
}
