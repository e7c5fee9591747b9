//! Shared setup of the end-to-end tests. They use only real parts: prov is
//! installed by packaging/install.sh (setuid helper included) into a
//! temporary prefix, commands run as an ordinary user created here, and
//! results are read back through `prov query --json`, as a user would.
//!
//! Needs root (to install the setuid helper and create the user); CI runs
//! as root. Run with `./tests/run` (see README.md).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

pub mod container;
pub mod postgres;
pub mod processes;
pub mod pty;

/// The unprivileged user the tests act as.
pub const TEST_USER: &str = "provtest";

pub struct Installation {
    pub root: PathBuf,
    pub prefix: PathBuf,
    pub uid: u32,
    pub gid: u32,
}

impl Installation {
    pub fn prov(&self) -> PathBuf {
        self.prefix.join("bin/prov")
    }
    pub fn helper(&self) -> PathBuf {
        self.prefix.join("libexec/prov/prov-helper")
    }
}

/// Installs prov once per test binary and makes sure the test user exists.
pub fn installation() -> &'static Installation {
    static INSTALL: OnceLock<Installation> = OnceLock::new();
    INSTALL.get_or_init(|| {
        assert_eq!(
            unsafe_geteuid(),
            0,
            "the end-to-end tests install a setuid helper and create a user: run them as root (./tests/run)"
        );
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let root = PathBuf::from(format!("/var/tmp/prov-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let prefix = match std::env::var_os(INSTALLED_PREFIX) {
            // Machines without a toolchain (the kernel matrix's VMs) test prov
            // as installed there from the release artifacts or the package.
            Some(installed) => PathBuf::from(installed),
            None => install_from_checkout(&repo, &root.join("prefix")),
        };
        ensure_user();
        let (uid, gid) = user_ids();
        Installation { root, prefix, uid, gid }
    })
}

/// Names the prefix of an existing installation to test instead of
/// installing one from the checkout (tests/kernels/run sets it in its VMs).
pub const INSTALLED_PREFIX: &str = "PROV_E2E_INSTALLED";

fn install_from_checkout(repo: &Path, prefix: &Path) -> PathBuf {
    let out = Command::new(repo.join("packaging/install.sh"))
        .arg("--prefix")
        .arg(prefix)
        .output()
        .expect("run packaging/install.sh");
    assert!(out.status.success(), "install.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    prefix.to_path_buf()
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn ensure_user() {
    // useradd is not safe to race between test binaries: serialise with a lock file.
    let lock = std::fs::File::create("/var/tmp/prov-e2e-useradd.lock").unwrap();
    lock.lock().unwrap();
    let exists =
        Command::new("id").arg(TEST_USER).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().success();
    if !exists {
        let st = Command::new("useradd").args(["--create-home", "--shell", "/bin/bash", TEST_USER]).status().unwrap();
        assert!(st.success(), "useradd {TEST_USER} failed");
    }
    // Subordinate ids for rootless podman (useradd adds them only where
    // /etc/subuid existed when the user was made).
    let listed = |file: &str| {
        std::fs::read_to_string(file).unwrap_or_default().lines().any(|l| l.starts_with(&format!("{TEST_USER}:")))
    };
    if !listed("/etc/subuid") || !listed("/etc/subgid") {
        let st = Command::new("usermod")
            .args(["--add-subuids", "300000-365535", "--add-subgids", "300000-365535", TEST_USER])
            .status()
            .unwrap();
        assert!(st.success(), "usermod --add-subuids {TEST_USER} failed");
    }
}

fn user_ids() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, TEST_USER]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

/// Who runs a command of a test.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum As {
    User,
    Root,
}

/// One test's private world: its own HOME (so its own database, config and
/// spool) and a work directory, owned by the acting user.
pub struct Case {
    pub inst: &'static Installation,
    pub who: As,
    pub home: PathBuf,
    pub work: PathBuf,
}

impl Case {
    pub fn new(name: &str) -> Case {
        Case::new_as(name, As::User)
    }

    pub fn new_as(name: &str, who: As) -> Case {
        let inst = installation();
        let home = inst.root.join(name).join("home");
        let work = home.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let case = Case { inst, who, home, work };
        case.chown_tree(&case.home);
        case
    }

    fn ids(&self) -> (u32, u32) {
        match self.who {
            As::User => (self.inst.uid, self.inst.gid),
            As::Root => (0, 0),
        }
    }

