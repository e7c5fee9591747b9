//! Secrets stay out of the journal: command texts with real token shapes,
//! typed in bash and zsh through a pty or run with `prov run`, are stored
//! with the secret replaced by [REDACTED] and the command kept; the secret's
//! bytes are nowhere in the database or the spool.

use std::time::{Duration, Instant};

use prov_e2e::pty::*;
use prov_e2e::*;

// AWS's documented example secret key and tokens of each provider's
// published format (random bodies, never issued).
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const SLACK: &str = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy";
const GITHUB: &str = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8";
const PASSWORD: &str = "Hunter2Secret";

fn texts(case: &Case) -> Vec<String> {
    case.query(["history", "-n", "100"]).iter().map(|c| c["text"].as_str().unwrap().to_string()).collect()
}

/// Waits until `n` commands are recorded (a shell's last record may still
/// be on its way when the shell exits).
fn wait_for(case: &Case, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = texts(case);
        if t.len() >= n || Instant::now() > deadline {
            return t;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn prov_run_stores_the_command_without_its_secrets() {
    let case = Case::new("secrets-run");
    case.run_sh(&format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET} true; echo done > out.txt"));
    case.run_sh(&format!(
        "echo 'mysql -u root -p{PASSWORD} db' > /dev/null; echo https://alice:{PASSWORD}@example.org"
    ));
    let t = texts(&case);
    assert_eq!(
        t,
        [
            "sh -c 'echo '\\''mysql -u root -p[REDACTED] db'\\'' > /dev/null; echo https://alice:[REDACTED]@example.org'"
                .to_string(),
            "sh -c 'AWS_SECRET_ACCESS_KEY=[REDACTED] true; echo done > out.txt'".to_string(),
        ]
    );
    // The command is kept, files and all.
    assert_eq!(case.writer_of("out.txt")["text"], t[1]);
    // Found by the mark.
    assert_eq!(case.query(["history", "--text", "[REDACTED]"]).len(), 2);
    let stored = case.stored_bytes();
    for secret in [AWS_SECRET, PASSWORD] {
        assert!(!contains_bytes(&stored, secret), "{secret} is in prov's files");
    }
}

/// A command that could not be traced (here: no helper) is still recorded,
/// by `prov run` itself rather than the collector: without its secret too.
#[test]
fn an_untraced_command_is_stored_without_its_secrets() {
    let case = Case::new("secrets-untraced");
    let out = case
        .command(case.inst.prov())
        .env("PROV_HELPER", "/nonexistent/prov-helper")
        .args(["run", "--", "sh", "-c", &format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET} true")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(texts(&case), ["sh -c 'AWS_SECRET_ACCESS_KEY=[REDACTED] true'"]);
    assert!(!contains_bytes(&case.stored_bytes(), AWS_SECRET), "the secret is in prov's files");
}

#[test]
fn user_patterns_add_to_the_builtin_shapes() {
    let case = Case::new("secrets-user-pattern");
    case.write_config("[redact]\npatterns = ['corp-pin-(\\d{6})']\n");
    case.run_sh("echo corp-pin-482913 > /dev/null");
    assert_eq!(texts(&case), ["sh -c 'echo corp-pin-[REDACTED] > /dev/null'"]);
    assert!(!contains_bytes(&case.stored_bytes(), "482913"));
}

fn typed_secrets_are_redacted(shell: &'static str) {
    let case = Case::new(&format!("secrets-{shell}"));
    let mut sh = Shell::start(&case, shell);
    let typed = [
        format!("export AWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
        format!("echo 'Authorization: Bearer {SLACK}' > hdr.txt"),
        format!("echo https://{GITHUB}@github.com/o/r.git > url.txt"),
        "echo an ordinary command > plain.txt".to_string(),
    ];
    for line in &typed {
        sh.run(line);
    }
    sh.exit();
    // The typed lines (the pty driver's own `exit` and PID probe aside).
    let t: Vec<String> =
        wait_for(&case, 5).into_iter().filter(|t| t != "exit" && !t.starts_with("echo \"P\"")).collect();
    assert_eq!(
        t,
        [
            "echo an ordinary command > plain.txt",
            "echo https://[REDACTED]@github.com/o/r.git > url.txt",
            "echo 'Authorization: Bearer [REDACTED]' > hdr.txt",
            "export AWS_SECRET_ACCESS_KEY=[REDACTED]",
        ],
        "{}",
        case.collector_state()
    );
    let stored = case.stored_bytes();
    for secret in [AWS_SECRET, SLACK, GITHUB] {
        assert!(!contains_bytes(&stored, secret), "{secret} is in prov's files");
    }
}

#[test]
fn typed_secrets_are_redacted_bash() {
    typed_secrets_are_redacted("bash");
}

#[test]
fn typed_secrets_are_redacted_zsh() {
    typed_secrets_are_redacted("zsh");
}

/// A kept script (`[archive]`) is scanned like a command text: the token
/// in deploy.sh is not in what `prov restore` gives back, nor in prov's
/// files; with `redact = false` the script comes back byte for byte.
#[test]
fn archived_scripts_are_kept_without_their_secrets_unless_opted_out() {
    let script = format!("#!/bin/sh\nexport GITHUB_TOKEN={GITHUB}\necho deployed > deployed.txt\n");
    for (name, config, want) in [
        ("secrets-archive", "", script.replace(GITHUB, "[REDACTED]")),
        ("secrets-archive-verbatim", "[archive]\nredact = false\n", script.clone()),
    ] {
        let case = Case::new(name);
        case.write_config(config);
        case.write("deploy.sh", script.as_bytes());
        case.run_sh("sh deploy.sh");
        let out = case.prov(["restore", "--file", "deploy.sh", "--stdout"]);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{name}");
        if config.is_empty() {
            assert!(!contains_bytes(&case.stored_bytes(), GITHUB), "the token is in prov's files");
        }
    }
}
