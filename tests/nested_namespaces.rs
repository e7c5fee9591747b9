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
    record_listing(case, text, also, &["--files"])
}

/// The newest record whose text contains `text`, with every file it has.
fn record_with_all_files(case: &Case, text: &str) -> Value {
    record_listing(case, text, |_| true, &["--files", "--all-files"])
}

fn record_listing(case: &Case, text: &str, also: impl Fn(&str) -> bool, files: &[&str]) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = case.query(["history", "-n", "5"].iter().chain(files));
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
    case.run_sh("unshare -Urm sh -c 'echo u > userns.txt'");
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
    squashfs_image(&case, "echo from-image > \"$1\"");
    // Unmounted at the end, as Apptainer does: the FUSE server, a process
    // of the command, would otherwise keep the record open as long as it
    // lives. Lazily: events on the mount that prov has not read yet hold
    // it busy for a moment (docs/containers.md).
    case.run_sh(
        "unshare -Urm sh -c 'mkdir -p mnt && squashfuse tool.sqfs mnt && mnt/bin/tool container-out.txt; fusermount -uz mnt'",
    );
    assert_eq!(std::fs::read(case.work.join("container-out.txt")).unwrap(), b"from-image\n");
    let r = record_of(&case, "squashfuse");
    assert_followed(&r, "unshare");
    let host = case.work.join("container-out.txt").to_string_lossy().into_owned();
    assert!(written(&r).contains(&host), "{host} missing from {r:#}");
}

