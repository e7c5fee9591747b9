//! `prov config`, run as the built binary: `--default` prints the documented
//! default configuration byte for byte; without a flag, which file applies.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DOCUMENTED: &str = include_str!("../../prov-model/config.default.toml");

/// A fresh home (under target/, so that prov run by root accepts its
/// directories) with the XDG directories below it.
fn home(name: &str) -> PathBuf {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("prov-cli-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join(".config/prov")).unwrap();
    home
}

fn prov_config(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_prov"))
        .arg("config")
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .output()
        .unwrap()
}

#[test]
fn default_prints_the_documented_file_exactly() {
    let out = prov_config(&home("default"), &["--default"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), DOCUMENTED);
}

#[test]
fn without_flag_says_which_file_applies() {
    let home = home("which");
    let file = home.join(".config/prov/config.toml");
    let stdout = |out: Output| {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        stdout(prov_config(&home, &[])),
        format!("{}: absent: the defaults apply (prov config --default)\n", file.display())
    );
    // The documented defaults, saved as they are, are a valid file.
    std::fs::write(&file, DOCUMENTED).unwrap();
    assert_eq!(stdout(prov_config(&home, &[])), format!("{}: valid\n", file.display()));
    std::fs::write(&file, "[query]\nlimit = 0\n").unwrap();
    let out = prov_config(&home, &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with(&format!("prov: {}:2: ", file.display())), "{stderr}");
    std::fs::remove_dir_all(&home).unwrap();
}
