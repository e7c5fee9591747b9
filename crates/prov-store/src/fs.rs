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

/// True when `dir` is on a filesystem where WAL is unsafe. When statfs
/// fails (the directory should exist by now) we assume local: the open
/// that follows will report the real problem.
pub(crate) fn is_network_fs(dir: &Path) -> bool {
    match nix::sys::statfs::statfs(dir) {
        Ok(st) => NETWORK_FS.contains(&f_type(st.filesystem_type())),
        Err(_) => false,
    }
}

/// The magic's low 32 bits: f_type's C type differs between platforms
/// (signed on some, so a magic above 0x7FFFFFFF may come sign-extended).
#[allow(clippy::unnecessary_cast)]
fn f_type(t: nix::sys::statfs::FsType) -> u32 {
    t.0 as i64 as u32
}
