//! Commands that make or enter a mount namespace of their own (bwrap,
//! `unshare -m`, the way Apptainer and podman start a container): the
//! observation's marks do not reach in there by themselves. A namespace the
//! user made is followed (its mounts marked as soon as it exists), so what
//! is written there on host filesystems is recorded at its host path, and
//! what has no host path (a tmpfs of the sandbox) at its path inside,
//! marked; the record still never says it is complete, and names the
//! program. Run as the ordinary user with the real tools (Debian's
//! bubblewrap and util-linux), through `prov run` and typed into bash and
//! zsh.

use prov_e2e::pty::Shell;
use prov_e2e::*;
use serde_json::Value;

/// The record's completeness as `prov query --json` gives it.
fn nested_calls(record: &Value) -> u64 {
    record["incomplete"]["nested_namespaces"].as_u64().unwrap_or(0)
}

fn reason(record: &Value) -> String {
    record["incomplete_reason"].as_str().unwrap_or_default().to_string()
}

/// The newest record whose text contains `text`, once it has ended.
fn record_of(case: &Case, text: &str) -> Value {
    record_where(case, text, |_| true)
}

/// The newest record whose text contains `text` and passes `also`.
fn record_where(case: &Case, text: &str, also: impl Fn(&str) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = case.query(["history", "-n", "5", "--files"]);
        if let Some(r) = found.into_iter().find(|r| r["text"].as_str().is_some_and(|t| t.contains(text) && also(t))) {
            if !r["end_ns"].is_null() || std::time::Instant::now() > deadline {
                return r;
            }
        } else {
            assert!(std::time::Instant::now() < deadline, "no record of {text:?}: {}", case.collector_state());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The paths a record wrote, as text.
fn written(r: &Value) -> Vec<String> {
    files(r)
        .into_iter()
        .filter(|(access, _)| access == "write")
        .map(|(_, p)| String::from_utf8_lossy(&p).into_owned())
        .collect()
}

/// The reason of a record whose every namespace was followed: it names
/// the program, says it was followed and that earlier files may be missing.
fn assert_followed(r: &Value, program: &str) {
    assert_eq!(r["complete"], false, "{r:#}");
    assert!(nested_calls(r) >= 1, "{r:#}");
    let why = reason(r);
    assert!(why.contains(&format!("{program} (pid ")) && why.contains("made a mount namespace of its own"), "{why}");
    assert!(why.contains("followed in") && why.ends_with("may be missing"), "{why}");
}

#[test]
fn unshare_with_a_mount_namespace_is_followed_and_named() {
    let case = Case::new("nested-unshare");
    case.run_sh("unshare -Urm sh -c 'sleep 0.2; echo u > userns.txt'");
    assert!(case.work.join("userns.txt").exists());
    // Found by its host path, and the record says what it may lack.
    let r = case.writer_of_eventually("userns.txt");
    assert!(r["text"].as_str().unwrap().contains("unshare -Urm"), "{r:#}");
    assert_followed(&r, "unshare");
    assert_eq!(nested_calls(&r), 1, "{r:#}");
}

#[test]
fn bwrap_binding_the_root_is_recorded_at_host_paths() {
    let case = Case::new("nested-bwrap");
    case.run_sh("bwrap --dev-bind / / sh -c 'sleep 0.2; echo b > bw.txt; cp bw.txt bw2.txt'");
    let r = record_of(&case, "bwrap --dev-bind");
    assert_eq!(std::fs::read(case.work.join("bw2.txt")).unwrap(), b"b\n");
    assert_followed(&r, "bwrap");
    let wrote = written(&r);
    for name in ["bw.txt", "bw2.txt"] {
        let host = case.work.join(name).to_string_lossy().into_owned();
        assert!(wrote.contains(&host), "{host} missing from {wrote:?}");
    }
    assert!(files(&r).contains(&("read".into(), bytes_of(&case.work.join("bw.txt")))), "{r:#}");
    // The human listing says it too.
    let shown = case.prov(["query", "history", "-n", "1"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("bwrap (pid "), "{text}");
}

/// The working directory bound at another place inside: a file written
/// there is recorded at its host path; one on a tmpfs of the sandbox's own
/// has no host path and is recorded as seen inside, behind the program's
/// marker.
#[test]
fn bwrap_binding_the_working_directory_elsewhere_is_recorded_at_host_paths() {
    let case = Case::new("nested-bwrap-bind");
    case.run_sh(
        "bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
         --proc /proc --dev /dev --bind \"$PWD\" /work --tmpfs /scratch --chdir /work \
         sh -c 'sleep 0.2; echo x > x; echo s > /scratch/s; cat /scratch/s > y'",
    );
    assert_eq!(std::fs::read(case.work.join("y")).unwrap(), b"s\n");
    let r = case.writer_of_eventually("x");
    assert_followed(&r, "bwrap");
    let wrote = written(&r);
    assert!(wrote.contains(&case.work.join("y").to_string_lossy().into_owned()), "{wrote:?}");
    assert!(!wrote.iter().any(|p| p == "/work/x"), "an inside path for a host file: {wrote:?}");
    let inside: Vec<&String> = wrote.iter().filter(|p| p.ends_with("]/scratch/s")).collect();
    assert!(inside.len() == 1 && inside[0].starts_with("[bwrap:"), "the tmpfs file, marked: {wrote:?}");
}

/// No false alarm: a user namespace alone, threads (clone3 is refused by
/// the filter and the C library falls back to clone), a new network
/// namespace: the record stays complete and its files are there.
#[test]
fn other_namespaces_and_threads_keep_the_record_complete() {
    let case = Case::new("nested-none");
    case.run_sh(
        "unshare -Ur sh -c 'echo u > only-user.txt' && \
         python3 -c 'import threading; t = threading.Thread(target=open(\"thread.txt\", \"w\").write, args=(\"t\",)); t.start(); t.join()' && \
         unshare -Urn sh -c 'echo n > net.txt'",
    );
    let r = record_of(&case, "only-user.txt");
    assert_eq!(r["complete"], true, "{r:#}");
    assert_eq!(nested_calls(&r), 0);
    let written: Vec<String> = files(&r)
        .into_iter()
        .filter(|(access, _)| access == "write")
        .map(|(_, p)| String::from_utf8_lossy(&p).into_owned())
        .collect();
    for name in ["only-user.txt", "thread.txt", "net.txt"] {
        assert!(written.iter().any(|p| p.ends_with(name)), "{name} missing from {written:?}");
    }
}

/// `nsenter -m` into a namespace (here one made by the command itself)
/// counts as entering another: setns is watched as unshare is.
#[test]
fn entering_another_mount_namespace_is_named() {
    let case = Case::new("nested-setns");
    case.run_sh("unshare -Urm --propagation private sleep 30 & sleep 1; nsenter -U -m -t $! --preserve-credentials true; kill $!");
    let r = record_of(&case, "nsenter");
    assert_eq!(r["complete"], false, "{r:#}");
    let why = reason(&r);
    assert!(why.contains("entered another mount namespace") || why.contains("made a mount namespace"), "{why}");
    assert!(nested_calls(&r) >= 2, "{r:#}");
}

fn typed_into(shell_name: &'static str) {
    let case = Case::new(&format!("nested-{shell_name}"));
    let mut shell = Shell::start(&case, shell_name);
    shell.run("bwrap --dev-bind / / sh -c 'sleep 0.2; echo z > typed.txt'");
    shell.run("echo after > plain.txt");
    let r = record_of(&case, "typed.txt");
    assert_followed(&r, "bwrap");
    let host = case.work.join("typed.txt").to_string_lossy().into_owned();
    assert!(written(&r).contains(&host), "{host} missing from {r:#}");
    // The next command is not tainted by it.
    let plain = record_of(&case, "plain.txt");
    assert_eq!(plain["complete"], true, "{plain:#}");
    shell.exit();
}

#[test]
fn typed_into_bash() {
    typed_into("bash");
}

#[test]
fn typed_into_zsh() {
    typed_into("zsh");
}

/// A prov run inside a traced command keeps the enclosing filter (one
/// listener per process): the enclosing collector tells the inner record,
/// and does not count prov's own helper making the inner observation.
#[test]
fn a_traced_command_inside_a_traced_command_is_told() {
    let case = Case::new("nested-observations");
    let prov = case.inst.prov();
    let inner = "unshare -Urm sh -c 'echo i > inner.txt'";
    let out = case
        .command(&prov)
        .args(["run", "--", "sh", "-c"])
        .arg(format!("{} run -- {inner}; echo o > outer.txt", prov.display()))
        .output()
        .unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let inner_record = record_where(&case, "echo i > inner.txt", |text| !text.contains("outer.txt"));
    assert_eq!(inner_record["complete"], false, "{inner_record:#}");
    assert_eq!(nested_calls(&inner_record), 1, "{inner_record:#}");
    assert!(reason(&inner_record).contains("unshare (pid "), "{}", reason(&inner_record));
    let outer_record = record_of(&case, "outer.txt");
    assert_eq!(nested_calls(&outer_record), 0, "prov's own observation is not the outer's loss: {outer_record:#}");
}

/// Apptainer's unprivileged path, by hand: a squashfs image mounted with
/// squashfuse inside a user and mount namespace, and a program from it that
/// writes to the working directory.
#[test]
fn a_program_from_a_squashfs_image_in_its_own_namespace_is_followed() {
    let case = Case::new("nested-squashfs");
    let image = case.work.join("image");
    std::fs::create_dir_all(image.join("bin")).unwrap();
    std::fs::write(image.join("bin/tool"), "#!/bin/sh\necho from-image > \"$1\"\n").unwrap();
    std::fs::set_permissions(image.join("bin/tool"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let made = std::process::Command::new("mksquashfs")
        .arg(&image)
        .arg(case.work.join("tool.sqfs"))
        .args(["-quiet", "-noappend"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));
    case.chown_tree(&case.work);
    // Unmounted at the end, as Apptainer does: the FUSE server, a process
    // of the command, would otherwise keep the record open as long as it lives.
    case.run_sh(
        "unshare -Urm sh -c 'mkdir -p mnt && squashfuse tool.sqfs mnt && mnt/bin/tool container-out.txt; fusermount -u mnt'",
    );
    assert_eq!(std::fs::read(case.work.join("container-out.txt")).unwrap(), b"from-image\n");
    let r = record_of(&case, "squashfuse");
    assert_followed(&r, "unshare");
    let host = case.work.join("container-out.txt").to_string_lossy().into_owned();
    assert!(written(&r).contains(&host), "{host} missing from {r:#}");
}

/// A namespace made with privilege (a setuid-root bwrap, as some
/// distributions install it) is not the user's to have marked: the helper
/// refuses it, and the record says its files were not seen.
#[test]
fn a_namespace_made_by_a_setuid_program_is_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new("nested-setuid-bwrap");
    let bwrap = case.work.join("bwrap-setuid");
    std::fs::copy("/usr/bin/bwrap", &bwrap).unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o4755)).unwrap();
    case.run_sh("./bwrap-setuid --dev-bind / / sh -c 'sleep 0.2; echo s > suid.txt'");
    assert_eq!(std::fs::read(case.work.join("suid.txt")).unwrap(), b"s\n");
    let r = record_of(&case, "bwrap-setuid");
    assert_eq!(r["complete"], false, "{r:#}");
    let why = reason(&r);
    assert!(why.contains("bwrap-setuid (pid ") && why.contains("not followed"), "{why}");
    assert!(why.ends_with("files used there were not seen"), "{why}");
    assert!(!written(&r).iter().any(|p| p.ends_with("suid.txt")), "{r:#}");
}

/// A workload of 10 000 files written inside a sandbox, on the working
/// directory bound at another place: every one is recorded at its host path
/// (the sandbox waits at its pivot_root until its mounts are marked).
#[test]
fn ten_thousand_files_written_in_a_sandbox_are_recorded() {
    let case = Case::new("nested-bwrap-10k");
    case.run_sh(
        "bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
         --proc /proc --dev /dev --bind \"$PWD\" /work --chdir /work \
         sh -c 'mkdir out; i=0; while [ $i -lt 10000 ]; do echo $i > out/$i; i=$((i+1)); done'",
    );
    let mut all = case.query(["wrote", "out/0", "--all-files"]);
    assert_eq!(all.len(), 1, "{all:#?}");
    let r = all.pop().unwrap();
    assert_followed(&r, "bwrap");
    let out = case.work.join("out").to_string_lossy().into_owned();
    let wrote: std::collections::HashSet<String> =
        written(&r).into_iter().filter(|p| p.starts_with(&format!("{out}/"))).collect();
    assert_eq!(wrote.len(), 10_000, "recorded at host paths: {} of 10000", wrote.len());
}
