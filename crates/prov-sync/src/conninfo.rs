//! The connection to the central store, as libpq would make it from the
//! same settings: a URL or `key=value` words, `service=NAME` (or
//! `PGSERVICE`) looked up in pg_service.conf, the `PG*` variables for what
//! is left out, libpq's defaults after that, and the password from
//! `PGPASSWORD` or `~/.pgpass` (ignored, as libpq does, when others can
//! read it). The `postgres` crate parses URLs and words but knows none of
//! the files or variables.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use postgres::config::Host;
use postgres::Config;

use crate::error::{Result, SyncError};

/// Debian's libpq looks for the server's socket here when no host is given.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";
/// A server that does not answer within this is an outage, not a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the variables and files are looked up (the environment, the home).
pub struct Environment {
    pub vars: BTreeMap<String, String>,
    pub home: PathBuf,
    pub os_user: String,
}

impl Environment {
    pub fn from_process(home: &Path, os_user: &str) -> Environment {
        let vars = std::env::vars().filter(|(k, _)| k.starts_with("PG")).collect();
        Environment { vars, home: home.to_owned(), os_user: os_user.to_owned() }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }
}

/// The connection settings for `url` (the `[sync] url` value).
pub fn config(url: &str, env: &Environment) -> Result<Config> {
    let bad = |why: String| SyncError::BadUrl(why);
    let (url, service) = take_service(url);
    let service_keys = match service.clone().or_else(|| env.var("PGSERVICE").map(str::to_owned)) {
        Some(name) => Some(service_keys(&name, env)?),
        None => None,
    };
    refuse_tls_modes(&url, service_keys.as_ref(), env)?;
    let mut config: Config = if url.trim().is_empty() {
        Config::new()
    } else {
        url.parse().map_err(|e: postgres::Error| bad(e.to_string()))?
    };
    if let Some(keys) = &service_keys {
        apply_defaults(&mut config, |k| keys.get(k).map(String::as_str))?;
    }
    apply_defaults(&mut config, |k| {
        let var = match k {
            "host" => "PGHOST",
            "port" => "PGPORT",
            "user" => "PGUSER",
            "dbname" => "PGDATABASE",
            "password" => "PGPASSWORD",
            _ => return None,
        };
        env.var(var)
    })?;
    if config.get_hosts().is_empty() {
        config.host_path(DEFAULT_SOCKET_DIR);
    }
    if config.get_user().is_none() {
        config.user(&env.os_user);
    }
    if config.get_dbname().is_none() {
        let user = config.get_user().unwrap_or_default().to_owned();
        config.dbname(&user);
    }
    if config.get_password().is_none() {
        if let Some(password) = pgpass_password(&config, env) {
            config.password(password);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.application_name("prov");
    Ok(config)
}

/// prov's client does not speak TLS (docs/cluster-store.md): settings that
/// require it (`sslmode` require, verify-ca or verify-full, in the URL, the
/// service or PGSSLMODE, first found in that order as libpq takes them)
/// are refused in one line rather than connected without. disable, allow
/// and prefer connect without TLS, as libpq does with a server without it.
fn refuse_tls_modes(url: &str, service: Option<&BTreeMap<String, String>>, env: &Environment) -> Result<()> {
    let from_url = url_setting(url, "sslmode").map(|m| (m, "the [sync] url"));
    let from_service = || service.and_then(|k| k.get("sslmode")).map(|m| (m.clone(), "the service file"));
    let from_env = || env.var("PGSSLMODE").map(|m| (m.to_owned(), "PGSSLMODE"));
    let Some((mode, from)) = from_url.or_else(from_service).or_else(from_env) else { return Ok(()) };
    match mode.as_str() {
        "disable" | "allow" | "prefer" => Ok(()),
        "require" | "verify-ca" | "verify-full" => Err(SyncError::BadUrl(format!(
            "sslmode={mode} (from {from}) asks for TLS, which prov's client does not speak: connect over the \
             server's Unix socket, a trusted network or an SSH tunnel with sslmode=disable or prefer \
             (docs/cluster-store.md)"
        ))),
        other => Err(SyncError::BadUrl(format!("sslmode={other:?} (from {from}) is not one libpq knows"))),
    }
}

/// A setting's value in `key=value` words or a URL's query string.
fn url_setting(url: &str, key: &str) -> Option<String> {
    let pairs: Vec<&str> = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        url.split_once('?').map(|(_, q)| q.split('&').collect()).unwrap_or_default()
    } else {
        url.split_whitespace().collect()
    };
    pairs.iter().find_map(|p| p.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim().to_owned()))
}

