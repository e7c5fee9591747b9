//! A central store that accepts connections and never answers (a stopped
//! PostgreSQL, a hung proxy): every wait for it is bounded, prov says so
//! in one line naming the server, and local work goes on.

use std::net::{TcpListener, TcpStream};
use std::process::{Output, Stdio};
use std::time::Duration;

use prov_e2e::processes::wait_or_hang;
use prov_e2e::*;

/// Far above the bound prov keeps (30 s per wait); a command still running
/// then hangs.
const HANG: Duration = Duration::from_secs(150);

/// A TCP port that accepts every connection and never sends a byte.
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

fn prov_or_hang(case: &Case, args: &[&str]) -> Output {
    let child =
        case.command(case.inst.prov()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_or_hang(child, HANG, &format!("prov {}", args.join(" ")))
}

#[test]
fn a_central_store_that_never_answers_hangs_nothing() {
    let case = Case::new("faults-silent-central");
    let port = silent_server();
    case.write_config(&format!(
        "[sync]\nurl = \"postgresql://alice@127.0.0.1:{port}/prov\"\neverywhere = true\nbackground = false\n"
    ));
    case.run_sh("echo local > local.txt");
    let server = format!("127.0.0.1:{port}");

    let sync = prov_or_hang(&case, &["sync"]);
    assert!(!sync.status.success(), "{}", describe(&sync));
    let said = String::from_utf8_lossy(&sync.stderr);
    assert_eq!(said.lines().count(), 1, "one line: {said:?}");
    assert!(said.contains(&server) && said.contains("no answer"), "{said}");

    // The configured default reads everywhere: the local journal answers.
    let query = prov_or_hang(&case, &["query", "history", "--json"]);
    assert!(query.status.success(), "{}", describe(&query));
    let records = parse_json_lines(&query.stdout);
    assert!(records.iter().any(|r| r["text"] == "sh -c 'echo local > local.txt'"), "{records:#?}");
    let said = String::from_utf8_lossy(&query.stderr);
    assert_eq!(said.lines().count(), 1, "one line: {said:?}");
    assert!(said.contains(&server) && said.contains("no answer") && said.contains("this host"), "{said}");

    let doctor = prov_or_hang(&case, &["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains(&server) && report.contains("no answer"), "{}", describe(&doctor));
}

/// `service=NAME` with a FIFO as ~/.pg_service.conf: one line naming the
/// file, not a `prov sync` that waits for a writer for ever.
#[test]
fn a_service_file_that_is_a_fifo_is_named() {
    let case = Case::new("faults-service-fifo");
    case.write_config("[sync]\nurl = \"service=central\"\nbackground = false\n");
    let file = case.home.join(".pg_service.conf");
    assert!(std::process::Command::new("mkfifo").arg(&file).status().unwrap().success());
    case.chown_tree(&case.home);
    let sync = prov_or_hang(&case, &["sync"]);
    assert!(!sync.status.success(), "{}", describe(&sync));
    let said = String::from_utf8_lossy(&sync.stderr);
    assert_eq!(said.lines().count(), 1, "one line: {said:?}");
    assert!(said.contains(".pg_service.conf") && said.contains("FIFO"), "{said}");
}