/// `tool.sqfs` in the work directory: an image whose `bin/tool` runs `script`.
fn squashfs_image(case: &Case, script: &str) {
    let image = case.work.join("image");
    std::fs::create_dir_all(image.join("bin")).unwrap();
    std::fs::write(image.join("bin/tool"), format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(image.join("bin/tool"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let made = std::process::Command::new("mksquashfs")
        .arg(&image)
        .arg(case.work.join("tool.sqfs"))
        .args(["-quiet", "-noappend"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));
    case.chown_tree(&case.work);
}

/// The same with the 10 000-file workload run from the image.
#[test]
fn ten_thousand_files_from_a_squashfs_image_are_recorded() {
    let case = Case::new("nested-squashfs-10k");
    squashfs_image(&case, TEN_THOUSAND);
    case.run_sh("unshare -Urm sh -c 'mkdir -p mnt && squashfuse tool.sqfs mnt && mnt/bin/tool; fusermount -uz mnt'");
    let r = record_with_all_files(&case, "squashfuse");
    assert_followed(&r, "unshare");
    assert_ten_thousand_recorded(&case, &r, "unshare", false);
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
    let missing: Vec<usize> = (0..10_000).filter(|i| !wrote.contains(&format!("{out}/{i}"))).collect();
    let (first, last) = (missing.first(), missing.last());
    assert_eq!(
        wrote.len(),
        10_000,
        "recorded at host paths: {} of 10000; missed out/{first:?}..out/{last:?}",
        wrote.len()
    );
}

/// The record of a 10 000-file workload (written to `out/`, then read back)
/// run by `tool`, whose record says it may lack files (incomplete, naming
/// the tool). `prompt`: the tool waits until prov's marks are in place
/// (bwrap's and runc's pivot_root), so at least 99 % of the writes and of
/// the reads are recorded at their host paths; else (`unshare`) what is
/// missed is the first moments only: every write from the first one
/// recorded on, and every read. The figures are printed for the report.
fn assert_ten_thousand_recorded(case: &Case, r: &Value, tool: &str, prompt: bool) {
    assert_eq!(r["complete"], false, "{tool}: {}", reason(r));
    assert!(reason(r).contains(&format!("{tool} (pid ")), "{}", reason(r));
    let seen = |access: &str| -> Vec<bool> {
        let got: std::collections::HashSet<Vec<u8>> =
            files(r).into_iter().filter(|(a, _)| a == access).map(|(_, p)| p).collect();
        (0..10_000).map(|i| got.contains(&bytes_of(&case.work.join(format!("out/{i}"))))).collect()
    };
    let (wrote, read) = (seen("write"), seen("read"));
    let count = |v: &[bool]| v.iter().filter(|&&s| s).count();
    let first = wrote.iter().position(|&s| s).unwrap_or(10_000);
    eprintln!(
        "{tool}: 10000 files, {} writes and {} reads recorded at host paths (the first write recorded: out/{first}); {}",
        count(&wrote),
        count(&read),
        reason(r)
    );
    if prompt {
        assert!(
            count(&wrote) >= 9_900 && count(&read) >= 9_900,
            "{tool}: {} writes, {} reads",
            count(&wrote),
            count(&read)
        );
    } else {
        assert!(wrote[first..].iter().all(|&s| s), "{tool}: a write missed after out/{first} was recorded");
        assert!(count(&read) >= 9_900, "{tool}: {} reads of 10000", count(&read));
    }
}

/// The workload: 10 000 files written in `out/`, then all read back.
const TEN_THOUSAND: &str =
    "mkdir out; i=0; while [ $i -lt 10000 ]; do echo $i > out/$i; i=$((i+1)); done; cat out/* > /dev/null";

/// `unshare -Urm` makes its mounts private before it runs its program, and
/// that mount waits until the new namespace is marked: a workload of
/// 10 000 files is recorded from its first file.
#[test]
fn ten_thousand_files_after_unshare_are_recorded() {
    let case = Case::new("nested-unshare-10k");
    case.run_sh(&format!("unshare -Urm sh -c '{TEN_THOUSAND}'"));
    let r = record_with_all_files(&case, "unshare -Urm");
    assert_followed(&r, "unshare");
    assert_ten_thousand_recorded(&case, &r, "unshare", true);
}

/// A program run by `unshare -Urm` that writes at once, ten times: each
/// file is recorded (the race with the marks is gone, not just narrow).
#[test]
fn a_write_right_after_unshare_is_recorded_every_time() {
    let case = Case::new("nested-unshare-quick");
    let missed: Vec<usize> = (0..10)
        .filter(|i| {
            let file = format!("quick-{i}.txt");
            case.run_sh(&format!("unshare -Urm sh -c 'echo {i} > {file}'"));
            // prov run returns once its record is stored.
            !case.query(["wrote", &file]).iter().any(|r| r["text"].as_str().is_some_and(|t| t.contains(&file)))
        })
        .collect();
    assert!(missed.is_empty(), "not recorded: runs {missed:?} of 10");
}

/// A tmpfs mounted inside the namespace, and a write to the working
/// directory: the cwd's file at its host path, the tmpfs's behind the marker.
#[test]
fn unshare_with_a_tmpfs_inside_records_both_places() {
    let case = Case::new("nested-unshare-tmpfs");
    case.run_sh(
        "mkdir scratch && unshare -Urm sh -c 'mount -t tmpfs none scratch; sleep 0.2; \
         echo t > scratch/t; cat scratch/t > cwd.txt'",
    );
    assert_eq!(std::fs::read(case.work.join("cwd.txt")).unwrap(), b"t\n");
    let r = case.writer_of_eventually("cwd.txt");
    assert_followed(&r, "unshare");
    let wrote = written(&r);
    let on_tmpfs = format!("]{}/scratch/t", case.work.display());
    let inside: Vec<&String> = wrote.iter().filter(|p| p.ends_with(&on_tmpfs)).collect();
    assert!(inside.len() == 1 && inside[0].starts_with("[unshare:"), "the tmpfs file, marked: {wrote:?}");
    assert!(
        !wrote.iter().any(|p| p == &case.work.join("scratch/t").to_string_lossy()),
        "a tmpfs of the namespace's own given a host path: {wrote:?}"
    );
}

/// `nsenter` into a namespace the user made earlier (held by a process of
/// the command): the namespace is entered with setns, followed, and the
/// file written there is recorded at its host path.
#[test]
fn a_namespace_entered_with_setns_is_followed() {
    let case = Case::new("nested-setns-follow");
    case.run_sh(
        "unshare -Urm --propagation private sleep 30 & holder=$!; sleep 1; \
         nsenter -U -m -t $holder --preserve-credentials sh -c 'cd \"$0\"; sleep 0.2; echo e > entered.txt' \"$PWD\"; \
         kill $holder",
    );
    assert_eq!(std::fs::read(case.work.join("entered.txt")).unwrap(), b"e\n");
    let r = case.writer_of_eventually("entered.txt");
    let why = reason(&r);
    assert_eq!(r["complete"], false, "{r:#}");
    assert!(why.contains("nsenter (pid ") && why.contains("entered another mount namespace, followed in"), "{why}");
}

/// A namespace held by a process started outside any observation, entered
/// by a traced command: followed as well (the user made it).
#[test]
fn a_namespace_made_before_the_command_is_followed_when_entered() {
    let case = Case::new("nested-setns-earlier");
    let mut holder = case.command("unshare");
    holder.args(["-Urm", "--propagation", "private", "sleep", "30"]);
    let mut holder = holder.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    case.run_sh(&format!(
        "nsenter -U -m -t {} --preserve-credentials sh -c 'cd \"$0\"; sleep 0.2; echo e > entered.txt' \"$PWD\"",
        holder.id()
    ));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let r = case.writer_of_eventually("entered.txt");
    let why = reason(&r);
    assert_eq!(nested_calls(&r), 1, "{why}");
    assert!(why.contains("entered another mount namespace, followed in"), "{why}");
}

/// Rootless podman for the test user, without a registry: storage and
/// runtime directory in the case's home, and an image `localbox` imported
/// from a root filesystem of busybox-static (as the Docker tests build
/// theirs from a local root). Importing starts podman's pause process,
/// which holds the user and mount namespace later podman commands enter
/// with setns; it is stopped when this is dropped.
struct Podman<'a> {
    case: &'a Case,
    runtime: std::path::PathBuf,
}

impl<'a> Podman<'a> {
    fn new(case: &'a Case) -> Podman<'a> {
        let root = case.home.join("rootfs");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        for dir in ["work", "tmp", "proc", "dev", "sys", "etc"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
        for tool in ["sh", "echo", "cat", "mkdir", "sleep"] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(tool)).unwrap();
        }
        let tar = case.home.join("rootfs.tar");
        let made =
            std::process::Command::new("tar").arg("-C").arg(&root).arg("-cf").arg(&tar).arg(".").output().unwrap();
        assert!(made.status.success(), "{}", describe(&made));
        let runtime = case.home.join("run");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        case.chown_tree(&case.home);
        let podman = Podman { case, runtime };
        let imported = podman.untraced().args(["import", "--quiet"]).arg(&tar).arg("localbox").output().unwrap();
        assert!(imported.status.success(), "podman import: {}", describe(&imported));
        podman
    }

    /// `podman` as the test user, outside any observation.
    fn untraced(&self) -> std::process::Command {
        let mut cmd = self.case.command("podman");
        cmd.env("XDG_RUNTIME_DIR", &self.runtime);
        cmd
    }

    /// `prov run -- podman run --rm --network none -v $PWD:/work -w /work
    /// localbox sh -c SCRIPT`, asserting it ran traced and succeeded.
    fn run_traced(&self, script: &str) {
        let mut cmd = self.case.command(self.case.inst.prov());
        cmd.env("XDG_RUNTIME_DIR", &self.runtime).args(["run", "--", "podman", "run", "--rm", "--network", "none"]);
        cmd.arg("-v").arg(format!("{}:/work", self.case.work.display()));
        cmd.args(["-w", "/work", "localbox", "sh", "-c", script]);
        let out = cmd.output().unwrap();
        assert_traced(&out);
        assert!(out.status.success(), "{script}: {}", describe(&out));
    }

    /// The pause process, if one runs.
    fn pause_pid(&self) -> Option<i32> {
        let pid = std::fs::read_to_string(self.runtime.join("libpod/tmp/pause.pid")).ok()?;
        let pid: i32 = pid.trim().parse().ok()?;
        std::path::Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    fn stop_pause(&self) {
        if let Some(pid) = self.pause_pid() {
            // SAFETY: kill has no memory effects; the pid is this test's
            // podman's pause process, read from its own runtime directory.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = std::fs::remove_file(self.runtime.join("libpod/tmp/pause.pid"));
        }
    }
}

impl Drop for Podman<'_> {
    fn drop(&mut self) {
        self.stop_pause();
    }
}

/// The common case: podman's pause process already runs (started by an
/// earlier podman command), the traced `podman run` enters its namespaces
/// with setns, and the runtime makes the container's mount namespace in
/// there. Both are followed: what the container writes and reads on the
/// bound working directory is recorded at host paths.
#[test]
fn rootless_podman_writing_to_a_bound_directory_is_recorded() {
    let case = Case::new("nested-podman");
    let podman = Podman::new(&case);
    assert!(podman.pause_pid().is_some(), "podman import started no pause process");
    podman.run_traced("echo p > p.txt; cat p.txt > p2.txt");
    assert_eq!(std::fs::read(case.work.join("p2.txt")).unwrap(), b"p\n");
    let r = record_of(&case, "podman run");
    let why = reason(&r);
    assert_eq!(r["complete"], false, "{r:#}");
    assert!(why.contains("podman (pid ") && why.contains("entered another mount namespace, followed in"), "{why}");
    assert!(why.ends_with("may be missing"), "every namespace followed: {why}");
    let wrote = written(&r);
    for name in ["p.txt", "p2.txt"] {
        let host = case.work.join(name).to_string_lossy().into_owned();
        assert!(wrote.contains(&host), "{host} missing ({why}) from {wrote:?}");
    }
    assert!(files(&r).contains(&("read".into(), bytes_of(&case.work.join("p.txt")))), "{r:#}");
    assert!(!wrote.iter().any(|p| p.starts_with("/work/")), "an inside path for a host file: {wrote:?}");
}

/// A 10 000-file workload inside a podman container.
#[test]
fn ten_thousand_files_in_a_podman_container_are_recorded() {
    let case = Case::new("nested-podman-10k");
    let podman = Podman::new(&case);
    podman.run_traced(TEN_THOUSAND);
    let r = record_with_all_files(&case, "podman run");
    assert_ten_thousand_recorded(&case, &r, "podman", true);
}

/// The same typed into interactive bash and zsh: each shell's podman
/// command has its container's file at its host path.
#[test]
fn rootless_podman_typed_into_bash_and_zsh() {
    let case = Case::new("nested-podman-typed");
    let podman = Podman::new(&case);
    for shell_name in ["bash", "zsh"] {
        let mut shell = Shell::start(&case, shell_name);
        shell.run(&format!("export XDG_RUNTIME_DIR={}", podman.runtime.display()));
        let file = format!("typed-{shell_name}.txt");
        shell.run(&format!(
            "podman run --rm --network none -v \"$PWD\":/work -w /work localbox sh -c 'echo {shell_name} > {file}'"
        ));
        assert_eq!(std::fs::read(case.work.join(&file)).unwrap(), format!("{shell_name}\n").as_bytes());
        let r = record_of(&case, &file);
        let why = reason(&r);
        assert!(why.contains("podman (pid ") && why.contains("followed in"), "{shell_name}: {why}");
        let host = case.work.join(&file).to_string_lossy().into_owned();
        assert!(written(&r).contains(&host), "{shell_name}: {host} missing ({why}) from {:?}", written(&r));
        shell.exit();
    }
}
