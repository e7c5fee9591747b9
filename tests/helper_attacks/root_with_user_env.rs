//! Issue #10, item 6: root running prov with a user's environment (`sudo -E
//! prov …`, or HOME/XDG_* pointing at a user's directories) must not open
//! files through links that user planted, and `prov restore --to` a shared
//! directory must not follow links another user planted there.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::*;

/// Root-owned files a user would like root to write: the empty database
/// file (SQLite would make a new database in it), a log with content, an
/// empty directory, and names that do not exist yet.
struct Victims {
    dir: PathBuf,
}

const ROOT_LOG: &[u8] = b"root's own log\n";

impl Victims {
    fn new(name: &str) -> Victims {
        let dir = installation().root.join(name);
        std::fs::create_dir_all(dir.join("spool")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("db"), b"").unwrap();
        std::fs::write(dir.join("log"), ROOT_LOG).unwrap();
        Victims { dir }
    }

    /// Everything is as root left it.
    fn assert_untouched(&self, what: &str) {
        assert_eq!(std::fs::read(self.dir.join("db")).unwrap(), b"", "{what}: the victim database file was written");
        assert_eq!(std::fs::read(self.dir.join("log")).unwrap(), ROOT_LOG, "{what}: the victim log was written");
        for gone in ["wal", "shm", "journal", "made"] {
            assert!(!self.dir.join(gone).exists(), "{what}: {gone} was created through a planted link");
        }
        let spooled: Vec<_> = std::fs::read_dir(self.dir.join("spool")).unwrap().collect();
        assert!(spooled.is_empty(), "{what}: written into the victim spool directory: {spooled:?}");
    }
}

/// As the user: prov's data and state directories under `home`, with links
/// where prov's files go, to the victims.
fn plant_links(user: &Case, victims: &Victims) {
    let data = user.home.join(".local/share/prov");
    let state = user.home.join(".local/state/prov");
    let config = user.home.join(".config/prov");
    for dir in [&data, &state, &config] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let v = |name: &str| victims.dir.join(name);
    symlink(v("db"), data.join("prov.db")).unwrap();
    symlink(v("wal"), data.join("prov.db-wal")).unwrap();
    symlink(v("shm"), data.join("prov.db-shm")).unwrap();
    symlink(v("journal"), data.join("prov.db-journal")).unwrap();
    symlink(v("spool"), state.join("spool")).unwrap();
    symlink(v("log"), state.join("collector.log")).unwrap();
    symlink(v("made"), state.join("shell")).unwrap();
    user.chown_tree(&user.home);
    // chown -R does not follow the links: the victims stay root's.
    assert_eq!(std::fs::metadata(v("db")).map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap(), 0);
}

/// `prov ARGS…` as root in `cwd`, with exactly the environment given.
fn prov_as_root(cwd: &Path, env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut cmd = Command::new(installation().prov());
    cmd.env_clear().env("PATH", "/usr/local/bin:/usr/bin:/bin").env("LANG", "C.UTF-8").env("USER", "root");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).current_dir(cwd).stdin(std::process::Stdio::null()).output().unwrap()
}

