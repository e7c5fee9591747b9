//! A throwaway PostgreSQL cluster for the central store's tests: initdb and
//! pg_ctl (Debian's packages, which tests/run installs) in a temporary
//! directory, run as the test user (PostgreSQL refuses root), reachable
//! over a Unix socket in that directory, with password (SCRAM)
//! authentication for every role. Stopped when dropped.
//!
//! `start_tls` adds loopback TCP on a free port with TLS only (hostssl in
//! pg_hba.conf), its certificates made here with the openssl command: a
//! test CA, a server certificate it signs for `localhost`, and another CA
//! that signed nothing.

use std::os::unix::fs::PermissionsExt;
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
    /// The port (of the socket's name, and of TCP when `tls`).
    pub port: u16,
    tls: bool,
    /// TLS turned off again (restart_without_tls).
    ssl_off: bool,
    bin: PathBuf,
}

impl Postgres {
    /// A new cluster in `dir` (created, owned by the test user), started.
    pub fn start(dir: &Path) -> Postgres {
        Postgres::create(dir, false)
    }

    /// A new cluster that also listens on 127.0.0.1 (a free port), where
    /// it takes only TLS connections (certificates in `tls_dir()`).
    pub fn start_tls(dir: &Path) -> Postgres {
        Postgres::create(dir, true)
    }

    fn create(dir: &Path, tls: bool) -> Postgres {
        let inst = installation();
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let pw = dir.join("admin-password");
        std::fs::write(&pw, ADMIN_PASSWORD).unwrap();
        let port = if tls { free_port() } else { 5432 };
        if tls {
            make_certificates(&dir.join("tls"));
        }
        chown(dir, inst.uid, inst.gid);
        let pg = Postgres { dir: dir.to_owned(), port, tls, ssl_off: false, bin: bin_dir() };
        pg.as_owner("initdb")
            .arg("-D")
            .arg(pg.data())
            .args(["-U", ADMIN, "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"])
            .arg(format!("--pwfile={}", pw.display()))
            .output()
            .map(|o| assert!(o.status.success(), "initdb: {}", describe(&o)))
            .unwrap();
        if tls {
            // TCP only with TLS: a client without it finds no entry.
            let hba = "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n";
            std::fs::write(pg.data().join("pg_hba.conf"), hba).unwrap();
        }
        pg.resume();
        pg
    }

    /// The test CA (ca.crt), the server's certificate and key, and a CA
    /// that signed nothing (other-ca.crt).
    pub fn tls_dir(&self) -> PathBuf {
        self.dir.join("tls")
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
        let mut options =
            format!("-c unix_socket_directories='{}' -c fsync=off -c port={}", self.dir.display(), self.port);
        if self.tls {
            let tls = self.tls_dir();
            options += &format!(
                " -c listen_addresses='127.0.0.1' -c ssl={} -c ssl_cert_file='{}' -c ssl_key_file='{}'",
                if self.ssl_off { "off" } else { "on" },
                tls.join("server.crt").display(),
                tls.join("server.key").display()
            );
        } else {
            options += " -c listen_addresses=''";
        }
        let log = self.dir.join("log");
        let out = self.pg_ctl(&["-o", &options, "-l", log.to_str().unwrap(), "-w", "-t", "60", "start"]);
        assert!(
            out.status.success(),
            "pg_ctl start: {}; log: {}",
            describe(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Restarts a `start_tls` server with TLS off (still on TCP).
    pub fn restart_without_tls(&mut self) {
        self.stop();
        self.ssl_off = true;
        self.resume();
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
            .args(["-p", &self.port.to_string(), "-U", role, "-d", db, "-c", sql])
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

/// A port nobody listens on now on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The certificates of a TLS test server, made with the openssl command
/// (P-256 keys: quick to make): ca.crt signs server.crt, for the name
/// localhost only (so 127.0.0.1 is the wrong name); other-ca.crt signed
/// nothing.
fn make_certificates(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", describe(&out));
    };
    let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    for (name, subject) in [("ca", "/CN=prov test CA"), ("other-ca", "/CN=another CA")] {
        let (keyfile, certfile) = (format!("{name}.key"), format!("{name}.crt"));
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", subject, "-keyout", &keyfile, "-out", &certfile];
        args.extend(key);
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&args);
    }
    let mut args = vec!["req", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"];
    args.extend(key);
    openssl(&args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ]);
    // PostgreSQL refuses a key others can read.
    std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
}
