//! Secrets out of the journal: well-known secret shapes in a command text are
//! replaced by [`MARK`] before the text is stored or spooled. The command is
//! kept (dropping it would lose the record); only the secret goes.
//!
//! Each built-in shape is narrow on purpose: a false positive silently
//! changes a command the user will later read or run again, so a shape
//! matches only where the secret is certain (a token's own prefix, a named
//! option, a URL's password), never on "looks random".

use regex::bytes::{Captures, Regex};
use serde::{de, Deserialize, Deserializer, Serialize};

/// What replaces a secret: plain ASCII, so `prov query history --text
/// '[REDACTED]'` finds every redacted command.
pub const MARK: &str = "[REDACTED]";

/// A built-in shape: its name (for documentation and tests), a regex whose
/// group `s` is the secret (the whole match when there is none), and the
/// literal words of which every match holds at least one (ASCII case
/// ignored where the regex ignores case: `(?i)`). A text with none of them
/// cannot match, and its regex is never compiled: compiling all of them
/// took 2–3 ms of CPU in every collector, for texts that almost never hold
/// a secret.
struct Shape {
    name: &'static str,
    regex: &'static str,
    needles: &'static [&'static str],
}

const SHAPES: &[Shape] = &[
    // AWS access key ids (AKIA long-term, ASIA temporary).
    Shape {
        name: "aws-access-key-id",
        regex: r"\b(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b",
        needles: &["AKIA", "ASIA", "ABIA", "ACCA"],
    },
    // A variable named like a secret assigned a literal value:
    // AWS_SECRET_ACCESS_KEY=…, GITHUB_TOKEN=…, DB_PASSWORD=… ($VAR and $(…)
    // are references, not secrets).
    Shape {
        name: "secret-variable",
        regex: r"\b[A-Za-z0-9_]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|MYSQL_PWD|secret|password|passwd|token|api_key|access_key)[A-Za-z0-9_]*\s*=\s*['\x22]?(?P<s>[^\s'\x22$`][^\s'\x22]*)",
        needles: &[
            "MYSQL_PWD",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "TOKEN",
            "API_KEY",
            "APIKEY",
            "ACCESS_KEY",
            "PRIVATE_KEY",
            "secret",
            "password",
            "passwd",
            "token",
            "api_key",
            "access_key",
        ],
    },
    // The same variable assigned an ANSI-C quoted value: TOKEN=$'…'.
    Shape {
        name: "secret-variable-ansi-c",
        regex: r"\b[A-Za-z0-9_]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|MYSQL_PWD|secret|password|passwd|token|api_key|access_key)[A-Za-z0-9_]*\s*=\s*\$'(?P<s>(?:[^'\\]|\\.)+)'",
        needles: &["=$'", "= $'"],
    },
    // GitHub: classic (ghp_ personal, gho_ OAuth, ghu_/ghs_ app, ghr_ refresh) and fine-grained.
    Shape {
        name: "github-token",
        regex: r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{36,255})\b",
        needles: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
    },
    Shape {
        name: "github-fine-grained-token",
        regex: r"\b(?P<s>github_pat_[A-Za-z0-9_]{22,255})\b",
        needles: &["github_pat_"],
    },
    // GitLab personal/project/group access tokens and others of the glXX- family.
    Shape {
        name: "gitlab-token",
        regex: r"\b(?P<s>gl(?:pat|dt|rt|ptt|oas|cbt|ft|imt|agent|soat)-[A-Za-z0-9_\-]{20,})",
        needles: &["glpat-", "gldt-", "glrt-", "glptt-", "gloas-", "glcbt-", "glft-", "glimt-", "glagent-", "glsoat-"],
    },
    // Slack bot/user/app tokens and incoming webhooks.
    Shape { name: "slack-token", regex: r"\b(?P<s>xox[abeoprs]-[A-Za-z0-9-]{10,})", needles: &["xox"] },
    Shape {
        name: "slack-webhook",
        regex: r"hooks\.slack\.com/services/(?P<s>[A-Za-z0-9/_-]{20,})",
        needles: &["hooks.slack.com/services/"],
    },
    // Google API keys, Stripe secret keys, npm and PyPI tokens, OpenAI keys.
    Shape { name: "google-api-key", regex: r"\b(?P<s>AIza[0-9A-Za-z_\-]{35})", needles: &["AIza"] },
    Shape {
        name: "stripe-key",
        regex: r"\b(?P<s>[sr]k_(?:live|test)_[0-9A-Za-z]{16,})",
        needles: &["k_live_", "k_test_"],
    },
    Shape { name: "npm-token", regex: r"\b(?P<s>npm_[A-Za-z0-9]{36})\b", needles: &["npm_"] },
    Shape { name: "pypi-token", regex: r"\b(?P<s>pypi-[A-Za-z0-9_\-]{50,})", needles: &["pypi-"] },
    Shape { name: "openai-key", regex: r"\b(?P<s>sk-(?:proj-)?[A-Za-z0-9_\-]{32,})", needles: &["sk-"] },
    // HTTP credentials in a header: Authorization: Bearer …, Basic …, token ….
    Shape {
        name: "authorization-header",
        regex: r"(?i)\bauthorization:\s*(?:bearer|basic|token|digest)?\s*(?P<s>[^\s'\x22]+)",
        needles: &["authorization:"],
    },
    // Other headers that carry a credential: API keys, tokens, cookies
    // (the value up to the closing quote or the end of the line).
    Shape {
        name: "credential-header",
        regex: r"(?i)(?:^|[\s'\x22])(?:x-api-key|api-key|x-auth-token|x-access-token|x-goog-api-key|private-token|proxy-authorization|cookie|set-cookie):[ \t]*(?P<s>[^\s'\x22][^'\x22\n]*?)[ \t]*(?:['\x22\n]|$)",
        needles: &["api-key:", "-token:", "proxy-authorization:", "cookie:"],
    },
    // Azure storage connection strings: AccountKey=…, SharedAccessKey=….
    Shape {
        name: "connection-string-key",
        regex: r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)=(?P<s>[^;\s'\x22]+)(?:;|['\x22]|\s|$)",
        needles: &["accountkey=", "sharedaccesskey=", "sharedaccesssignature=", ";password=", ";pwd="],
    },
    // A signed URL's signature or token: ?sig=…, &X-Amz-Signature=….
    Shape {
        name: "url-signature",
        regex: r"(?i)[?&](?:sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature|access_token|auth_token)=(?P<s>[^&#\s'\x22]+)",
        needles: &["sig=", "signature=", "security-token=", "access_token=", "auth_token="],
    },
    // A password option with its value: --password=…, --passwd …, --token=….
    Shape {
        name: "password-option",
        regex: r"(?:^|\s)--?(?:password|passwd|pass|token|secret|api-key|apikey|access-token|auth-token|client-secret|sas-token|account-key|secret-key|secret-access-key|access-key|storage-key)(?:=|\s+)['\x22]?(?P<s>[^\s'\x22=-][^\s'\x22]*)",
        needles: &[
            "-sas-token",
            "-account-key",
            "-access-key",
            "-storage-key",
            "-pass",
            "-token",
            "-secret",
            "-api-key",
            "-apikey",
            "-access-token",
            "-auth-token",
            "-client-secret",
        ],
    },
    // mysql -pSECRET (the value glued to -p); `mysql -p` alone prompts.
    Shape {
        name: "mysql-password",
        regex: r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b[^|;&\n]*?\s-p['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["mysql", "mariadb"],
    },
    // sshpass -p SECRET, curl -u user:SECRET, --user user:SECRET.
    Shape { name: "sshpass", regex: r"\bsshpass\b[^|;&\n]*?\s-p\s*['\x22]?(?P<s>[^\s'\x22]+)", needles: &["sshpass"] },
    // (curl only: `-u` of other programs is anything, socat -u udp-recvfrom:1234).
    Shape {
        name: "curl-user-password",
        regex: r"\bcurl\b[^|;&\n]*?\s(?:-u|--user)(?:=|\s+)?['\x22]?[^\s:'\x22/]*:(?P<s>[^\s'\x22@]+)",
        needles: &["curl"],
    },
    // openssl's password arguments: -passin pass:SECRET, -passout, -pass.
    Shape { name: "openssl-pass", regex: r"\s-pass(?:in|out)?\s+['\x22]?pass:(?P<s>[^\s'\x22]+)", needles: &["pass:"] },
    // Registry and cloud logins with the password as -p: docker login -p, az login -p.
    Shape {
        name: "login-password",
        regex: r"\b(?:docker|podman|buildah|skopeo|nerdctl|helm|oras|az)\b[^|;&\n]*?\blogin\b[^|;&\n]*?\s-p(?:=|\s+)['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["login"],
    },
    // LDAP tools' bind password: ldapsearch -w SECRET (-W prompts).
    Shape {
        name: "ldap-bind-password",
        regex: r"\bldap[a-z]+\b[^|;&\n]*?\s-w\s*['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["ldap"],
    },
    // Samba's user%password: smbclient -U user%SECRET.
    Shape {
        name: "samba-user-password",
        regex: r"\b(?:smbclient|rpcclient|smbcacls|smbget|smbmap|smbpasswd|net|mount\.cifs)\b[^|;&\n]*?\s(?:-U|--user(?:name)?)(?:=|\s*)['\x22]?[^\s%'\x22]+%(?P<s>[^\s'\x22]+)",
        needles: &["%"],
    },
    // aws configure set aws_secret_access_key SECRET (and the session token).
    Shape {
        name: "aws-configure-set",
        regex: r"\baws\s+configure\s+set\s+(?:[A-Za-z0-9_\-]+\.)?(?:aws_secret_access_key|aws_session_token)\s+['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["configure"],
    },
    // A JSON key named like a secret: {"password": "…"}, also with escaped quotes.
    Shape {
        name: "json-secret",
        regex: r#"(?i)\\?"[A-Za-z0-9_\-]*(?:password|passwd|secret|token|api_?key|access_?key|private_?key)[A-Za-z0-9_\-]*\\?"\s*:\s*\\?"(?P<s>[^"\\]+)\\?""#,
        needles: &[
            "password",
            "passwd",
            "secret",
            "token",
            "apikey",
            "api_key",
            "accesskey",
            "access_key",
            "privatekey",
            "private_key",
        ],
    },
    // A .netrc line: machine HOST login USER password SECRET.
    Shape {
        name: "netrc-password",
        regex: r"\b(?:machine\s+\S+|default|login\s+\S+)\s+password\s+['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["password"],
    },
    // htpasswd -b FILE USER SECRET, htpasswd -nb USER SECRET.
    Shape {
        name: "htpasswd-batch",
        regex: r"\bhtpasswd\s+(?:-[A-Za-z]+\s+)*-[A-Za-mo-z]*b[A-Za-mo-z]*\s+(?:-[A-Za-z]+\s+)*\S+\s+\S+\s+['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["htpasswd"],
    },
    Shape {
        name: "htpasswd-batch-stdout",
        regex: r"\bhtpasswd\s+(?:-[A-Za-z]+\s+)*-[A-Za-z]*(?:nb|bn)[A-Za-z]*\s+(?:-[A-Za-z]+\s+)*\S+\s+['\x22]?(?P<s>[^\s'\x22]+)",
        needles: &["htpasswd"],
    },
    // A token as a URL's user name: https://TOKEN@host (long, so not a login name).
    Shape { name: "url-token-user", regex: r"\bhttps?://(?P<s>[A-Za-z0-9_\-.~]{20,})@", needles: &["://"] },
    // URL credentials: scheme://user:PASSWORD@host.
    Shape {
        name: "url-credentials",
        regex: r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@'\x22]+:(?P<s>[^\s/@'\x22]+)@",
        needles: &["://"],
    },
    // A private key pasted into a command.
    Shape {
        name: "private-key",
        regex: r"(?s)(?P<s>-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$))",
        needles: &["-----BEGIN "],
    },
];

