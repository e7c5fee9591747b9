//! Two builds of `prov`, one installation (packaging/install.sh).
//!
//! A static musl program starts 0.3 ms sooner than a static glibc one
//! (glibc identifies the CPU with `cpuid`, which traps in a VM), and every
//! `prov run -- CMD` pays that start. But SQLite runs prov's queries 1.3 to
//! 2.7 times slower on musl's `memcpy` and `malloc` (benches/README.md). So
//! where the toolchain can, install.sh installs `bin/prov` built against
//! musl, which serves `prov run -- CMD` itself and hands every other
//! subcommand to the glibc build installed as `libexec/prov/prov-full`.
//!
//! That musl build is the front build (`--features front`, main.rs): it
//! holds only `prov run`'s code, 4.9 MB of text instead of 11.4, so the
//! pages a run touches lie closer together and fewer are mapped at its
//! start and unmapped at its exit (0.1–0.6 ms of every run,
//! benches/README.md). Without the full build it answers nothing else; a
//! musl build without the feature (one run from its target directory)
//! still answers everything, only slower on queries.

use std::path::{Path, PathBuf};

/// The glibc build's name, in DIR/libexec/prov.
pub const NAME: &str = "prov-full";

/// Whether `exe` is the full build beside the helper (its installation's
/// files are then found three levels up, not two).
pub fn is_full_build(exe: &Path) -> bool {
    exe.file_name().is_some_and(|n| n == NAME) && exe.parent().is_some_and(|d| d.ends_with("libexec/prov"))
}

/// Where the full build is installed: DIR/libexec/prov/prov-full.
pub fn path(prefix: &Path) -> PathBuf {
    prefix.join("libexec/prov").join(NAME)
}

/// How the installation's prefix is found (`setup::install_prefix`, which
/// itself asks [`is_full_build`]; passed in so this module stays a leaf).
pub type FindPrefix = fn() -> anyhow::Result<PathBuf>;

/// In the musl build (and the front build, main.rs): replaces this process
/// by the full build, with the same arguments, environment and
/// descriptors. Returns only where that cannot be done, saying why.
#[cfg(any(target_env = "musl", feature = "front"))]
pub fn hand_over(prefix: FindPrefix) -> String {
    use std::os::unix::process::CommandExt;
    let full = match prefix() {
        Ok(prefix) => path(&prefix),
        Err(e) => return format!("cannot find the full build: {e:#}"),
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "prov".into());
    let err = std::process::Command::new(&full).arg0(arg0).args(args).exec();
    let shown = prov_model::escape::escape(full.as_os_str().as_encoded_bytes());
    match err.kind() {
        std::io::ErrorKind::NotFound => format!("{shown} is missing"),
        _ => format!("cannot start {shown}: {err}"),
    }
}

/// `hand_over`, but where the full build cannot start, this build answers
/// itself (only slower on queries): said in one line, unless the full
/// build is simply absent (a musl build run from its target directory).
#[cfg(target_env = "musl")]
pub fn hand_over_or_answer(prefix: FindPrefix) {
    let why = hand_over(prefix);
    if prefix().is_ok_and(|prefix| path(&prefix).exists()) {
        eprintln!("prov: {why}; answering without it");
    }
}

/// The glibc build is the full build: nothing to hand over.
#[cfg(not(target_env = "musl"))]
pub fn hand_over_or_answer(_: FindPrefix) {}

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
