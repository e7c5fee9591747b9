//! Parsing /proc/self/mountinfo (see proc(5)): only the fields the helper
//! needs.

pub struct Mount {
    /// The kernel's mount id (first field), to check that a path we open
    /// is really this mount.
    pub id: u64,
    /// The id of the mount this one is mounted on.
    pub parent_id: u64,
    pub mount_point: Vec<u8>,
    pub fstype: Vec<u8>,
    /// For a FUSE mount: the uid of the user who mounted it (`user_id=` of
    /// the super options), whose server answers every request on it.
    pub fuse_owner: Option<u32>,
}

pub fn parse(mountinfo: &[u8]) -> Vec<Mount> {
    mountinfo.split(|&b| b == b'\n').filter_map(parse_line).collect()
}

// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
fn parse_line(line: &[u8]) -> Option<Mount> {
    let mut fields = line.split(|&b| b == b' ');
    let id = number(fields.next())?;
    let parent_id = number(fields.next())?;
    let mount_point = unescape(fields.nth(2)?);
    // Optional fields end with a lone "-"; type, source and super options
    // follow it.
    let mut rest = fields.skip_while(|f| *f != b"-").skip(1);
    let fstype = unescape(rest.next()?);
    let super_options = rest.nth(1).unwrap_or_default();
    let fuse_owner = (fstype == b"fuse" || fstype.starts_with(b"fuse."))
        .then(|| super_options.split(|&b| b == b',').find_map(|o| number(o.strip_prefix(b"user_id="))))
        .map(|owner| owner.unwrap_or(u32::MAX));
    Some(Mount { id, parent_id, mount_point, fstype, fuse_owner })
}

fn number<T: std::str::FromStr>(field: Option<&[u8]>) -> Option<T> {
    std::str::from_utf8(field?).ok()?.parse().ok()
}

include!("mountinfo_unescape.rs");

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
        assert_eq!((m[2].parent_id, m[2].fuse_owner), (22, None));
    }

    #[test]
    fn fuse_mounts_name_their_owner() {
        let info = b"40 22 0:50 / /home/u/remote rw - fuse.sshfs u@h: rw,user_id=1002,group_id=1002,allow_other\n\
            41 22 0:51 / /mnt/f rw - fuse f rw,allow_other\n";
        let m = parse(info);
        assert_eq!(m[0].fuse_owner, Some(1002));
        // A FUSE mount whose owner cannot be read is nobody's.
        assert_eq!(m[1].fuse_owner, Some(u32::MAX));
    }

    #[test]
    fn garbage_lines_are_skipped() {
        assert!(parse(b"\nshort line\n1 2 3 4\nx 1 0:1 / / rw - ext4 a rw\n").is_empty());
    }
}