/// `[redact]` in the configuration (see config.default.toml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedactConfig {
    /// The built-in shapes above.
    pub builtin: bool,
    /// The user's own regexes, in addition to the built-in ones.
    pub patterns: Vec<UserPattern>,
}

impl Default for RedactConfig {
    fn default() -> Self {
        RedactConfig { builtin: true, patterns: Vec::new() }
    }
}

/// A user's regex, compiled once when the configuration is read (a bad one
/// is the configuration's error, with its line); serialized as its text.
#[derive(Debug, Clone)]
pub struct UserPattern {
    source: String,
    regex: Regex,
}

impl UserPattern {
    pub fn new(source: &str) -> Result<UserPattern, String> {
        match Regex::new(source) {
            Ok(_) if source.is_empty() => Err("an empty pattern would match everywhere".into()),
            Ok(regex) => Ok(UserPattern { source: source.to_string(), regex }),
            Err(e) => Err(format!("pattern {source:?} is not a regex: {}", one_line(&e.to_string()))),
        }
    }
}

impl PartialEq for UserPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for UserPattern {}

impl Serialize for UserPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.source.serialize(s)
    }
}

impl<'de> Deserialize<'de> for UserPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        UserPattern::new(&String::deserialize(d)?).map_err(de::Error::custom)
    }
}

fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The shapes of one configuration: the built-in ones are compiled when a
/// text first holds one of their words, the user's at once.
#[derive(Debug, Clone)]
pub struct Redactor {
    builtin: bool,
    user: Vec<Regex>,
}

/// The built-in shapes, each compiled at most once per process.
static BUILTIN: [std::sync::OnceLock<Regex>; SHAPES.len()] = [const { std::sync::OnceLock::new() }; SHAPES.len()];

impl Shape {
    /// Whether `text` holds one of the words every match holds.
    fn may_match(&self, text: &[u8]) -> bool {
        if self.regex.starts_with("(?i)") {
            let lower = text.to_ascii_lowercase();
            return self.needles.iter().any(|n| memchr::memmem::find(&lower, n.as_bytes()).is_some());
        }
        self.needles.iter().any(|n| memchr::memmem::find(text, n.as_bytes()).is_some())
    }
}

fn builtin_regex(i: usize) -> &'static Regex {
    let shape = &SHAPES[i];
    BUILTIN[i].get_or_init(|| Regex::new(shape.regex).unwrap_or_else(|e| panic!("built-in shape {}: {e}", shape.name)))
}

impl Redactor {
    pub fn new(config: &RedactConfig) -> Redactor {
        // Compiled when the configuration was read (a clone shares it).
        let user = config.patterns.iter().map(|p| p.regex.clone()).collect();
        Redactor { builtin: config.builtin, user }
    }

