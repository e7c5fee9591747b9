//! Parsing /proc/self/mountinfo (see proc(5)): only the two fields the
//! helper needs, the mount point and the filesystem type.

pub struct Mount {
    /// The kernel's mount id (first field), to check that a path we open
    /// is really this mount.
    pub id: u64,
    pub mount_point: Vec<u8>,
    pub fstype: Vec<u8>,
}

pub fn parse(mountinfo: &[u8]) -> Vec<Mount> {
    mountinfo.split(|&b| b == b'\n').filter_map(parse_line).collect()
}

// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
fn parse_line(line: &[u8]) -> Option<Mount> {
    let mut fields = line.split(|&b| b == b' ');
    let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let mount_point = unescape(fields.nth(3)?);
    // Optional fields end with a lone "-"; the type follows it.
    let fstype = fields.skip_while(|f| *f != b"-").nth(1)?;
    Some(Mount { id, mount_point, fstype: unescape(fstype) })
}

/// The kernel writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal =
            field.get(i + 1..i + 4).filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') << 6 | (d[1] - b'0') << 3 | (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_points_and_types() {
        let info = b"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
            25 22 0:5 / /dev rw,nosuid - devtmpfs udev rw\n\
            30 22 0:30 / /mnt/with\\040space\\134x rw master:7 shared:9 - tmpfs tmpfs rw\n";
        let m = parse(info);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].id, 22);
        assert_eq!(m[0].mount_point, b"/");
        assert_eq!(m[0].fstype, b"ext4");
        assert_eq!(m[1].fstype, b"devtmpfs");
        assert_eq!(m[2].mount_point, b"/mnt/with space\\x");
        assert_eq!(m[2].fstype, b"tmpfs");
    }

    #[test]
    fn garbage_lines_are_skipped() {
        assert!(parse(b"\nshort line\n1 2 3 4\nx 1 0:1 / / rw - ext4 a rw\n").is_empty());
    }
}