    /// Gives a path (recursively) to the acting user. Files that vanish
    /// meanwhile are no error: SQLite removes its -wal and -shm when a
    /// collector's writer, still finishing, closes the database (seen in CI:
    /// `chown -R` failing on prov.db-shm).
    pub fn chown_tree(&self, path: &Path) {
        let (uid, gid) = self.ids();
        chown_tree(path, uid, gid);
    }

    /// Writes a file in the work directory owned by the acting user.
    pub fn write(&self, name: impl AsRef<Path>, content: &[u8]) -> PathBuf {
        let path = self.work.join(name);
        std::fs::write(&path, content).unwrap();
        self.chown_tree(&path);
        path
    }

    /// A command run as the acting user in the work dir with a clean
    /// environment: HOME is the case's home.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = self.setpriv();
        cmd.arg("--").arg(program);
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("USER", if self.who == As::User { TEST_USER } else { "root" })
            .current_dir(&self.work)
            .stdin(Stdio::null());
        cmd
    }

    /// A command for a pty (expectrl spawns it as given): `program` as the
    /// acting user through `env -i` with HOME, PATH and `env` (`NAME=value`)
    /// only, in the work directory.
    pub fn pty_command(&self, program: impl AsRef<OsStr>, env: &[String]) -> Command {
        let mut cmd = self.setpriv();
        cmd.args(["--", "env", "-i"])
            .arg(format!("HOME={}", self.home.display()))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin")
            .args(env)
            .arg(program)
            .current_dir(&self.work);
        cmd
    }

    /// `setpriv` with the acting user's ids and groups (none for root),
    /// ready for `--` and the program.
    fn setpriv(&self) -> Command {
        let (uid, gid) = self.ids();
        let mut cmd = Command::new("setpriv");
        if self.who == As::User {
            cmd.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).arg("--init-groups");
        }
        cmd
    }

    /// `prov ARGS…` as the acting user.
    pub fn prov<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command(self.inst.prov()).args(args).output().unwrap()
    }

    /// `prov run -- ARGS…`, asserting nothing.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(self.inst.prov());
        cmd.arg("run").arg("--").args(args);
        cmd.output().unwrap()
    }

    /// `prov run -- sh -c SCRIPT`, asserting that it ran traced and succeeded.
    pub fn run_sh(&self, script: &str) -> Output {
        let out = self.run(["sh", "-c", script]);
        assert_traced(&out);
        assert!(out.status.success(), "{script}: {}", describe(&out));
        out
    }

    /// JSON Lines of a query (`--json` is added).
    pub fn query<I, S>(&self, args: I) -> Vec<Value>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(self.inst.prov());
        cmd.arg("query").args(args).arg("--json");
        let out = cmd.output().unwrap();
        // Exit 1 with a reason is "nothing found"; anything else is a failure
        // the test must show, not an empty answer.
        let err = String::from_utf8_lossy(&out.stderr);
        let nothing_found = out.status.code() == Some(1) && err.starts_with("prov: no ");
        assert!(out.status.success() || nothing_found, "prov query failed: {}", describe(&out));
        parse_json_lines(&out.stdout)
    }

    /// The newest record of the case.
    pub fn last_command(&self) -> Value {
        self.query(["history", "-n", "1"]).pop().expect("a record in history")
    }

    /// The newest record once it has an end: `prov run` does not wait more
    /// than a few seconds for a collector that is slow to store (a stopped
    /// one, a long backlog), which then ends the record in the background.
    pub fn last_command_ended(&self) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let cmd = self.last_command();
            if !cmd["end_ns"].is_null() || std::time::Instant::now() > deadline {
                return cmd;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The one command that wrote `file` (by query), with all its files:
    /// the file's own writer (matched by path, or as moved since), whatever
    /// commands wrote identical content elsewhere or earlier versions.
    pub fn writer_of(&self, file: impl AsRef<OsStr>) -> Value {
        let mut found = same_file(self.query([OsStr::new("wrote"), file.as_ref()]));
        assert_eq!(found.len(), 1, "expected exactly one writer of {:?}: {found:#?}", file.as_ref());
        found.pop().unwrap()
    }

    /// The collector log and the spool's contents: what to show when a
    /// record is missing.
    /// Waits (up to 20 s) until no writer has the case's database open:
    /// SQLite removes -wal and -shm when the last connection closes (unless
    /// that is a read-only query's, so only where nothing queried since).
    pub fn wait_until_closed(&self) {
        let db = self.database();
        let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while side("-wal").exists() || side("-shm").exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer keeps the database open: {}",
                self.collector_state()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn collector_state(&self) -> String {
        let state = self.home.join(".local/state/prov");
        let log = std::fs::read_to_string(state.join("collector.log")).unwrap_or_default();
        let spool: Vec<String> = std::fs::read_dir(state.join("spool"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        format!("collector.log: {log:?}; spool: {spool:?}")
    }

    /// `writer_of` for a record that may still wait in the spool: a
    /// collector holds its spool file (locked) until it exits, shortly after
    /// `prov run` returns, and the next query moves it in.
    pub fn writer_of_eventually(&self, file: &str) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let mut found = same_file(self.query(["wrote", file]));
            if found.len() == 1 || std::time::Instant::now() > deadline {
                assert_eq!(
                    found.len(),
                    1,
                    "expected exactly one writer of {file:?}: {found:#?}; {}",
                    self.collector_state()
                );
                return found.pop().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn database(&self) -> PathBuf {
        self.home.join(".local/share/prov/prov.db")
    }

    /// Where prov keeps what it could not store yet (and `prov run` the
    /// starts of its records): the acting user's default spool.
    pub fn spool_dir(&self) -> PathBuf {
        self.home.join(".local/state/prov/spool")
    }

    /// Every file prov keeps for the user, as bytes: the database (with its
    /// WAL) and the spool; a secret must be nowhere in them.
    pub fn stored_bytes(&self) -> Vec<u8> {
        let mut all = Vec::new();
        let mut stack = vec![self.home.join(".local/share/prov"), self.home.join(".local/state/prov")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    all.extend(std::fs::read(&p).unwrap_or_default());
                }
            }
        }
        all
    }

    /// Writes the acting user's prov configuration (`~/.config/prov/config.toml`).
    pub fn write_config(&self, toml: &str) {
        let dir = self.home.join(".config/prov");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), toml).unwrap();
        self.chown_tree(&self.home);
    }
}

