//! packaging/install.sh as an admin runs it: again over an earlier install,
//! and refused (with one line, nothing installed) by a toolchain too old.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use prov_e2e::*;

fn install(prefix: &Path, envs: &[(&str, &str)]) -> std::process::Output {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Command::new(repo.join("packaging/install.sh"))
        .arg("--prefix")
        .arg(prefix)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

fn prov_gid() -> u32 {
    let out = Command::new("getent").args(["group", "prov"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .nth(2)
        .and_then(|g| g.trim().parse().ok())
        .expect("group prov exists")
}

#[test]
fn install_runs_again_over_itself_and_tracing_works() {
    let case = Case::new("install-twice");
    let prefix = case.inst.root.join("prefix-twice");
    let mut said = String::new();
    for round in 1..=2 {
        let out = install(&prefix, &[]);
        assert!(out.status.success(), "install.sh, run {round}: {}", describe(&out));
        said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(said.contains("prov installed in"), "run {round}: {}", describe(&out));
        // It ends with the one line each user adds to their rc file.
        let init = format!("eval \"$({}/bin/prov init bash)\"", prefix.display());
        let last = said.lines().last().unwrap_or_default();
        assert!(last.contains("~/.bashrc") && last.contains(&init) && last.contains("~/.zshrc"), "run {round}: {said}");
    }
    let helper = std::fs::metadata(prefix.join("libexec/prov/prov-helper")).unwrap();
    assert_eq!((helper.uid(), helper.gid()), (0, prov_gid()), "helper owned by root, group prov");
    assert_eq!(helper.mode() & 0o7777, 0o4755, "helper setuid root, writable by root only");
    // Linked against musl whenever the toolchain has that target
    // (packaging/helper-target): glibc's start-up, which alone reads
    // GLIBC_TUNABLES, would cost every traced command 0.3 ms more; without
    // the target, install.sh says so.
    let musl = toolchain_has_musl();
    let image = std::fs::read(prefix.join("libexec/prov/prov-helper")).unwrap();
    let glibc = image.windows(b"GLIBC_TUNABLES".len()).any(|w| w == b"GLIBC_TUNABLES");
    assert_eq!(glibc, !musl, "the toolchain has the musl target: {musl}; the helper holds glibc's start-up: {glibc}");
    assert_eq!(said.contains("the helper is linked against glibc"), !musl, "{said}");
    // With the musl target (tests/run installs musl-gcc), `prov` too: bin/prov
    // against musl, which runs `prov run -- CMD` and starts 0.3 ms sooner,
    // and the glibc build beside the helper, which answers everything else
    // (crates/prov-cli/src/full_build.rs).
    let holds_glibc = |file: &str| {
        let image = std::fs::read(prefix.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        image.windows(b"GLIBC_TUNABLES".len()).any(|w| w == b"GLIBC_TUNABLES")
    };
    assert_eq!(holds_glibc("bin/prov"), !musl, "bin/prov against musl exactly when the toolchain has it");
    let full = prefix.join("libexec/prov/prov-full");
    if musl {
        assert!(holds_glibc("libexec/prov/prov-full"), "the full build is glibc's");
        let m = std::fs::metadata(&full).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o755), "prov-full: root's, no setuid");
    } else {
        assert!(!full.exists(), "no full build beside a glibc bin/prov");
    }
    for file in ["bin/prov", "libexec/prov/prov-collector", "lib/prov/libprov_preload.so"] {
        let m = std::fs::metadata(prefix.join(file)).unwrap();
        assert_eq!(m.uid(), 0, "{file} owned by root");
        assert_eq!(m.mode() & 0o7022, 0, "{file}: no setuid, not writable by others");
    }
    // The documentation travels with the program, where man, bash-completion,
    // zsh and fish look; the last line says what to add to the rc file.
    for file in [
        "share/man/man1/prov.1",
        "share/man/man1/prov-query-lineage.1",
        "share/bash-completion/completions/prov",
        "share/zsh/site-functions/_prov",
        "share/fish/vendor_completions.d/prov.fish",
        "share/doc/prov/README.md",
    ] {
        let m = std::fs::metadata(prefix.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o644), "{file}: root's, readable by all");
    }
    let rc_line = format!("eval \"$({}/bin/prov init bash)\"", prefix.display());
    assert!(said.contains(&rc_line), "install.sh names the line for ~/.bashrc ({rc_line}): {said}");
    let collector = std::fs::metadata(prefix.join("libexec/prov/prov-collector")).unwrap();
    assert_eq!(collector.mode() & 0o7777, 0o711, "collector not readable by users, so it starts non-dumpable");
    // prov, the collector and the writer start without the dynamic loader
    // (every `prov run` starts prov; one with no observation ready waits
    // for the other two as well).
    for file in ["libexec/prov/prov-collector", "libexec/prov/prov-writer", "bin/prov"] {
        let image = std::fs::read(prefix.join(file)).unwrap();
        assert!(!has_program_interpreter(&image), "{file}: asks for the dynamic loader (PT_INTERP)");
    }

    // What the user then types, with the re-installed prov.
    let prov = prefix.join("bin/prov");
    let out = case.command(&prov).args(["run", "--", "sh", "-c", "echo twice > twice.txt"]).output().unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let out = case.command(&prov).args(["query", "wrote", "twice.txt", "--json"]).output().unwrap();
    let found = parse_json_lines(&out.stdout);
    assert_eq!(found.len(), 1, "{}", describe(&out));
    assert_eq!(found[0]["text"], "sh -c 'echo twice > twice.txt'");
    // The record names its user (from /etc/passwd: the static prov asks no NSS module).
    assert_eq!(found[0]["user"], TEST_USER, "{}", describe(&out));
    if !musl {
        return;
    }
    // The full build answers queries and says so in `prov doctor`; the
    // files the shell integration names are bin/prov's installation's.
    let out = case.command(&prov).arg("doctor").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let line = format!("{} (musl) runs `prov run -- CMD`; {} (glibc) answers the rest", prov.display(), full.display());
    assert!(said.contains(&line), "doctor names both builds ({line}):\n{}", describe(&out));
    let out = case.command(&prov).args(["init", "bash"]).output().unwrap();
    let init = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !init.contains("prov-full"), "{}", describe(&out));
    for file in [prov.clone(), prefix.join("libexec/prov/prov-helper"), prefix.join("lib/prov/libprov_preload.so")] {
        assert!(init.contains(&file.display().to_string()), "init names {}: {init}", file.display());
    }
    // bin/prov holds only `prov run`'s code (the front build): a full build
    // that cannot start (here: unreadable) or is gone costs every other
    // subcommand, said in one line that names it and the way out; traced
    // commands go on.
    let only_run = |out: &std::process::Output, problem: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}", describe(out));
        assert!(out.stdout.is_empty(), "{}", describe(out));
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(problem) && err.contains("prov-full") && err.contains("reinstall prov"), "{err}");
    };
    std::fs::set_permissions(&full, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = case.command(&prov).args(["query", "wrote", "twice.txt", "--json"]).output().unwrap();
    only_run(&out, "cannot start");
    std::fs::remove_file(&full).unwrap();
    let out = case.command(&prov).args(["query", "wrote", "twice.txt", "--json"]).output().unwrap();
    only_run(&out, "is missing");
    let out = case.command(&prov).args(["run", "--", "sh", "-c", "echo again > again.txt"]).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    assert!(case.work.join("again.txt").exists(), "{}", describe(&out));
}