/// The server as said in messages: `user@host:port/dbname`, no password.
pub fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "?".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{}@{host}:{port}/{}", config.get_user().unwrap_or("?"), config.get_dbname().unwrap_or("?"))
}

/// Splits `service=NAME` out of `key=value` words (the crate does not know it).
fn take_service(url: &str) -> (String, Option<String>) {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return (url.to_owned(), None);
    }
    let mut service = None;
    let rest: Vec<&str> = url
        .split_whitespace()
        .filter(|w| match w.strip_prefix("service=") {
            Some(name) => {
                service = Some(name.to_owned());
                false
            }
            None => true,
        })
        .collect();
    (rest.join(" "), service)
}

/// Fills each setting left out of `config` from `lookup` (a service's keys
/// or the environment).
fn apply_defaults<'a>(config: &mut Config, lookup: impl Fn(&str) -> Option<&'a str>) -> Result<()> {
    if config.get_hosts().is_empty() {
        if let Some(host) = lookup("host") {
            config.host(host);
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = lookup("port") {
            let port = port.parse().map_err(|_| SyncError::BadUrl(format!("port {port:?} is not a number")))?;
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = lookup("user") {
            config.user(user);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = lookup("dbname") {
            config.dbname(db);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = lookup("password") {
            config.password(password);
        }
    }
    Ok(())
}

/// The keys of service `name`: the user's file (`PGSERVICEFILE` or
/// `~/.pg_service.conf`) first, then the system's (`PGSYSCONFDIR`, on
/// Debian /etc/postgresql-common).
fn service_keys(name: &str, env: &Environment) -> Result<BTreeMap<String, String>> {
    let user_file = env.var("PGSERVICEFILE").map(PathBuf::from).unwrap_or_else(|| env.home.join(".pg_service.conf"));
    let system_dir = env.var("PGSYSCONFDIR").unwrap_or("/etc/postgresql-common");
    for file in [user_file, Path::new(system_dir).join("pg_service.conf")] {
        if let Ok(text) = std::fs::read_to_string(&file) {
            if let Some(keys) = service_section(&text, name) {
                return Ok(keys);
            }
        }
    }
    Err(SyncError::BadUrl(format!("service {name:?} is not in ~/.pg_service.conf nor the system's pg_service.conf")))
}

/// The `key=value` lines of section `[name]` of a pg_service.conf text.
fn service_section(text: &str, name: &str) -> Option<BTreeMap<String, String>> {
    let mut keys = None::<BTreeMap<String, String>>;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if keys.is_some() {
                break;
            }
            if section.trim() == name {
                keys = Some(BTreeMap::new());
            }
        } else if let (Some(keys), Some((k, v))) = (keys.as_mut(), line.split_once('=')) {
            keys.insert(k.trim().to_owned(), v.trim().to_owned());
        }
    }
    keys
}

/// The password `~/.pgpass` (or `PGPASSFILE`) gives for this connection:
/// the first line whose host, port, database and user match (`*` matches
/// anything; a socket connection matches `localhost` or its directory).
fn pgpass_password(config: &Config, env: &Environment) -> Option<String> {
    let file = env.var("PGPASSFILE").map(PathBuf::from).unwrap_or_else(|| env.home.join(".pgpass"));
    let meta = std::fs::metadata(&file).ok()?;
    if meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let (hosts, port) = match config.get_hosts().first()? {
        Host::Tcp(h) => (vec![h.clone()], config.get_ports().first().copied().unwrap_or(5432)),
        Host::Unix(p) => {
            (vec!["localhost".into(), p.display().to_string()], config.get_ports().first().copied().unwrap_or(5432))
        }
    };
    let wanted = [port.to_string(), config.get_dbname()?.to_owned(), config.get_user()?.to_owned()];
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let fields = pgpass_fields(line);
        let [host, p, db, user, password] = <[String; 5]>::try_from(fields).ok()?;
        let matches = |field: &str, value: &str| field == "*" || field == value;
        let ok = hosts.iter().any(|h| matches(&host, h))
            && matches(&p, &wanted[0])
            && matches(&db, &wanted[1])
            && matches(&user, &wanted[2]);
        ok.then_some(password)
    })
}

