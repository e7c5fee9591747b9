//! The setuid helper treats every input as hostile: these attacks must be
//! refused with a clear error and no privileged action, and what it runs must
//! hold nothing of root.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use prov_e2e::*;

#[path = "helper_attacks/helper_hardening.rs"]
mod helper_hardening;
#[path = "helper_attacks/namespace_filter.rs"]
mod namespace_filter;
#[path = "helper_attacks/nested_marks.rs"]
mod nested_marks;
#[path = "helper_attacks/privilege_separation.rs"]
mod privilege_separation;
#[path = "helper_attacks/root_with_user_env.rs"]
mod root_with_user_env;
#[path = "helper_attacks/terminal_escapes.rs"]
mod terminal_escapes;

/// Two tests use up root's own quotas for a moment (mount namespaces,
/// fanotify groups); a test that makes a namespace or a fanotify group as
/// root meanwhile would fail. Those take `root_quota_shared`, the two take
/// `root_quota_used_up`. (Test binaries run one after another: only this
/// one's tests overlap.)
static ROOT_QUOTA: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn root_quota_shared() -> std::sync::RwLockReadGuard<'static, ()> {
    ROOT_QUOTA.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn root_quota_used_up() -> std::sync::RwLockWriteGuard<'static, ()> {
    ROOT_QUOTA.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn helper(case: &Case) -> Command {
    case.command(case.inst.helper())
}

