//! Two builds of `prov`, one installation (packaging/install.sh).
//!
//! A static musl program starts 0.3 ms sooner than a static glibc one
//! (glibc identifies the CPU with `cpuid`, which traps in a VM), and every
//! `prov run -- CMD` pays that start. But SQLite runs prov's queries 1.3 to
//! 2.7 times slower on musl's `memcpy` and `malloc` (benches/README.md). So
//! where the toolchain can, install.sh installs `bin/prov` built against
//! musl, which serves `prov run -- CMD` itself and hands every other
//! subcommand to the glibc build installed as `libexec/prov/prov-full`.

use std::path::Path;

/// The glibc build's name, in DIR/libexec/prov.
pub const NAME: &str = "prov-full";

/// Whether `exe` is the full build beside the helper (its installation's
/// files are then found three levels up, not two).
pub fn is_full_build(exe: &Path) -> bool {
    exe.file_name().is_some_and(|n| n == NAME) && exe.parent().is_some_and(|d| d.ends_with("libexec/prov"))
}

/// Where the full build is installed: DIR/libexec/prov/prov-full.
pub fn path() -> anyhow::Result<std::path::PathBuf> {
    Ok(crate::setup::install_prefix()?.join("libexec/prov").join(NAME))
}

/// In the musl build: replaces this process by the full build, with the
/// same arguments, environment and descriptors. Returns only where that
/// cannot be done (a musl build run from its target directory has none
/// beside it); this build then answers itself, only slower on queries.
#[cfg(target_env = "musl")]
pub fn hand_over() {
    use std::os::unix::process::CommandExt;
    let Ok(full) = path() else { return };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "prov".into());
    let err = std::process::Command::new(&full).arg0(arg0).args(args).exec();
    if err.kind() != std::io::ErrorKind::NotFound {
        eprintln!("prov: cannot start {}: {err}; answering without it", full.display());
    }
}

/// The glibc build is the full build: nothing to hand over.
#[cfg(not(target_env = "musl"))]
pub fn hand_over() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_glibc_build_beside_the_helper_is_the_full_build() {
        assert!(is_full_build(Path::new("/usr/local/libexec/prov/prov-full")));
        assert!(!is_full_build(Path::new("/usr/local/bin/prov")));
        assert!(!is_full_build(Path::new("/home/me/prov-full")));
        assert!(!is_full_build(Path::new("/usr/libexec/prov/prov-helper")));
    }
}