/// A build takes minutes: install.sh says each step as it starts and how
/// long it took.
#[test]
fn install_says_what_it_builds_as_it_goes() {
    let case = Case::new("install-steps");
    let out = install(&case.inst.root.join("prefix-steps"), &[]);
    assert!(out.status.success(), "{}", describe(&out));
    // Progress on standard error: standard output is what callers keep.
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    for what in ["the collector", "the writer", "prov", "the helper", "the preload shim"] {
        assert!(said.contains(&format!("] building {what}\n")), "says it builds {what}: {said}");
    }
    assert!(said.lines().any(|l| l.contains("] built the collector in ") && l.ends_with(" s")), "{said}");
}

/// A `--prefix` outside the usual places: install.sh says which lines
/// reach prov, its man pages and completion; `prov doctor` says which of
/// them are missing, and then that they work.
#[test]
fn a_prefix_install_says_how_to_reach_prov_and_doctor_checks_it() {
    let case = Case::new("install-reach");
    let prefix = case.inst.root.join("prefix-reach");
    let out = install(&prefix, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let bin = prefix.join("bin");
    let path_line = format!("export PATH=\"{}:$PATH\"", bin.display());
    let completion = prefix.join("share/bash-completion/completions/prov");
    assert!(said.contains(&path_line) && said.contains(&completion.display().to_string()), "{said}");
    assert!(said.contains(&format!("fpath=({}/share/zsh/site-functions $fpath)", prefix.display())), "{said}");

    let doctor = |path: &str| {
        let mut cmd = case.command(prefix.join("bin/prov"));
        cmd.arg("doctor").env("PATH", path).env("SHELL", "/bin/bash");
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    let before = doctor("/usr/local/bin:/usr/bin:/bin");
    assert!(before.contains(&format!("{} is not on PATH", bin.display())), "{before}");
    assert!(before.contains("man prov finds no page"), "{before}");
    assert!(before.contains("bash does not find prov's completion"), "{before}");
    // The lines install.sh named, in the user's environment and ~/.bashrc.
    std::fs::write(case.home.join(".bashrc"), format!(". {}\n", completion.display())).unwrap();
    let after = doctor(&format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()));
    assert!(after.contains("prov is on PATH"), "{after}");
    assert!(after.contains(&format!("man prov shows {}", prefix.join("share/man/man1/prov.1").display())), "{after}");
    assert!(after.contains("bash completes prov"), "{after}");
}

#[test]
fn install_refuses_a_toolchain_too_old_for_the_crates() {
    let case = Case::new("install-old-rust");
    // Debian 12's own cargo, as far as install.sh can tell.
    let fake = case.home.join("old-cargo");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("cargo"), "#!/bin/sh\necho 'cargo 1.63.0'\n").unwrap();
    std::fs::set_permissions(fake.join("cargo"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", fake.display());
    let prefix = case.inst.root.join("prefix-old-rust");
    // Built as the test user, who has no rustup toolchain of their own.
    let out = install(&prefix, &[("PATH", &path), ("SUDO_USER", TEST_USER)]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("needs Rust >= ") && err.contains("1.63.0") && err.contains("rustup"), "{err}");
    assert!(!prefix.join("libexec/prov/prov-helper").exists(), "nothing installed");
}

/// Whether a 64-bit little-endian ELF image has a PT_INTERP program header.
fn has_program_interpreter(image: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    assert_eq!(&image[..6], b"\x7fELF\x02\x01", "a 64-bit little-endian ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(image[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(image[0x20..0x28].try_into().unwrap()) as usize;
    let (entry_size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * entry_size;
        u32::from_le_bytes(image[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}