/// Runs the helper's join mode as the user against `pid`. The join must be
/// refused: the target still runs (a dead observation must not cost the user
/// their command), but as the plain user and in the caller's own namespace.
fn join_refused(case: &Case, pid: u32) -> String {
    let marker = case.work.join(format!("ran-{pid}"));
    let out = helper(case)
        .args(["join", &pid.to_string(), "0", "-", "/bin/sh", "sh", "-c"])
        .arg(format!(
            "{{ readlink /proc/self/ns/mnt; grep -E '^(Uid|CapEff):' /proc/self/status; }} > {}",
            marker.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("refusing to join") && err.contains("untraced"), "{err}");
    let seen = std::fs::read_to_string(&marker).expect("the target ran");
    let own_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    assert!(seen.starts_with(&format!("{}\n", own_ns.display())), "outside any observation: {seen}");
    let uid = case.inst.uid;
    assert!(seen.contains(&format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}")), "{seen}");
    assert!(seen.contains("CapEff:\t0000000000000000"), "{seen}");
    err
}

#[test]
fn forged_holder_is_refused() {
    let case = Case::new("forged");
    // Same uid as the user, but not the prov group: an ordinary process.
    let mut sleeper = case.command("sleep").arg("30").spawn().unwrap();
    let err = join_refused(&case, sleeper.id());
    assert!(err.contains("refusing to join"), "{err}");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Root's init and a nonexistent pid are refused alike.
    assert!(join_refused(&case, 1).contains("refusing to join"));
    assert!(join_refused(&case, 4_000_000).contains("refusing to join"));
}

/// The command gets the caller's environment, byte for byte: with ENV_FD
/// `-` (what prov's callers pass), the one the helper was executed with,
/// including the LD_* and TMPDIR entries that glibc's secure mode deletes
/// from a setuid program's own; with a descriptor (a shell whose shim
/// predates `-`), the NAME=VALUE entries read from it. Refused joins run
/// the command this way too.
#[test]
fn the_command_gets_the_callers_environment_whole_either_way() {
    let case = Case::new("join-env");
    let mut sleeper = case.command("sleep").arg("30").spawn().unwrap();
    let big = "x".repeat(100_000);
    let odd = std::ffi::OsStr::from_bytes(b"a\nb\xff=c");
    let env_of = |env_fd: &str, stdin: Stdio| {
        let out = helper(&case)
            .args(["join", &sleeper.id().to_string(), env_fd, "-", "/usr/bin/env", "env", "-0"])
            .env("LD_LIBRARY_PATH", "/opt/lib")
            .env("TMPDIR", "/tmp/user-tmp")
            .env("BIG", &big)
            .env("ODD", odd)
            .stdin(stdin)
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to join"), "{}", describe(&out));
        let mut entries: Vec<Vec<u8>> =
            out.stdout.split(|&b| b == 0).filter(|e| !e.is_empty()).map(<[u8]>::to_vec).collect();
        entries.sort();
        entries
    };
    let own = env_of("-", Stdio::null());
    for entry in
        [&b"LD_LIBRARY_PATH=/opt/lib"[..], b"TMPDIR=/tmp/user-tmp", b"ODD=a\nb\xff=c", format!("BIG={big}").as_bytes()]
    {
        assert!(
            own.iter().any(|e| e == entry),
            "{} among the {} entries",
            String::from_utf8_lossy(&entry[..40.min(entry.len())]),
            own.len()
        );
    }
    let file = case.write("env", b"A=1\0TMPDIR=/elsewhere\0not an entry\0");
    let passed = env_of("0", Stdio::from(std::fs::File::open(&file).unwrap()));
    assert_eq!(passed, [b"A=1".to_vec(), b"TMPDIR=/elsewhere".to_vec()], "only the descriptor's entries");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn user_made_namespace_is_refused() {
    let case = Case::new("userns");
    let mut ns = case.command("unshare").args(["-Urm", "sleep", "30"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let err = join_refused(&case, ns.id());
    assert!(err.contains("refusing to join"), "{err}");
    ns.kill().unwrap();
    ns.wait().unwrap();
}

/// A holder look-alike only root can make: the user's uid and the prov
/// group, but its mount namespace belongs to a user namespace it created
/// (where it is root). The uid and group checks pass; the owner check must
/// refuse it.
#[test]
fn namespace_owned_by_another_user_namespace_is_refused() {
    let case = Case::new("nsowner");
    let mut ns = Command::new("setpriv")
        .arg(format!("--reuid={}", case.inst.uid))
        .arg(format!("--regid={}", prov_gid()))
        .args(["--clear-groups", "unshare", "-Urm", "sleep", "30"])
        .spawn()
        .unwrap();
    let own_userns = std::fs::read_link("/proc/self/ns/user").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_link(format!("/proc/{}/ns/user", ns.id())).is_ok_and(|l| l == own_userns)
        || std::fs::read_to_string(format!("/proc/{}/comm", ns.id())).unwrap_or_default() != "sleep\n"
    {
        assert!(std::time::Instant::now() < deadline, "unshare -Urm did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let err = join_refused(&case, ns.id());
    ns.kill().unwrap();
    ns.wait().unwrap();
    assert!(err.contains("belongs to another user namespace"), "{err}");
}

fn prov_gid() -> u32 {
    let out = Command::new("getent").args(["group", "prov"]).output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    line.split(':').nth(2).and_then(|g| g.trim().parse().ok()).unwrap_or_else(|| panic!("group prov: {line:?}"))
}

/// The fanotify group counts against the user's fs.fanotify.max_user_groups,
/// not root's: with root's quota used up, the user is still traced. Root's
/// own `prov run` is the control showing the quota binds. Tests that act as
/// root wait meanwhile (`root_quota_shared`).
#[test]
fn fanotify_group_is_charged_to_the_user_not_root() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let _quota = root_quota_used_up();
    let user = Case::new("quota");
    let root = Case::new_as("quota-root", As::Root);
    let max: usize = std::fs::read_to_string("/proc/sys/fs/fanotify/max_user_groups").unwrap().trim().parse().unwrap();
    let mut groups: Vec<OwnedFd> = Vec::new();
    loop {
        // SAFETY: plain syscall; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::fanotify_init(libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC, libc::O_RDONLY as u32) };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "fanotify_init: {err}");
            break;
        }
        // SAFETY: fd was just returned by the kernel and nobody else owns it.
        groups.push(unsafe { OwnedFd::from_raw_fd(fd) });
        assert!(groups.len() <= max, "more than max_user_groups ({max}) groups for root");
    }
    let out = user.run(["sh", "-c", "echo x > charged.txt"]);
    let control = root.run(["sh", "-c", "echo ran"]);
    drop(groups);

    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let written = files(&user.writer_of("charged.txt"));
    assert!(written.contains(&("write".into(), bytes_of(&user.work.join("charged.txt")))), "{written:?}");

    assert!(control.status.success(), "{}", describe(&control));
    assert_eq!(control.stdout, b"ran\n");
    let err = String::from_utf8_lossy(&control.stderr);
    assert!(
        err.lines().any(|l| l.contains("not tracing") && l.contains("fs.fanotify.max_user_groups")),
        "{}",
        describe(&control)
    );
}

#[test]
fn garbage_argv_is_refused_with_usage() {
    let case = Case::new("argv");
    let attempts: &[&[&str]] = &[
        &[],
        &["observe"],
        &["observe", "3x"],
        &["observe", "-1"],
        &["observe", "99999999999999999999"],
        &["join"],
        &["join", "abc", "0", "-", "/bin/true", "true"],
        &["join", "12", "0", "-", "/bin/true"],
        &["join", "+12", "0", "-", "/bin/true", "true"],
        &["join", "0", "0", "-", "/bin/true", "true"],
        &["frobnicate", "1", "2", "3", "4", "5"],
        &["mark"],
        &["mark", "12"],
        &["mark", "12", "0"],
        &["mark", "abc", "3"],
        &["mark", "12", "3", "4"],
        &["mark-nested", "12", "3"],
        &["mark-nested", "12", "3", "x"],
        &["mark-nested", "12", "3", "0"],
        &["mark-nested", "12", "3", "4", "5"],
    ];
    for args in attempts {
        let out = helper(&case).args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("prov-helper: ") && err.contains("usage:"), "{args:?}: {err}");
    }
    let long = "9".repeat(100_000);
    let out = helper(&case).args(["join", &long, "0", "-", "/bin/true", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A setuid program started with its standard descriptors closed would
/// give the numbers 0-2 to the first files it opens, and messages meant for
/// the terminal would land in them. The helper has its own entry point,
/// without Rust's start-up, which opened them too: glibc's secure mode must,
/// and the target (run untraced here: the join of pid 1 is refused) gets
/// those devices there.
#[test]
fn closed_standard_descriptors_are_taken_by_dev_null_or_dev_full() {
    let case = Case::new("closed-stdio");
    let out = case.work.join("fds.txt");
    let script = format!(
        "exec 3</dev/null; exec {} join 1 3 - /bin/sh sh -c 'readlink /proc/self/fd/0 /proc/self/fd/2 > {}' <&- >&- 2>&-",
        case.inst.helper().display(),
        out.display()
    );
    let run = case.command("sh").args(["-c", &script]).output().unwrap();
    assert!(run.status.success(), "{}", describe(&run));
    // glibc puts /dev/full on 0 and /dev/null on 1 and 2.
    let seen = std::fs::read_to_string(&out).unwrap();
    assert!(seen.lines().count() == 2 && seen.lines().all(|l| l == "/dev/null" || l == "/dev/full"), "{seen}");
}

#[test]
fn helper_refuses_without_the_setuid_bit() {
    let case = Case::new("nosetuid");
    let copy = case.work.join("prov-helper-copy");
    std::fs::copy(case.inst.helper(), &copy).unwrap();
    case.chown_tree(&copy);
    let out = helper_at(&case, &copy).args(["join", "1", "0", "-", "/bin/true", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not installed setuid root"), "{}", describe(&out));
}

fn helper_at(case: &Case, path: &std::path::Path) -> Command {
    case.command(path)
}

#[test]
fn hostile_environment_is_ignored_when_privileged_and_restored_for_the_target() {
    let case = Case::new("hostile-env");
    // A library that leaves a marker named after the euid that loaded it.
    let src = case.write(
        "evil.c",
        br#"
        #include <stdio.h>
        #include <unistd.h>
        __attribute__((constructor)) static void mark(void) {
            char p[512];
            snprintf(p, sizeof p, "%s/loaded-by-euid-%d", MARKER_DIR, (int)geteuid());
            FILE *f = fopen(p, "w"); if (f) fclose(f);
        }"#,
    );
    let markers = case.work.join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    std::fs::set_permissions(&markers, std::fs::Permissions::from_mode(0o777)).unwrap();
    let lib = case.work.join("evil.so");
    let st = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(format!("-DMARKER_DIR=\"{}\"", markers.display()))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "gcc");
    let evil_bin = case.work.join("evilbin");
    std::fs::create_dir_all(&evil_bin).unwrap();
    std::fs::write(evil_bin.join("prov-collector"), "#!/bin/sh\ntouch /tmp/prov-e2e-pwned\n").unwrap();
    fake_libgcc(&evil_bin, &markers);
    // prov's own binaries are all linked statically; a program of the
    // user's that needs libgcc_s shows that the fake one works.
    let needs_libgcc = case.work.join("needs-libgcc");
    let st = Command::new("gcc")
        .args(["-x", "c", "-o"])
        .arg(&needs_libgcc)
        .args(["-", "-Wl,--no-as-needed", "-lgcc_s"])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut gcc| {
            gcc.stdin.take().unwrap().write_all(b"int main(void) { return 0; }\n")?;
            gcc.wait()
        })
        .unwrap();
    assert!(st.success(), "gcc needs-libgcc");
    case.chown_tree(&case.work);

    // Set by `env` after setpriv has become the user, so nothing of root's
    // own (setpriv) loads the library.
    let out = case
        .command("/usr/bin/env")
        .arg(format!("LD_PRELOAD={}", lib.display()))
        .arg(format!("LD_LIBRARY_PATH={}", evil_bin.display()))
        .arg("TMPDIR=/tmp/user-tmp")
        .arg(format!("PATH={}:/usr/bin:/bin", evil_bin.display()))
        .arg(case.inst.prov())
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "./needs-libgcc; printf '%s|%s|%s|%s' \"$LD_PRELOAD\" \"$LD_LIBRARY_PATH\" \"$TMPDIR\" \"$PATH\" > env.txt",
        ])
        .output()
        .unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!markers.join("loaded-by-euid-0").exists(), "LD_PRELOAD must never load into privileged code");
    assert!(markers.join(format!("loaded-by-euid-{}", case.inst.uid)).exists(), "the target got LD_PRELOAD back");
    assert!(!std::path::Path::new("/tmp/prov-e2e-pwned").exists());
    // LD_LIBRARY_PATH: the user's command, its environment restored, loads
    // the fake libgcc_s.so.1 (so it works); the setuid helper and the
    // collector it starts never may.
    let marks: Vec<String> =
        std::fs::read_dir(&markers).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(
        marks.contains(&format!("needs-libgcc-euid-{}", case.inst.uid)),
        "the user's command loads the fake libgcc_s: {marks:?}"
    );
    assert!(
        !marks.iter().any(|m| m == "prov-helper-euid-0"),
        "LD_LIBRARY_PATH honoured by the setuid helper: {marks:?}"
    );
    assert!(!marks.iter().any(|m| m.starts_with("prov-collector")), "LD_LIBRARY_PATH reached the collector: {marks:?}");
    assert!(!marks.iter().any(|m| m.ends_with("-euid-0")), "a library loaded with euid 0: {marks:?}");
    let env = std::fs::read_to_string(case.work.join("env.txt")).unwrap();
    assert_eq!(
        env,
        format!("{}|{}|/tmp/user-tmp|{}:/usr/bin:/bin", lib.display(), evil_bin.display(), evil_bin.display()),
        "the user's environment is restored for the target"
    );
    // And the command was observed: its write, and the preloaded library it read.
    let observed = files(&case.writer_of("env.txt"));
    assert!(observed.contains(&("write".into(), bytes_of(&case.work.join("env.txt")))), "{observed:?}");
    assert!(observed.contains(&("read".into(), bytes_of(&lib))), "{observed:?}");
}

/// Builds `dir/libgcc_s.so.1`: a stand-in for the real one whose constructor
/// leaves the marker `<executable name>-euid-<euid>` in `markers`, and which
/// pulls in a copy of the real library (`libgcc_s_real.so.1`, same dir) so
/// that programs loading it still find every `_Unwind_*` symbol.
fn fake_libgcc(dir: &Path, markers: &Path) {
    let found = Command::new("gcc").arg("-print-file-name=libgcc_s.so.1").output().unwrap();
    let real = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    assert!(Path::new(&real).is_absolute(), "gcc names the system's libgcc_s.so.1: {}", describe(&found));
    let src = dir.join("fake-libgcc.c");
    std::fs::write(
        &src,
        r#"
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>
        __attribute__((constructor)) static void mark(void) {
            char exe[512], p[1024];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n < 0) return;
            exe[n] = 0;
            const char *base = strrchr(exe, '/');
            snprintf(p, sizeof p, "%s/%s-euid-%d", MARKER_DIR, base ? base + 1 : exe, (int)geteuid());
            FILE *f = fopen(p, "w"); if (f) fclose(f);
        }"#,
    )
    .unwrap();
    // The binaries ask for these version nodes of libgcc_s.so.1; defining
    // them (empty) keeps ld.so from warning. The symbols come from the copy.
    let versions = dir.join("fake-libgcc.map");
    let nodes =
        ["GCC_3.0", "GCC_3.3", "GCC_3.3.1", "GCC_3.4", "GCC_3.4.2", "GCC_4.0.0", "GCC_4.2.0", "GCC_4.3.0", "GCC_7.0.0"];
    std::fs::write(&versions, nodes.iter().map(|n| format!("{n} {{ }};\n")).collect::<String>()).unwrap();
    // Linked against an empty stand-in named libgcc_s_real.so.1 (the real
    // library's soname is libgcc_s.so.1, which would make the fake need
    // itself), replaced by the copy of the real one afterwards.
    let real_copy = dir.join("libgcc_s_real.so.1");
    let gcc = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("gcc").args(args).output().unwrap();
        assert!(out.status.success(), "gcc {args:?}: {}", describe(&out));
    };
    std::fs::write(dir.join("empty.c"), "").unwrap();
    let os = |s: &str| std::ffi::OsString::from(s);
    gcc(&[
        &os("-shared"),
        &os("-fPIC"),
        &os("-Wl,-soname,libgcc_s_real.so.1"),
        &os("-o"),
        real_copy.as_os_str(),
        dir.join("empty.c").as_os_str(),
    ]);
    gcc(&[
        &os("-shared"),
        &os("-fPIC"),
        &os("-Wl,-soname,libgcc_s.so.1"),
        &os(&format!("-Wl,--version-script,{}", versions.display())),
        &os(&format!("-DMARKER_DIR=\"{}\"", markers.display())),
        &os("-o"),
        dir.join("libgcc_s.so.1").as_os_str(),
        src.as_os_str(),
        &os(&format!("-L{}", dir.display())),
        &os("-Wl,--no-as-needed"),
        &os("-l:libgcc_s_real.so.1"),
        &os(&format!("-Wl,-rpath,{}", dir.display())),
    ]);
    std::fs::copy(&real, &real_copy).unwrap();
}

#[test]
fn target_runs_with_the_users_ids_groups_and_no_capabilities() {
    let case = Case::new("creds");
    case.run_sh("cat /proc/self/status > status.txt; id -G > groups.txt");
    let status = std::fs::read_to_string(case.work.join("status.txt")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {status}"))
            .trim()
            .to_string()
    };
    let uid = case.inst.uid.to_string();
    let gid = case.inst.gid.to_string();
    assert_eq!(field("Uid:").split_whitespace().collect::<Vec<_>>(), vec![uid.as_str(); 4]);
    assert_eq!(field("Gid:").split_whitespace().collect::<Vec<_>>(), vec![gid.as_str(); 4]);
    for cap in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(field(cap), "0000000000000000", "{cap}");
    }
    // The helper is a Rust program, and Rust ignores SIGPIPE; an ignored
    // signal stays ignored across exec. Writers to a closed pipe would then
    // fail with EPIPE instead of ending quietly (`yes | head -1`).
    let ignored = u64::from_str_radix(&field("SigIgn:"), 16).unwrap();
    assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE is ignored in the target: SigIgn {ignored:016x}");
    let expected_groups = Command::new("id").args(["-G", TEST_USER]).output().unwrap().stdout;
    let groups = std::fs::read(case.work.join("groups.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&groups).trim(), String::from_utf8_lossy(&expected_groups).trim());
}

/// A setuid copy of cat reading a root-only file: its content and hash must
/// never reach the user's database, and the record says it is incomplete.
#[test]
fn setuid_descendants_never_leak_root_files() {
    let case = Case::new("setuid");
    let secret_text = format!("top secret {}", std::process::id());
    let secret = case.work.join("secret");
    std::fs::write(&secret, &secret_text).unwrap(); // root-owned
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let suid_cat = case.work.join("suidcat");
    std::fs::copy("/bin/cat", &suid_cat).unwrap();
    std::fs::set_permissions(&suid_cat, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let secret_hash = expected_hash(secret_text.as_bytes(), 256, 3);

    // Inside the command tree (the kernel runs it setuid in the namespace).
    let out = case.run(["sh", "-c", "./suidcat secret > /dev/null; echo done > after.txt"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let nested = case.writer_of("after.txt");
    assert_eq!(nested["complete"], false, "{nested:#}");
    assert!(nested["incomplete"]["denied"].as_u64().unwrap() >= 1);

    // Started directly: run outside the namespace, marked unobserved.
    let out = case.run(["./suidcat", "secret"]);
    assert_traced(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), secret_text, "the setuid program still works");
    let direct = case.last_command();
    assert_eq!(direct["complete"], false, "{direct:#}");
    assert_eq!(direct["incomplete"]["unobserved_setuid"], 1);

    for f in nested["files"].as_array().unwrap() {
        assert_ne!(f["hash"], secret_hash.as_str(), "secret's hash in the record");
        assert_ne!(path_bytes(f), bytes_of(&secret));
    }
    assert!(same_file(case.query(["read", "secret"])).is_empty(), "no read event of the secret");
    let db = std::fs::read(case.database()).unwrap();
    assert!(!db.windows(secret_text.len()).any(|w| w == secret_text.as_bytes()), "secret content in the database");
    let wal = std::fs::read(case.database().with_extension("db-wal")).unwrap_or_default();
    assert!(!wal.windows(secret_text.len()).any(|w| w == secret_text.as_bytes()));
}

/// The collector holds the fanotify group (which opens files without a
/// permission check) and the holder marks the namespace: the user must not be
/// able to reach into either of them.
#[test]
fn collector_and_holder_cannot_be_inspected_by_the_user() {
    let case = Case::new("nodump");
    let mut cmd = case.command(case.inst.prov()).args(["run", "--", "sleep", "3"]).spawn().unwrap();
    let (collector, holder) = observation_processes(case.inst.uid);
    let ours = [(collector, "prov-collector"), (holder, "prov-helper")];
    for (pid, comm) in &ours {
        for attempt in
            [format!("ls /proc/{pid}/fd"), format!("cat /proc/{pid}/environ"), format!("cat /proc/{pid}/mem")]
        {
            let out = case.command("sh").args(["-c", &attempt]).output().unwrap();
            assert!(!out.status.success(), "{comm} {pid}: `{attempt}` must be denied: {}", describe(&out));
        }
    }
    assert!(cmd.wait().unwrap().success());
}

/// The pids of the user's running collector and of its holder: the
/// prov-helper that is the collector's child, not a joining prov-helper of
/// a moment that becomes the command by the time it is looked at. Waits up
/// to 2 s for both.
fn observation_processes(uid: u32) -> (u32, u32) {
    let mut found = (None, None);
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let all = processes_of(uid);
        let collector = all.iter().find(|(_, _, comm)| comm == "prov-collector").map(|(pid, _, _)| *pid);
        let holder = all
            .iter()
            .find(|(_, ppid, comm)| comm == "prov-helper" && Some(*ppid) == collector)
            .map(|(pid, _, _)| *pid);
        found = (collector, holder);
        if let (Some(collector), Some(holder)) = found {
            return (collector, holder);
        }
    }
    panic!("collector and holder running: {found:?}");
}

/// `prov-helper mark HOLDER FD` marks an observation's mounts on the group
/// FD names; the user could hand it a group of their own (unprivileged
/// fanotify, FAN_REPORT_FID), on which the kernel lets root put mount marks:
/// it would then learn what every process of the observed namespace opens,
/// setuid programs included. The helper refuses any group but one made with
/// privilege, and no event reaches the user's group; and any caller but the
/// observation's own collector.
#[test]
fn mark_gives_a_users_own_fanotify_group_nothing() {
    // Root makes a fanotify group below.
    let _quota = root_quota_shared();
    let case = Case::new("markown");
    let script = "for i in $(seq 1 40); do echo $i > written.txt; sleep 0.05; done";
    let mut cmd = case.command(case.inst.prov()).args(["run", "--", "sh", "-c", script]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    // A group of the user's, inherited by the helper; after the helper has
    // marked, its events are read for a second while the command writes.
    let python = format!(
        r#"
import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
FAN_NONBLOCK, FAN_REPORT_FID = 0x2, 0x200
fd = libc.fanotify_init(FAN_NONBLOCK | FAN_REPORT_FID, os.O_RDONLY)
if fd < 0:
    sys.exit("fanotify_init: " + os.strerror(ctypes.get_errno()))
run = subprocess.run(["{helper}", "mark", "{holder}", str(fd)], pass_fds=(fd,), capture_output=True, text=True)
out = run.stdout + run.stderr + "exit=%d" % run.returncode
time.sleep(1)
events = 0
try:
    events = len(os.read(fd, 65536))
except BlockingIOError:
    pass
print(out.strip())
print("event bytes", events)
"#,
        helper = case.inst.helper().display()
    );
    let out = case.command("python3").args(["-c", &python]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(said.contains("exit=2") && said.contains("that reports descriptors"), "{said}");
    assert!(said.contains("event bytes 0"), "the user's own group got events: {said}");
    assert!(cmd.wait().unwrap().success());
    assert!(files(&case.writer_of("written.txt")).iter().any(|(a, _)| a == "write"), "the collector saw the writes");

    // A group made with privilege that some other program let slip to the
    // user (root makes one here and hands it over): refused all the same,
    // for the user's real observation as for any other process, since only
    // the observation's own collector may have it marked.
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "5"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    let mut sleeper = case.command("sleep").arg("30").spawn().unwrap();
    for pid in [holder, sleeper.id()] {
        let python = format!(
            r#"
import ctypes, os
libc = ctypes.CDLL(None)
fd = libc.fanotify_init(0x3, os.O_RDONLY)
os.set_inheritable(fd, True)
os.execvp("setpriv", ["setpriv", "--reuid={uid}", "--regid={gid}", "--init-groups", "{helper}", "mark", "{pid}", str(fd)])
"#,
            uid = case.inst.uid,
            gid = case.inst.gid,
            helper = case.inst.helper().display(),
        );
        let out = Command::new("python3").args(["-c", &python]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("only the observation's own collector"), "{}", describe(&out));
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(observed.wait().unwrap().success());
}

/// (pid, parent pid, comm) of the processes whose real uid is `uid`.
fn processes_of(uid: u32) -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .map(str::to_string)
        };
        if field("Uid:").as_deref() == Some(&uid.to_string()) {
            let ppid = field("PPid:").and_then(|p| p.parse().ok()).unwrap_or(0);
            out.push((pid, ppid, field("Name:").unwrap_or_default()));
        }
    }
    out
}

/// A mount below a directory the user owns: while the helper marks the new
/// namespace's mounts, the user swaps a directory on the way for a symlink
/// into another namespace (/proc/PID/root/…). The mark must never land
/// there, or the observation would see every process on that filesystem.
#[test]
fn symlink_race_on_mount_paths_cannot_redirect_marks() {
    let case = Case::new("markrace");
    let x = case.work.join("x");
    std::fs::create_dir_all(x.join("m")).unwrap();
    std::fs::create_dir_all(case.work.join("t/m")).unwrap();
    case.chown_tree(&case.work);
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "provtest-race"])
        .arg(x.join("m"))
        .status()
        .unwrap();
    assert!(st.success());
    // The user's swapper: x <-> a symlink reaching the initial namespace.
    let swapper = case
        .command("/usr/bin/python3")
        .args([
            "-c",
            "import os, sys, time\n\
             w = sys.argv[1]; end = time.time() + 6\n\
             target = '/proc/%d/root%s/t' % (os.getpid(), w)\n\
             while time.time() < end:\n\
             \x20   os.rename(w + '/x', w + '/x.real'); os.symlink(target, w + '/x')\n\
             \x20   os.unlink(w + '/x'); os.rename(w + '/x.real', w + '/x')\n",
        ])
        .arg(&case.work)
        .spawn()
        .unwrap();
    // Root writes outside any observation, all the time.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outside = {
        let stop = stop.clone();
        let dir = case.work.join("t");
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(dir.join(format!("outside_{}", i % 50)), b"x").unwrap();
                i += 1;
            }
        })
    };
    for i in 0..40 {
        let out = case.run(["sh", "-c", &format!("echo {i} > inside_{i}; sleep 0.05")]);
        assert_traced(&out);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    outside.join().unwrap();
    let _ = swapper.wait_with_output();
    let _ = Command::new("umount").arg(x.join("m")).status();
    for i in 0..40 {
        let cmd = case.writer_of(format!("inside_{i}"));
        let unmarked = cmd["incomplete"].get("unmarked_mounts").and_then(|v| v.as_u64()).unwrap_or(0);
        assert!(unmarked <= 2, "only the raced mount (and another test's) may be left unmarked: {}", cmd["incomplete"]);
        for (_, path) in files(&cmd) {
            assert!(!path.windows(8).any(|w| w == b"outside_"), "an outside write leaked into `{}`", cmd["text"]);
        }
    }
}