/// Whether `haystack` holds the bytes of `needle`.
pub fn contains_bytes(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Whether packaging/install.sh builds against musl on this machine: the
/// toolchain has the musl target (packaging/helper-target), for the helper
/// and, with musl-gcc (which tests/run installs), for bin/prov.
pub fn toolchain_has_musl() -> bool {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = Command::new(repo.join("packaging/helper-target")).arg("rustc").output().unwrap();
    !target.stdout.trim_ascii().is_empty()
}

/// The commands of a `prov query wrote|read --json` answer that wrote
/// (read) the file itself (`match` "path" or "moved"), not identical content
/// elsewhere or an earlier version of the path.
pub fn same_file(found: Vec<Value>) -> Vec<Value> {
    found.into_iter().filter(|c| c["match"] == "path" || c["match"] == "moved").collect()
}

pub fn parse_json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn assert_traced(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not tracing"), "prov did not trace: {err}");
}

/// The files of a command object, as (access, path bytes) pairs.
pub fn files(command: &Value) -> Vec<(String, Vec<u8>)> {
    command["files"]
        .as_array()
        .map(|fs| fs.iter().map(|f| (f["access"].as_str().unwrap().to_string(), path_bytes(f))).collect())
        .unwrap_or_default()
}

/// A path field's exact bytes: `path_hex` when the name is not UTF-8.
pub fn path_bytes(file: &Value) -> Vec<u8> {
    match file.get("path_hex").and_then(Value::as_str) {
        Some(hex) => (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect(),
        None => file["path"].as_str().unwrap().as_bytes().to_vec(),
    }
}

/// The test's own implementation of the documented partial hash: xxh3-64 of
/// the whole file up to N*b bytes, else of N chunks of b bytes at k*floor(s/N).
pub fn expected_hash(content: &[u8], chunk_size: usize, chunks: usize) -> String {
    let data: Vec<u8> = if content.len() <= chunk_size * chunks {
        content.to_vec()
    } else {
        let stride = content.len() / chunks;
        (0..chunks).flat_map(|k| content[k * stride..k * stride + chunk_size].to_vec()).collect()
    };
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&data))
}

