//! The Docker engine for the package and container tests (tests/deb.rs,
//! tests/docker.rs): prov's .deb and image built once per test binary with
//! the project's own scripts, and named volumes removed after each test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::describe;

/// The least privilege prov needs in a container on this host, found by
/// these tests (packaging/docker/README.md): CAP_SYS_ADMIN to set up the
/// observation, CAP_SYS_PTRACE to join it; on hosts whose Docker confines
/// containers with AppArmor also no AppArmor profile (not the case here).
pub const CAP_OPTIONS: &[&str] = &["--cap-add", "SYS_ADMIN", "--cap-add", "SYS_PTRACE"];

/// The image's tag in the tests: built from this checkout.
const IMAGE: &str = "prov-e2e:latest";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A test that needs the engine fails with this one line when it is absent.
fn require_engine() {
    static ENGINE: OnceLock<Result<(), String>> = OnceLock::new();
    let ready =
        ENGINE.get_or_init(|| match Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]).output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default().to_owned()),
            Err(e) => Err(format!("cannot run docker: {e}")),
        });
    if let Err(why) = ready {
        panic!("this test needs a running Docker engine (CI has one): {why}");
    }
}

/// `docker ARGS`, its output (nothing asserted).
pub fn docker(args: &[&str]) -> Output {
    require_engine();
    Command::new("docker").args(args).output().expect("run docker")
}

fn script(path: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join(path)).args(args).output().unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(out.status.success(), "{path} failed: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// prov's .deb built from this checkout by packaging/debian/build (which
/// also lints it), in a directory of its own.
pub fn deb() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        let out = PathBuf::from(format!("/var/tmp/prov-e2e-deb-{}", std::process::id()));
        let deb = script("packaging/debian/build", &["--out", out.to_str().unwrap()]);
        PathBuf::from(deb)
    })
}

/// The Docker image built from this checkout by packaging/docker/build.
pub fn image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    require_engine();
    BUILT.get_or_init(|| {
        script("packaging/docker/build", &["--tag", IMAGE]);
    });
    IMAGE
}

/// The base image (Debian 12, no prov), for installing the package by hand.
pub fn base_image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    require_engine();
    BUILT.get_or_init(|| {
        script("packaging/docker/base-image", &[]);
    });
    "prov-base:bookworm"
}

/// A named volume, removed when the test ends.
pub struct Volume {
    pub name: String,
}

impl Volume {
    pub fn new(test: &str) -> Volume {
        let name = format!("prov-e2e-{test}-{}", std::process::id());
        let out = docker(&["volume", "create", &name]);
        assert!(out.status.success(), "docker volume create: {}", describe(&out));
        Volume { name }
    }

    /// `docker run --rm` of the image with the volume as the user's home,
    /// without a terminal.
    pub fn run(&self, options: &[&str], command: &[&str]) -> Output {
        let mount = format!("{}:/home/user", self.name);
        let mut args = vec!["run", "--rm", "-v", &mount];
        args.extend(options);
        args.push(image());
        args.extend(command);
        docker(&args)
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["volume", "rm", "-f", &self.name]).output();
    }
}