/// A setuid program writes files the user may not reach: a 0644 file inside a
/// root-only 0700 directory, and one it deletes right after writing. The
/// kernel hands the collector both; neither path nor hash may be recorded.
#[test]
fn root_files_behind_closed_directories_or_deleted_never_leak() {
    let case = Case::new("behind");
    let secret_dir = case.inst.root.join("behind-secret");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::set_permissions(&secret_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let src = case.inst.root.join("behind-writer.c");
    std::fs::write(
        &src,
        format!(
            r#"
        #include <fcntl.h>
        #include <unistd.h>
        int main(void) {{
            const char *keep = "{dir}/kept", *gone = "{dir}/gone";
            int fd = open(keep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            write(fd, "kept secret\n", 12); close(fd);
            fd = open(gone, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            write(fd, "gone secret\n", 12); close(fd);
            unlink(gone);
            return 0;
        }}"#,
            dir = secret_dir.display()
        ),
    )
    .unwrap();
    let prog = case.inst.root.join("behind-writer");
    assert!(Command::new("gcc").arg("-o").arg(&prog).arg(&src).status().unwrap().success());
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();

    let out = case.run(["sh", "-c", &format!("{} && echo ran > ran.txt", prog.display())]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(secret_dir.join("kept").exists(), "the setuid program did its work");
    let cmd = case.writer_of("ran.txt");
    let recorded = files(&cmd);
    assert!(recorded.contains(&("write".to_string(), bytes_of(&case.work.join("ran.txt")))), "{cmd:#}");
    let hidden = bytes_of(&secret_dir);
    assert!(recorded.iter().all(|(_, p)| !p.starts_with(&hidden)), "nothing behind the closed directory: {cmd:#}");
    assert!(cmd["incomplete"]["denied"].as_u64().unwrap_or(0) >= 2, "{cmd:#}");
    for secret in ["kept secret\n", "gone secret\n"] {
        let hash = expected_hash(secret.as_bytes(), 256, 3);
        assert!(cmd["files"].as_array().unwrap().iter().all(|f| f["hash"] != hash.as_str()));
    }
}

/// The command starts in the user's directory inside the namespace. When
/// that directory cannot be reached in there, it runs untraced where the
/// user is (one line says so): never in another directory, and never with
/// its I/O going unseen through the old namespace's mounts while the record
/// looks complete.
#[test]
fn unreachable_working_directory_runs_untraced_where_the_user_is() {
    let prov = installation().prov();
    let untraced = |out: &std::process::Output, why: &str| {
        assert!(out.status.success(), "{}", describe(out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.lines()
                .any(|l| l.starts_with("prov-helper: ") && l.contains(why) && l.ends_with("; running it untraced")),
            "{}",
            describe(out)
        );
    };

    // Behind a directory the user may not search: they cd'ed in first.
    let case = Case::new("cwd-search");
    let script = format!("mkdir -p a/b && cd a/b && chmod 0 .. && exec {} run -- sh -c 'echo x > f'", prov.display());
    let out = case.command("sh").args(["-c", &script]).output().unwrap();
    std::fs::set_permissions(case.work.join("a"), std::fs::Permissions::from_mode(0o755)).unwrap();
    untraced(&out, "/a/b inside the observation: Permission denied");
    assert_eq!(std::fs::read_to_string(case.work.join("a/b/f")).unwrap(), "x\n", "ran where the user was");
    assert!(same_file(case.query(["wrote", "a/b/f"])).is_empty(), "not recorded as if observed");

    // Removed while the user is in it: `cd ..` must not lead outside unseen.
    let case = Case::new("cwd-removed");
    let script = format!(
        "mkdir gone && cd gone && rmdir ../gone && exec {} run -- sh -c 'cd .. && echo y > up.txt'",
        prov.display()
    );
    let out = case.command("sh").args(["-c", &script]).output().unwrap();
    untraced(&out, "cannot name the current directory");
    assert_eq!(std::fs::read_to_string(case.work.join("up.txt")).unwrap(), "y\n");

    // Covered by a mount after the user entered it: the same path leads to
    // another directory, and the command must not run there.
    let case = Case::new("cwd-covered");
    let dir = case.work.join("m");
    std::fs::create_dir_all(&dir).unwrap();
    case.chown_tree(&dir);
    let script = format!(
        "cd m && touch ../entered && i=0 && while [ ! -e ../go ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done && exec {} run -- sh -c 'echo z > where.txt'",
        prov.display()
    );
    let child = case
        .command("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while !case.work.join("entered").exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let cover = mount_tmpfs(&dir);
    std::fs::write(case.work.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let on_cover = dir.join("where.txt").exists();
    drop(cover);
    untraced(&out, "it is another directory in there");
    assert!(!on_cover, "the command ran in the mount covering the user's directory");
    assert_eq!(std::fs::read_to_string(dir.join("where.txt")).unwrap(), "z\n", "ran in the user's own directory");
}