    /// `text` with every secret replaced by [`MARK`]; the same bytes when
    /// nothing matched.
    pub fn redact(&self, text: &[u8]) -> Vec<u8> {
        let mut out = text.to_vec();
        let apply = |out: Vec<u8>, re: &Regex| match re.is_match(&out) {
            true => re.replace_all(&out, |c: &Captures<'_>| replace_secret(c)).into_owned(),
            false => out,
        };
        for (i, shape) in SHAPES.iter().enumerate().filter(|_| self.builtin) {
            if shape.may_match(&out) {
                out = apply(out, builtin_regex(i));
            }
        }
        self.user.iter().fold(out, apply)
    }

    /// Whether `text` holds a secret shape.
    pub fn finds_secret(&self, text: &[u8]) -> bool {
        self.redact(text) != text
    }
}

/// The whole match with its secret part (group `s`, else the first group,
/// else all of it) replaced.
fn replace_secret(c: &Captures<'_>) -> Vec<u8> {
    let whole = c.get(0).expect("group 0");
    let secret = c.name("s").or_else(|| c.get(1)).unwrap_or(whole);
    if secret.as_bytes() == MARK.as_bytes() {
        return whole.as_bytes().to_vec();
    }
    let mut out = whole.as_bytes()[..secret.start() - whole.start()].to_vec();
    out.extend_from_slice(MARK.as_bytes());
    out.extend_from_slice(&whole.as_bytes()[secret.end() - whole.start()..]);
    out
}

/// Whether a stored text had a secret taken out.
pub fn was_redacted(text: &[u8]) -> bool {
    text.windows(MARK.len()).any(|w| w == MARK.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(text: &str) -> String {
        String::from_utf8(Redactor::new(&RedactConfig::default()).redact(text.as_bytes())).unwrap()
    }

    // Real shapes: AWS's documented example keys, and tokens of each
    // provider's published format (random bodies, never issued).
    #[test]
    fn real_secret_shapes_are_redacted_and_the_command_kept() {
        let cases = [
            ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "export AWS_ACCESS_KEY_ID=[REDACTED]"),
            (
                "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "export AWS_SECRET_ACCESS_KEY=[REDACTED]",
            ),
            ("socat -u udp-recvfrom:1234,fork tcp:localhost:4321", "socat -u udp-recvfrom:1234,fork tcp:localhost:4321"),
            ("aws s3 ls --profile x # AKIAIOSFODNN7EXAMPLE", "aws s3 ls --profile x # [REDACTED]"),
            (
                "git clone https://ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8@github.com/o/r.git",
                "git clone https://[REDACTED]@github.com/o/r.git",
            ),
            (
                "gh auth login --with-token <<< github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123",
                "gh auth login --with-token <<< [REDACTED]",
            ),
            (
                "curl --header \"PRIVATE-TOKEN: glpat-xYz12AbC34dEf56GhI78j\" https://gitlab.com/api/v4/projects",
                "curl --header \"PRIVATE-TOKEN: [REDACTED]\" https://gitlab.com/api/v4/projects",
            ),
            (
                "curl -H 'Authorization: Bearer xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy' https://slack.com/api/x",
                "curl -H 'Authorization: Bearer [REDACTED]' https://slack.com/api/x",
            ),
            (
                "curl -H \"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl\" api/x",
                "curl -H \"Authorization: Bearer [REDACTED]\" api/x",
            ),
            ("mysql -u root -pS3cr3t! mydb < dump.sql", "mysql -u root -p[REDACTED] mydb < dump.sql"),
            ("mysqldump -uroot -p'hunter2' db > d.sql", "mysqldump -uroot -p'[REDACTED]' db > d.sql"),
            ("psql --password=hunter2 -h db", "psql --password=[REDACTED] -h db"),
            ("mytool --token abc123def456 run", "mytool --token [REDACTED] run"),
            ("git clone https://alice:hunter2@example.org/r.git", "git clone https://alice:[REDACTED]@example.org/r.git"),
            ("psql postgresql://app:s3cr3t@db:5432/app", "psql postgresql://app:[REDACTED]@db:5432/app"),
            ("curl -u alice:hunter2 https://x.org", "curl -u alice:[REDACTED] https://x.org"),
            ("sshpass -p hunter2 ssh host", "sshpass -p [REDACTED] ssh host"),
            ("DB_PASSWORD=hunter2 ./migrate", "DB_PASSWORD=[REDACTED] ./migrate"),
            ("npm config set //registry.npmjs.org/:_authToken npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm config set //registry.npmjs.org/:_authToken [REDACTED]"),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn references_and_ordinary_options_are_kept() {
        for text in [
            "export GITHUB_TOKEN=$(cat ~/.token)",
            "export AWS_SECRET_ACCESS_KEY=\"$SECRET\"",
            "mkdir -p results/plots",
            "cp -pr a b",
            "mysql -p mydb",
            "docker login --password-stdin -u me",
            "ssh -p 2222 host",
            "git log --author=alice",
            "curl https://example.org/a:b/c",
            "rsync -av user@host:/data/ .",
            "scp file user@host:/tmp/",
            "python train.py --tokenizer bert --max-tokens 512",
            "grep -r password src/",
            "head -c 16 /dev/urandom | base64",
            "sort -u names.txt",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn user_patterns_add_to_the_builtin_ones() {
        let config = RedactConfig { builtin: true, patterns: vec![UserPattern::new(r"corp-(\d{6})").unwrap()] };
        let r = Redactor::new(&config);
        assert_eq!(r.redact(b"login corp-123456 AKIAIOSFODNN7EXAMPLE"), b"login corp-[REDACTED] [REDACTED]");
        let only_user = Redactor::new(&RedactConfig { builtin: false, ..config });
        assert_eq!(only_user.redact(b"corp-123456 AKIAIOSFODNN7EXAMPLE"), b"corp-[REDACTED] AKIAIOSFODNN7EXAMPLE");
    }

    /// The collector gets the configuration as JSON: a user pattern goes
    /// as its text and comes back the same pattern; a bad one is refused.
    #[test]
    fn a_user_pattern_travels_as_its_text() {
        let config = RedactConfig { builtin: false, patterns: vec![UserPattern::new(r"corp-(\d{6})").unwrap()] };
        let json = serde_json::to_string(&config).unwrap();
        assert!(json.contains(r#""corp-(\\d{6})""#), "{json}");
        let back: RedactConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, config);
        assert_eq!(Redactor::new(&back).redact(b"corp-123456"), b"corp-[REDACTED]");
        let bad = serde_json::from_str::<RedactConfig>(r#"{"builtin":true,"patterns":["corp-("]}"#).unwrap_err();
        assert!(bad.to_string().contains("is not a regex"), "{bad}");
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        let once = redact("curl -H 'Authorization: Bearer abc' https://a:b@x.org");
        assert_eq!(redact(&once), once);
        assert!(was_redacted(once.as_bytes()));
    }

    /// One secret of each built-in shape: each is found through its words
    /// (a word missing from a shape's list would leave its secrets in).
    #[test]
    fn every_shape_finds_its_secret_through_its_words() {
        let samples = [
            ("aws-access-key-id", "echo ASIAIOSFODNN7EXAMPLE"),
            ("secret-variable", "export my_api_key=abc"),
            ("secret-variable-ansi-c", "export TOKEN=$'abc\\'d'"),
            ("github-token", "echo ghs_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8"),
            ("github-fine-grained-token", "x github_pat_11ABCDEFG0123456789_abc"),
            ("gitlab-token", "x glrt-xYz12AbC34dEf56GhI78j"),
            ("slack-token", "x xoxp-1234567890-abc"),
            ("slack-webhook", "curl https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"),
            ("google-api-key", "x AIzaSyA-1234567890abcdefghijklmnopqrstu"),
            ("stripe-key", "x rk_live_1234567890abcdefgh"),
            ("npm-token", "x npm_abcdefghijklmnopqrstuvwxyz0123456789"),
            ("pypi-token", "twine upload -p pypi-AgEIcHlwaS5vcmcCJGE4ZjY3ZDA1LWVhYjctNDY0Yy1hYjE3MmQ0ZjU2"),
            ("openai-key", "x sk-proj-abcdefghijklmnopqrstuvwxyz012345"),
            ("authorization-header", "curl -H 'AUTHORIZATION: token abc' x"),
            ("credential-header", "curl -H 'X-Api-Key: abc' x"),
            ("connection-string-key", "x 'AccountName=a;AccountKey=abc=='"),
            ("url-signature", "curl 'https://a.blob.core.windows.net/c/b?sv=1&sig=abc%3D'"),
            ("password-option", "tool --client-secret abc"),
            ("mysql-password", "mariadb -u u -pS3cr3t db"),
            ("sshpass", "sshpass -p hunter2 ssh h"),
            ("curl-user-password", "curl --user=a:hunter2 x"),
            ("openssl-pass", "openssl rsa -in k.pem -passin pass:hunter2"),
            ("login-password", "docker login -u me -p hunter2 reg.io"),
            ("ldap-bind-password", "ldapsearch -x -D cn=admin -w hunter2"),
            ("samba-user-password", "smbclient //h/s -U alice%hunter2"),
            ("aws-configure-set", "aws configure set aws_secret_access_key abc"),
            ("json-secret", "curl -d '{\"password\": \"hunter2\"}' x"),
            ("netrc-password", "echo machine h login u password hunter2 >> ~/.netrc"),
            ("htpasswd-batch", "htpasswd -b .htpasswd alice hunter2"),
            ("htpasswd-batch-stdout", "htpasswd -nbB alice hunter2"),
            ("url-token-user", "git clone https://abcdefghijklmnopqrstuvwxyz0123@h/r.git"),
            ("url-credentials", "git clone ftp://a:hunter2@h/x"),
            ("private-key", "echo '-----BEGIN RSA PRIVATE KEY-----abc'"),
        ];
        assert_eq!(samples.len(), SHAPES.len());
        for (shape, (name, text)) in SHAPES.iter().zip(samples) {
            assert_eq!(shape.name, name);
            assert!(shape.may_match(text.as_bytes()), "{name}: none of its words in {text}");
            assert!(redact(text).contains(MARK), "{name}: {text}");
        }
        assert!(SHAPES.iter().all(|s| !s.may_match(b"make -j4 all && ./run --input data.csv")));
    }

    #[test]
    fn bytes_that_are_not_utf8_survive() {
        let r = Redactor::new(&RedactConfig::default());
        assert_eq!(r.redact(b"cat \xff\xfe TOKEN=abc"), b"cat \xff\xfe TOKEN=[REDACTED]");
    }
}
