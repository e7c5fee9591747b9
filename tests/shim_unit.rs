//! The C unit tests of the preload shim's pure helpers (preload/tests/unit.c): compiled with the
//! shim's warnings as errors, under ASan and UBSan, and run; a failed check fails this test.

use std::path::Path;
use std::process::Command;

#[test]
fn shim_pure_helpers_pass_their_c_unit_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("prov-shim-unit");
    let build = Command::new("cc")
        .args(["-O1", "-Wall", "-Wextra", "-Werror", "-Wmissing-prototypes"])
        .args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-o"])
        .arg(&binary)
        .arg(root.join("preload/tests/unit.c"))
        .output()
        .expect("cc runs");
    assert!(build.status.success(), "preload/tests/unit.c does not build:\n{}", String::from_utf8_lossy(&build.stderr));
    let run = Command::new(&binary).output().expect("the unit test binary runs");
    assert!(
        run.status.success(),
        "preload/tests/unit failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}
