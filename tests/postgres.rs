//! A throwaway PostgreSQL cluster for the central store's tests: initdb and
//! pg_ctl (Debian's packages, which tests/run installs) in a temporary
//! directory, run as the test user (PostgreSQL refuses root), reachable
//! only over a Unix socket in that directory, with password (SCRAM)
//! authentication for every role. Stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{describe, installation};

/// PostgreSQL's programs (Debian 12: version 15).
pub fn bin_dir() -> PathBuf {
    let base = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(base)
        .unwrap_or_else(|e| panic!("{}: {e} (tests/run installs postgresql)", base.display()))
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().expect("an initdb under /usr/lib/postgresql/*/bin")
}

/// The superuser's name and password.
pub const ADMIN: &str = "prov_admin";
const ADMIN_PASSWORD: &str = "admin-pw";

pub struct Postgres {
    pub dir: PathBuf,
    bin: PathBuf,
}

impl Postgres {
    /// A new cluster in `dir` (created, owned by the test user), started.
    pub fn start(dir: &Path) -> Postgres {
        let inst = installation();
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let pw = dir.join("admin-password");
        std::fs::write(&pw, ADMIN_PASSWORD).unwrap();
        chown(dir, inst.uid, inst.gid);
        let pg = Postgres { dir: dir.to_owned(), bin: bin_dir() };
        pg.as_owner("initdb")
            .arg("-D")
            .arg(pg.data())
            .args(["-U", ADMIN, "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"])
            .arg(format!("--pwfile={}", pw.display()))
            .output()
            .map(|o| assert!(o.status.success(), "initdb: {}", describe(&o)))
            .unwrap();
        pg.resume();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The socket directory (host of a connection).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    fn as_owner(&self, program: &str) -> Command {
        let inst = installation();
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", inst.uid))
            .arg(format!("--regid={}", inst.gid))
            .arg("--init-groups")
            .arg("--")
            .arg(self.bin.join(program))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&self.dir);
        cmd
    }

    fn pg_ctl(&self, args: &[&str]) -> Output {
        self.as_owner("pg_ctl").arg("-D").arg(self.data()).args(args).output().unwrap()
    }

    /// Starts (again) the server: no TCP, the socket in `dir`.
    pub fn resume(&self) {
        let options =
            format!("-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off", self.dir.display());
        let log = self.dir.join("log");
        let out = self.pg_ctl(&["-o", &options, "-l", log.to_str().unwrap(), "-w", "-t", "60", "start"]);
        assert!(
            out.status.success(),
            "pg_ctl start: {}; log: {}",
            describe(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops the server at once (an outage: connections are cut).
    pub fn stop(&self) {
        let out = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", describe(&out));
    }

    /// psql as `role` (password `password`) on database `db`: the rows of
    /// `sql` (unaligned, tab-separated), or the error.
    pub fn psql(&self, role: &str, password: &str, db: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args(["-U", role, "-d", db, "-c", sql])
            .env_clear()
            .env("PGPASSWORD", password)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// psql as the superuser; panics on an error.
    pub fn admin(&self, db: &str, sql: &str) -> String {
        self.psql(ADMIN, ADMIN_PASSWORD, db, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let st = Command::new("chown").arg("-R").arg(format!("{uid}:{gid}")).arg(path).status().unwrap();
    assert!(st.success());
}
