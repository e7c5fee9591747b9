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
    let absent = stdout(prov_config(&home, &[]));
    assert!(absent.starts_with(&format!("# {}: absent, so every value is the default", file.display())), "{absent}");
    assert!(absent.contains("\n[query]\nfiles_shown = 30  # default\nlimit = 20  # default\n"), "{absent}");
    // The documented defaults, saved as they are, are a valid file; each
    // value now comes from its line.
    std::fs::write(&file, DOCUMENTED).unwrap();
    let valid = stdout(prov_config(&home, &[]));
    assert!(valid.starts_with(&format!("# {}: valid", file.display())), "{valid}");
    let limit_line = DOCUMENTED.lines().position(|l| l.starts_with("limit =")).unwrap() + 1;
    assert!(valid.contains(&format!("limit = 20  # config.toml:{limit_line}\n")), "{valid}");
    std::fs::write(&file, "[query]\nlimit = 0\n").unwrap();
    let out = prov_config(&home, &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with(&format!("prov: {}:2: ", file.display())), "{stderr}");
    std::fs::remove_dir_all(&home).unwrap();
}
