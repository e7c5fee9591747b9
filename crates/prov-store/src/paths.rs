//! Paths are stored as an interned directory plus a name, as raw bytes.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_round_trip() {
        for p in [
            &b"/a"[..],
            b"/a/b",
            b"/a/b/c.txt",
            b"/tmp/\xff\xfe/\x80name",
            b"/dir/",
            b"relative",
            b"rel/x",
        ] {
            let (d, n) = split(p);
            assert_eq!(join(d, n), p, "{:?}", String::from_utf8_lossy(p));
        }
        assert_eq!(split(b"/x"), (&b"/"[..], &b"x"[..]));
        assert_eq!(split(b"/a/b/c"), (&b"/a/b"[..], &b"c"[..]));
    }
}