/// Deterministic pseudo-random bytes.
pub fn content(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

pub fn bytes_of(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

/// A tmpfs mounted (by root) for the length of a test; unmounted when
/// dropped, whether the test passed or not.
pub struct TmpfsMount {
    pub path: PathBuf,
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Mounts a fresh tmpfs on `dir` (created if needed) with mode 0777.
pub fn mount_tmpfs(dir: &Path) -> TmpfsMount {
    std::fs::create_dir_all(dir).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m,mode=0777", "prov-e2e-tmpfs"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs on {}", dir.display());
    TmpfsMount { path: dir.to_path_buf() }
}

/// Another process holding the user's database locked (a Python sqlite3
/// connection in a transaction of `mode`: "IMMEDIATE" or "EXCLUSIVE") until
/// `release`; held once `lock_database` returns.
pub struct DatabaseLock {
    holder: std::process::Child,
    release: PathBuf,
}

pub fn lock_database(case: &Case, mode: &str) -> DatabaseLock {
    let ready = case.work.join("locked.ready");
    let release = case.work.join("locked.release");
    let holder = case
        .command("/usr/bin/python3")
        .args([
            "-c",
            &format!(
                "import os, sqlite3, sys, time\n\
                 c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                 c.execute('BEGIN {mode}')\n\
                 open(sys.argv[2], 'w').close()\n\
                 end = time.time() + 60\n\
                 while not os.path.exists(sys.argv[3]) and time.time() < end: time.sleep(0.02)\n"
            ),
        ])
        .arg(case.database())
        .arg(&ready)
        .arg(&release)
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    DatabaseLock { holder, release }
}

impl DatabaseLock {
    pub fn release(mut self) {
        std::fs::write(&self.release, "").unwrap();
        self.holder.wait().unwrap();
    }
}

/// Sets the mode of `dir` and of every file in it. A file that goes
/// meanwhile is fine: SQLite removes -wal and -shm when the last connection
/// closes, which may be a collector's writer finishing at that moment.
fn chown_tree(path: &Path, uid: u32, gid: u32) {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match std::os::unix::fs::lchown(path, Some(uid), Some(gid)) {
        Err(e) if !gone(&e) => panic!("chown {}: {e}", path.display()),
        _ => {}
    }
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let entries = match std::fs::read_dir(path) {
        Ok(entries) if is_dir => entries,
        _ => return,
    };
    for entry in entries.flatten() {
        chown_tree(&entry.path(), uid, gid);
    }
}

pub fn set_modes_in(dir: &Path, dir_mode: u32, file_mode: u32) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file_mode)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("chmod {}: {e}", path.display()),
            _ => {}
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
}

/// The paths of a record's files that end in `.txt`, file names only.
pub fn txt_files(r: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .filter(|p| p.ends_with(".txt"))
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Moves this test's thread, and so what it starts from now on, into a
/// mount namespace of its own (private): its mounts must not make the
/// preparers of the tests running beside it discard their observations.
pub fn own_mount_namespace() {
    // SAFETY: unshare and mount with constant arguments; a mount namespace
    // is per thread, so only this test's thread moves.
    unsafe {
        assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "{}", std::io::Error::last_os_error());
        let private = libc::MS_REC | libc::MS_PRIVATE;
        let r = libc::mount(c"none".as_ptr(), c"/".as_ptr(), std::ptr::null(), private, std::ptr::null());
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    }
}

/// A uid in `range` that no account (`getent passwd`) and no process uses.
pub fn spare_uid(range: std::ops::Range<u32>) -> u32 {
    let in_use = |uid: u32| {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            status
                .lines()
                .any(|l| l.strip_prefix("Uid:").is_some_and(|v| v.split_whitespace().any(|u| u == uid.to_string())))
        })
    };
    range
        .into_iter()
        .find(|&uid| {
            !Command::new("getent").args(["passwd", &uid.to_string()]).output().unwrap().status.success()
                && !in_use(uid)
        })
        .expect("a free uid")
}

/// A uid in `range` nobody uses, and a home of its own under the
/// installation's root (`NAME-UID`), owned by it (group: the test group).
pub fn spare_user_home(case: &Case, range: std::ops::Range<u32>, name: &str) -> (u32, PathBuf) {
    let uid = spare_uid(range);
    let home = case.inst.root.join(format!("{name}-{uid}"));
    std::fs::create_dir_all(&home).unwrap();
    assert!(Command::new("chown").arg(format!("{uid}:{}", case.inst.gid)).arg(&home).status().unwrap().success());
    (uid, home)
}

/// `program` run as `uid` (no supplementary groups, primary group `gid`),
/// with only HOME and PATH, in `home`: a user the harness did not create.
pub fn command_as_uid(uid: u32, gid: u32, home: &Path, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).args(["--clear-groups", "--"]);
    cmd.arg(program).env_clear().env("HOME", home).env("PATH", "/usr/bin:/bin").current_dir(home);
    cmd
}