/// Root's `prov run` and `prov query` with the user's directories: the
/// command still runs with its own status, nothing of the victims changes,
/// and one line says why.
fn assert_refused(root: &Case, victims: &Victims, env: &[(&str, &Path)], user_dir: &Path) {
    let run = prov_as_root(&root.work, env, &["run", "--", "sh", "-c", "echo ran; exit 3"]);
    assert_eq!(run.status.code(), Some(3), "the command's status is kept: {}", describe(&run));
    assert_eq!(run.stdout, b"ran\n", "{}", describe(&run));
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {}", describe(&run));
    assert!(err.starts_with("prov: not tracing: ") && err.contains(&user_dir.display().to_string()), "{err}");
    assert!(err.contains(TEST_USER), "the line names the owner: {err}");
    // The collector of a refused run never started; give a late one time.
    std::thread::sleep(std::time::Duration::from_millis(300));
    victims.assert_untouched("prov run");

    for args in [&["query", "history"][..], &["stats"], &["restore", "1"], &["doctor"]] {
        let out = prov_as_root(&root.work, env, args);
        assert!(!out.status.success(), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        let said = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
        assert!(said.contains(&user_dir.display().to_string()) && said.contains(TEST_USER), "{args:?}: {said}");
        if args[0] != "doctor" {
            assert_eq!(err.lines().count(), 1, "{args:?}: {}", describe(&out));
        }
        victims.assert_untouched(&args.join(" "));
    }
}

#[test]
fn root_with_a_users_home_opens_nothing_the_user_planted() {
    // prov runs as root: its namespaces and fanotify groups are root's.
    let _quota = super::root_quota_shared();
    let user = Case::new("rootenv-home");
    let victims = Victims::new("rootenv-home-victims");
    plant_links(&user, &victims);
    let root = Case::new_as("rootenv-home-root", As::Root);
    assert_refused(&root, &victims, &[("HOME", &user.home)], &user.home);
}

#[test]
fn root_with_a_users_xdg_directories_opens_nothing_the_user_planted() {
    // prov runs as root: its namespaces and fanotify groups are root's.
    let _quota = super::root_quota_shared();
    let user = Case::new("rootenv-xdg");
    let victims = Victims::new("rootenv-xdg-victims");
    plant_links(&user, &victims);
    let root = Case::new_as("rootenv-xdg-root", As::Root);
    let data = user.home.join(".local/share");
    let state = user.home.join(".local/state");
    assert_refused(
        &root,
        &victims,
        &[("HOME", &root.home), ("XDG_DATA_HOME", &data), ("XDG_STATE_HOME", &state)],
        &user.home,
    );
    // Root's own directories, the user's state only: refused all the same.
    let run = prov_as_root(&root.work, &[("HOME", &root.home), ("XDG_STATE_HOME", &state)], &["run", "--", "true"]);
    assert!(run.status.success(), "{}", describe(&run));
    assert!(String::from_utf8_lossy(&run.stderr).contains("XDG_STATE_HOME"), "says what to set: {}", describe(&run));
    victims.assert_untouched("state only");
    // And a database.path in root's own configuration that leads there.
    let config = root.home.join(".config/prov");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), format!("[database]\npath = \"{}/prov/prov.db\"\n", data.display()))
        .unwrap();
    let out = prov_as_root(&root.work, &[("HOME", &root.home)], &["query", "history"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("database.path"), "{}", describe(&out));
    victims.assert_untouched("database.path");
    std::fs::remove_file(config.join("config.toml")).unwrap();

    // Root's own directories work as they always did.
    let out = prov_as_root(&root.work, &[("HOME", &root.home)], &["run", "--", "sh", "-c", "echo mine > mine.txt"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(root.writer_of("mine.txt")["text"], "sh -c 'echo mine > mine.txt'");
}

/// Root restores into a shared sticky directory (1777, like /tmp) where the
/// user made `var` a link to a root-owned directory: restore must write
/// beneath --to only, and say in one line why it did not.
#[test]
fn restore_into_a_shared_directory_follows_no_planted_link() {
    // prov runs as root: its namespaces and fanotify groups are root's.
    let _quota = super::root_quota_shared();
    let root = Case::new_as("rootenv-restore", As::Root);
    let user = Case::new("rootenv-restore-user");
    let job = root.write("job.sh", b"echo restored job\n");
    let out = root.run(["sh", job.to_str().unwrap()]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let id = reader_id(&root, &job);

    let shared = installation().root.join("rootenv-shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = installation().root.join("rootenv-restore-victim");
    std::fs::create_dir_all(&victim).unwrap();
    let planted = user.command("ln").arg("-s").arg(&victim).arg(shared.join("var")).status().unwrap();
    assert!(planted.success());

    let out = prov_as_root(&root.work, &[("HOME", &root.home)], &["restore", &id, "--to", shared.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", describe(&out));
    assert!(err.contains("symbolic link") && err.contains("var"), "{err}");
    let written: Vec<_> = walk(&victim);
    assert!(written.is_empty(), "written through the planted link: {written:?}");
    assert_eq!(std::fs::read_link(shared.join("var")).unwrap(), victim, "the planted link is left alone");

    // Without the link, the same restore writes beneath --to.
    std::fs::remove_file(shared.join("var")).unwrap();
    let out = prov_as_root(&root.work, &[("HOME", &root.home)], &["restore", &id, "--to", shared.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    let back = shared.join(job.strip_prefix("/").unwrap());
    assert_eq!(std::fs::read(&back).unwrap(), b"echo restored job\n");
}

/// Every path below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// The id of the one command that read `file`, as a string.
fn reader_id(case: &Case, file: &Path) -> String {
    let found = case.query([std::ffi::OsStr::new("read"), file.as_os_str()]);
    assert_eq!(found.len(), 1, "one reader of {}: {found:#?}", file.display());
    found[0]["id"].to_string()
}