/// A .pgpass line's fields: `:` separates, `\:` and `\\` are literal.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().unwrap().extend(chars.next()),
            ':' => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path, vars: &[(&str, &str)]) -> Environment {
        Environment {
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            home: home.to_owned(),
            os_user: "alice".into(),
        }
    }

    fn temp_home(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("prov-sync-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn defaults_are_libpqs() {
        let c = config("", &env(Path::new("/nonexistent"), &[])).unwrap();
        assert_eq!(describe(&c), "alice@/var/run/postgresql:5432/alice");
        let c = config("postgresql://bob@db.example:6543/prov", &env(Path::new("/nonexistent"), &[])).unwrap();
        assert_eq!(describe(&c), "bob@db.example:6543/prov");
    }

    #[test]
    fn variables_fill_what_the_url_leaves_out() {
        let e = env(Path::new("/nonexistent"), &[("PGHOST", "/tmp/sock"), ("PGUSER", "carol"), ("PGDATABASE", "x")]);
        assert_eq!(describe(&config("dbname=prov", &e).unwrap()), "carol@/tmp/sock:5432/prov");
    }

    #[test]
    fn a_service_gives_its_keys_and_the_words_win() {
        let home = temp_home("service");
        std::fs::write(
            home.join(".pg_service.conf"),
            "# c\n[other]\nhost=no\n[prov]\nhost=/run/pg\nport = 5433\ndbname=provdb\nuser=svc\n",
        )
        .unwrap();
        let c = config("service=prov user=dave", &env(&home, &[])).unwrap();
        assert_eq!(describe(&c), "dave@/run/pg:5433/provdb");
        let c = config("", &env(&home, &[("PGSERVICE", "prov")])).unwrap();
        assert_eq!(describe(&c), "svc@/run/pg:5433/provdb");
        let err = config("service=nope", &env(&home, &[])).unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");
    }

    #[test]
    fn pgpass_gives_the_password_only_when_private() {
        let home = temp_home("pgpass");
        let pgpass = home.join(".pgpass");
        std::fs::write(&pgpass, "other:*:*:*:no\nlocalhost:5432:prov:alice:s3cr\\:et\n").unwrap();
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = config("host=/tmp/sock dbname=prov", &env(&home, &[])).unwrap();
        assert_eq!(c.get_password(), Some(&b"s3cr:et"[..]));
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
        let c = config("host=/tmp/sock dbname=prov", &env(&home, &[])).unwrap();
        assert_eq!(c.get_password(), None);
    }

    #[test]
    fn settings_asking_for_tls_are_refused_in_one_line() {
        let none = env(Path::new("/nonexistent"), &[]);
        for url in
            ["host=db sslmode=require", "postgresql://a@db/prov?sslmode=verify-full", "sslmode=verify-ca dbname=p"]
        {
            let err = config(url, &none).unwrap_err().to_string();
            assert!(err.contains("asks for TLS, which prov's client does not speak") && !err.contains('\n'), "{err}");
            assert!(err.contains("from the [sync] url"), "{err}");
        }
        let err = config("host=db", &env(Path::new("/nonexistent"), &[("PGSSLMODE", "require")])).unwrap_err();
        assert!(err.to_string().contains("sslmode=require (from PGSSLMODE) asks for TLS"), "{err}");
        // The URL's word wins over the variable, as in libpq.
        let e = env(Path::new("/nonexistent"), &[("PGSSLMODE", "verify-full")]);
        assert!(config("host=db sslmode=disable", &e).is_ok());
        for ok in ["host=db sslmode=prefer", "postgresql://a@db/prov?sslmode=disable", "host=db"] {
            assert!(config(ok, &none).is_ok(), "{ok}");
        }
        let home = temp_home("service-tls");
        std::fs::write(home.join(".pg_service.conf"), "[prov]\nhost=db\nsslmode=verify-full\n").unwrap();
        let err = config("service=prov", &env(&home, &[])).unwrap_err().to_string();
        assert!(err.contains("(from the service file)"), "{err}");
        let err = config("host=db sslmode=sometimes", &none).unwrap_err().to_string();
        assert!(err.contains("is not one libpq knows"), "{err}");
    }

    #[test]
    fn a_bad_url_is_one_line() {
        let err = config("postgresql://a@b:notaport/x", &env(Path::new("/"), &[])).unwrap_err().to_string();
        assert!(!err.contains('\n') && err.starts_with("bad [sync] url"), "{err}");
    }
}
