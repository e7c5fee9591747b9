//! The connection to the central store, as libpq would make it from the
//! same settings: a URL or `key=value` words, `service=NAME` (or
//! `PGSERVICE`) looked up in pg_service.conf, the `PG*` variables for what
//! is left out, libpq's defaults after that, and the password from
//! `PGPASSWORD` or `~/.pgpass` (ignored, as libpq does, when others can
//! read it). The `postgres` crate parses URLs and words but knows none of
//! the files or variables, nor libpq's verify-ca and verify-full (tls.rs).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use postgres::config::Host;
use postgres::Config;

use crate::error::{Result, SyncError};
use crate::tls::Tls;

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

/// A connection's settings: the crate's, and TLS's (which the crate's
/// parser does not take: verify-ca, verify-full, sslrootcert).
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub tls: Tls,
}

impl std::ops::Deref for Settings {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.config
    }
}

/// The connection settings for `url` (the `[sync] url` value).
pub fn config(url: &str, env: &Environment) -> Result<Settings> {
    let bad = |why: String| SyncError::BadUrl(why);
    let (url, service) = take_service(url);
    let service_keys = match service.clone().or_else(|| env.var("PGSERVICE").map(str::to_owned)) {
        Some(name) => Some(service_keys(&name, env)?),
        None => None,
    };
    let tls = tls_settings(&url, service_keys.as_ref(), env)?;
    let url = without_settings(&url, &["sslmode", "sslrootcert"]);
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
    Ok(Settings { config, tls })
}

/// sslmode and sslrootcert, each from the first of the URL, the service
/// and the variables (PGSSLMODE, PGSSLROOTCERT) that has it, as libpq.
fn tls_settings(url: &str, service: Option<&BTreeMap<String, String>>, env: &Environment) -> Result<Tls> {
    let find = |key: &str, var: &'static str| -> Option<(String, &'static str)> {
        url_setting(url, key)
            .map(|m| (m, "the [sync] url"))
            .or_else(|| service.and_then(|k| k.get(key)).map(|m| (m.clone(), "the service file")))
            .or_else(|| env.var(var).map(|m| (m.to_owned(), var)))
    };
    let rootcert = find("sslrootcert", "PGSSLROOTCERT").map(|(path, _)| path);
    Tls::new(find("sslmode", "PGSSLMODE"), rootcert, &env.home)
}

/// A setting's value in `key=value` words or a URL's query string.
fn url_setting(url: &str, key: &str) -> Option<String> {
    let pairs: Vec<&str> = if is_url(url) {
        url.split_once('?').map(|(_, q)| q.split('&').collect()).unwrap_or_default()
    } else {
        url.split_whitespace().collect()
    };
    pairs.iter().find_map(|p| {
        p.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| {
            let v = v.trim();
            if is_url(url) {
                percent_decoded(v)
            } else {
                v.to_owned()
            }
        })
    })
}

/// `url` without the settings `keys` (words or query parameters).
fn without_settings(url: &str, keys: &[&str]) -> String {
    let keep = |p: &&str| !keys.iter().any(|k| p.split_once('=').is_some_and(|(name, _)| name.trim() == *k));
    if is_url(url) {
        match url.split_once('?') {
            Some((base, query)) => {
                let rest: Vec<&str> = query.split('&').filter(keep).collect();
                if rest.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", rest.join("&"))
                }
            }
            None => url.to_owned(),
        }
    } else {
        url.split_whitespace().filter(keep).collect::<Vec<_>>().join(" ")
    }
}

fn is_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `%XX` escapes of a URL's value (a path in sslrootcert).
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
    if is_url(url) {
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
        match prov_model::small_file::read_to_string(&file, prov_model::small_file::CONFIG_LIMIT) {
            Ok(text) => {
                if let Some(keys) = service_section(&text, name) {
                    return Ok(keys);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SyncError::BadUrl(format!("cannot read {}: {e}", file.display()))),
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
    let text = prov_model::small_file::read_to_string(&file, prov_model::small_file::CONFIG_LIMIT).ok()?;
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
    fn tls_settings_come_from_the_url_the_service_or_the_variables() {
        use crate::tls::SslMode;
        let none = env(Path::new("/nonexistent"), &[]);
        let mode = |url: &str, e: &Environment| config(url, e).map(|s| s.tls.mode);
        assert_eq!(mode("host=db", &none).unwrap(), SslMode::Prefer);
        assert_eq!(mode("host=db sslmode=require", &none).unwrap(), SslMode::Require);
        let c = config("postgresql://a@db/prov?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem", &none).unwrap();
        assert_eq!((c.tls.mode, c.tls.roots_name()), (SslMode::VerifyFull, "/etc/ca.pem".to_string()));
        assert_eq!(describe(&c), "a@db:5432/prov");
        let c = config("sslmode=verify-ca sslrootcert=/x/ca.pem dbname=p host=db", &none).unwrap();
        assert_eq!((c.tls.mode, describe(&c).as_str()), (SslMode::VerifyCa, "alice@db:5432/p"));
        let e = env(Path::new("/nonexistent"), &[("PGSSLMODE", "require"), ("PGSSLROOTCERT", "/r.pem")]);
        let c = config("host=db", &e).unwrap();
        assert_eq!((c.tls.mode, c.tls.roots_name()), (SslMode::Require, "/r.pem".to_string()));
        // The URL's word wins over the variable, as in libpq.
        assert_eq!(mode("host=db sslmode=disable", &e).unwrap(), SslMode::Disable);
        let home = temp_home("service-tls");
        std::fs::write(home.join(".pg_service.conf"), "[prov]\nhost=db\nsslmode=verify-full\n").unwrap();
        assert_eq!(mode("service=prov", &env(&home, &[])).unwrap(), SslMode::VerifyFull);
        std::fs::write(home.join(".pg_service.conf"), "[prov]\nhost=db\nsslmode=sometimes\n").unwrap();
        let err = config("service=prov", &env(&home, &[])).unwrap_err().to_string();
        assert!(err.contains("(from the service file) is not one libpq knows") && !err.contains('\n'), "{err}");
    }

    #[test]
    fn a_bad_url_is_one_line() {
        let err = config("postgresql://a@b:notaport/x", &env(Path::new("/"), &[])).unwrap_err().to_string();
        assert!(!err.contains('\n') && err.starts_with("bad [sync] url"), "{err}");
    }
}
