//! No false positive on an ordinary shell history: every command line of the
//! cheat sheets shipped with the PyPI package `cheat` 2.5.1 (194 sheets,
//! 2308 lines: tar, git, ssh, find, awk, docker, mysql…; see
//! fixtures/README.md) goes through the default redactor. Only the lines
//! that really carry a credential may change, and those must.

use prov_model::redact::{RedactConfig, Redactor};

const HISTORY: &str = include_str!("fixtures/cheat-2.5.1-commands.txt");

/// The lines of the corpus that hold a password or token (reviewed by hand).
const WITH_CREDENTIALS: &[&str] = &[
    "curl -u username:password URL ",
    "curl -u username:password -O ftp://example.com/pub/file.zip",
    "curl ftp://username:password@example.com",
    "http --proxy=http:http://user:pass@10.10.1.10:3128 example.org",
    "mysqldump -uusername -ppassword the-database > db.sql",
    "mysqldump -uusername -ppassword the-database | gzip -9 > db.sql",
    "mysqldump -uusername -ppassword --all-databases > all-databases.sql",
    // A cookie is a session's credential; Samba's user%password its password.
    "http example.org  User-Agent:Bacon/1.0  'Cookie:valued-visitor=yes;foo=bar' X-Foo:Bar  Referer:http://httpie.org/",
    "smbclient //<hostname>/<share> -U<username>%<password>",
];

#[test]
fn an_ordinary_history_keeps_every_command_without_a_secret() {
    let r = Redactor::new(&RedactConfig::default());
    let changed: Vec<(&str, String)> = HISTORY
        .lines()
        .map(|l| (l, String::from_utf8(r.redact(l.as_bytes())).unwrap()))
        .filter(|(l, red)| l != red)
        .collect();
    let unexpected: Vec<_> = changed.iter().filter(|(l, _)| !WITH_CREDENTIALS.contains(l)).collect();
    assert!(unexpected.is_empty(), "false positives:\n{unexpected:#?}");
    assert_eq!(changed.len(), WITH_CREDENTIALS.len(), "every credential line is redacted: {changed:#?}");
    assert!(HISTORY.lines().count() > 2000);
}
