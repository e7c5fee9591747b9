//! Filesystem facts the store depends on: private directories and whether a
//! directory is on a network or cluster filesystem.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// Creates `dir` and missing parents with mode 0700: records reveal what the
/// user ran and touched.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Creates `path` empty with mode 0600 when it does not exist; an existing
/// file is left as it is.
pub(crate) fn create_private_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// statfs f_type magics of filesystems whose shared memory (mmap of the WAL
/// index) is not coherent between clients.
const NETWORK_FS: &[u32] = &[
    0x0000_6969, // NFS
    0xFF53_4D42, // CIFS
    0xFE53_4D42, // SMB2
    0x0000_517B, // SMB (old smbfs)
    0x4750_4653, // GPFS
    0x0BD0_0BD0, // Lustre
    0x6573_5546, // FUSE (sshfs, s3fs, ...)
    0x00C3_6400, // CephFS
    0x5346_414F, // AFS
    0x6B41_4653, // kAFS
    0x0102_1997, // 9p (VM and WSL shared folders)
];

/// The same filesystems by the type names of the mount table, for where
/// statfs does not tell: a 9p mount (WSL's /mnt/c, a VM's shared folder)
/// reports the server's filesystem type through statfs (seen: ext2/ext3).
pub const NETWORK_FSTYPES: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "v9fs",
    "ceph",
    "lustre",
    "gpfs",
    "afs",
    "glusterfs",
    "beegfs",
    "fuse.sshfs",
];

/// True when `dir` is on a filesystem where WAL is unsafe, by statfs or by
/// the mount table. When statfs fails (the directory should exist by now)
/// we assume local: the open that follows will report the real problem.
pub(crate) fn is_network_fs(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let by_magic = nix::sys::statfs::statfs(dir).is_ok_and(|st| network_magic(&st));
    by_magic
        || std::fs::metadata(dir).is_ok_and(|m| {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            fstype_of_device(&mountinfo, m.dev()).is_some_and(|t| NETWORK_FSTYPES.contains(&t))
        })
}

/// True when the open `file` is on a network filesystem by statfs alone
/// (one syscall, no mount-table read: for paths run at every command).
pub fn is_on_network_fs(file: &std::fs::File) -> bool {
    nix::sys::statfs::fstatfs(file).is_ok_and(|st| network_magic(&st))
}

/// Whether statfs's filesystem type is one of [`NETWORK_FS`].
fn network_magic(st: &nix::sys::statfs::Statfs) -> bool {
    NETWORK_FS.contains(&f_type(st.filesystem_type()))
}

/// The filesystem type of the mount of device `dev` in a mountinfo text
/// (fields: id, parent, major:minor, root, mount point, options, optional
/// fields up to "-", then the type).
fn fstype_of_device(mountinfo: &str, dev: u64) -> Option<&str> {
    let wanted = format!("{}:{}", nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.nth(2)? != wanted {
            return None;
        }
        fields.skip_while(|f| *f != "-").nth(1)
    })
}

/// The magic's low 32 bits: f_type's C type differs between platforms
/// (signed on some, so a magic above 0x7FFFFFFF may come sign-extended).
#[allow(clippy::unnecessary_cast)]
fn f_type(t: nix::sys::statfs::FsType) -> u32 {
    t.0 as i64 as u32
}

/// Why a database could not be created at `db` (which does not exist), if
/// it could not: its nearest existing ancestor must be a directory prov may
/// create entries in. A missing database there only means "no records yet".
pub(crate) fn cannot_create(db: &Path) -> Option<String> {
    use nix::unistd::{access, AccessFlags};
    let mut missing = db;
    for ancestor in db.ancestors().skip(1) {
        let ancestor = if ancestor.as_os_str().is_empty() { Path::new(".") } else { ancestor };
        match std::fs::metadata(ancestor) {
            Ok(m) if !m.is_dir() => return Some(format!("{} is not a directory", ancestor.display())),
            Ok(_) => {
                return access(ancestor, AccessFlags::W_OK | AccessFlags::X_OK).err().map(|e| {
                    format!(
                        "{} does not exist and {} does not let prov create it ({e})",
                        missing.display(),
                        ancestor.display()
                    )
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing = ancestor,
            Err(e) => return Some(format!("{}: {e}", ancestor.display())),
        }
    }
    None
}

#[cfg(test)]
mod mount_table_tests {
    use super::*;

    #[test]
    fn a_9p_mount_is_found_by_its_device_in_the_mount_table() {
        // A virtio-9p share and WSL's drvfs, as the kernel lists them.
        let mountinfo = "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                         40 22 0:45 / /mnt/c rw,noatime - 9p drvfs rw,dirsync,aname=drvfs\n";
        let dev = nix::sys::stat::makedev(0, 45);
        assert_eq!(fstype_of_device(mountinfo, dev), Some("9p"));
        assert!(NETWORK_FSTYPES.contains(&"9p"));
        assert_eq!(fstype_of_device(mountinfo, nix::sys::stat::makedev(254, 1)), Some("ext4"));
        assert_eq!(fstype_of_device(mountinfo, nix::sys::stat::makedev(8, 1)), None);
    }
}
