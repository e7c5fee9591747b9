//! The central store (issue #17): several "nodes" — separate prov homes
//! with their own journals, each run in its own UTS namespace with its own
//! host name — push their records to a real throwaway PostgreSQL server
//! and query every host's records through it. Users are PostgreSQL roles
//! with passwords in their ~/.pgpass, as on a cluster.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use prov_e2e::postgres::Postgres;
use prov_e2e::{describe, installation, parse_json_lines, Case};
use serde_json::Value;

/// A cluster with prov's schema, set up as docs/cluster-store.md says:
/// an owner role for the schema, the group role prov_user, and users.
fn cluster(name: &str) -> Postgres {
    set_up(Postgres::start(&installation().root.join(name).join("pg")), name)
}

/// prov's roles and schema on a started server (over its socket).
fn set_up(pg: Postgres, name: &str) -> Postgres {
    for sql in [
        "CREATE ROLE prov_owner LOGIN PASSWORD 'owner-pw'",
        "CREATE ROLE prov_user NOLOGIN",
        "CREATE DATABASE prov OWNER prov_owner",
        "CREATE ROLE alice LOGIN PASSWORD 'alice-pw' IN ROLE prov_user",
        "CREATE ROLE bob LOGIN PASSWORD 'bob-pw' IN ROLE prov_user",
    ] {
        pg.admin("postgres", sql);
    }
    pg.admin("prov", "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    // A user cannot create the schema, and is told who can.
    let early = Node::new(&format!("{name}-early"), "early-node", &pg, "alice", "alice-pw");
    let out = early.prov(["sync"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        err.contains("has schema version 0, this prov needs 4; its owner applies it with `prov sync --setup`"),
        "{err}"
    );
    // The owner creates the schema: `prov sync --setup`, here from two
    // hosts at once (the migration's lock makes one wait for the other).
    let owner = Node::new(&format!("{name}-owner"), "admin-node", &pg, "prov_owner", "owner-pw");
    let setups: Vec<_> = (0..2)
        .map(|_| {
            let mut cmd = owner.command_in(&owner.case.work, owner.case.inst.prov(), ["sync", "--setup"]);
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for setup in setups {
        let out = setup.wait_with_output().unwrap();
        assert!(out.status.success(), "prov sync --setup: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("schema version 4"), "{}", describe(&out));
    }
    assert_eq!(
        pg.admin("prov", "SELECT string_agg(version::text, ',' ORDER BY version) FROM prov.schema_version"),
        "1,2,3,4"
    );
    pg
}

/// One host of the cluster: a prov home (its own journal) used as `role`.
struct Node {
    case: Case,
    host: String,
}

impl Node {
    fn new(name: &str, host: &str, pg: &Postgres, role: &str, password: &str) -> Node {
        Node::with_config(name, host, pg, role, password, "background = false\n")
    }

    fn with_config(name: &str, host: &str, pg: &Postgres, role: &str, password: &str, extra: &str) -> Node {
        let url = format!("host={} port={} dbname=prov user={role}", pg.socket_dir().display(), pg.port);
        Node::with_url(name, host, &url, role, password, extra)
    }

    fn with_url(name: &str, host: &str, url: &str, role: &str, password: &str, extra: &str) -> Node {
        let case = Case::new(name);
        case.write_config(&format!("[sync]\nurl = \"{url}\"\n{extra}"));
        let pgpass = case.home.join(".pgpass");
        std::fs::write(&pgpass, format!("db.elsewhere:5432:prov:{role}:wrong\n*:*:prov:{role}:{password}\n")).unwrap();
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        case.chown_tree(&case.home);
        Node { case, host: host.into() }
    }

    /// `program ARGS…` as the user on this node: in a UTS namespace whose
    /// host name is the node's, in `dir`.
    fn command_in<I, S>(&self, dir: &Path, program: impl AsRef<OsStr>, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let inner = self.case.command(program);
        let mut cmd = Command::new("unshare");
        cmd.args(["--uts", "--", "sh", "-c", "hostname \"$0\" && exec \"$@\""]).arg(&self.host);
        cmd.arg(inner.get_program()).args(inner.get_args()).args(args);
        cmd.env_clear();
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        cmd.current_dir(dir).stdin(std::process::Stdio::null());
        cmd
    }

    fn prov<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_in(&self.case.work, self.case.inst.prov(), args).output().unwrap()
    }

    /// `prov run -- sh -c SCRIPT` in `dir`, traced and successful.
    fn run_in(&self, dir: &Path, script: &str) {
        let out = self.command_in(dir, self.case.inst.prov(), ["run", "--", "sh", "-c", script]).output().unwrap();
        prov_e2e::assert_traced(&out);
        assert!(out.status.success(), "{script}: {}", describe(&out));
    }

    /// `prov sync`, successful: its line.
    fn sync(&self) -> String {
        let out = self.prov(["sync"]);
        assert!(out.status.success(), "prov sync on {}: {}", self.host, describe(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// JSON lines of `prov ARGS… --json` (exit 1 "nothing found" is empty).
    fn json<I, S>(&self, args: I) -> Vec<Value>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        args.push("--json".into());
        let out = self.prov(&args);
        let nothing = out.status.code() == Some(1) && String::from_utf8_lossy(&out.stderr).starts_with("prov: no ");
        assert!(out.status.success() || nothing, "prov {args:?}: {}", describe(&out));
        parse_json_lines(&out.stdout)
    }

    fn hosts_of(&self, args: &[&str]) -> Vec<String> {
        self.json(args).iter().map(|c| c["host"].as_str().unwrap().to_string()).collect()
    }
}

/// A directory every node sees (as a project directory on NFS would be).
fn shared_dir(name: &str) -> PathBuf {
    let dir = installation().root.join(name).join("project");
    std::fs::create_dir_all(&dir).unwrap();
    let inst = installation();
    let st = Command::new("chown").arg(format!("{}:{}", inst.uid, inst.gid)).arg(&dir).status().unwrap();
    assert!(st.success());
    dir
}

/// (records, distinct uuids, file events) on the server, as its superuser sees them.
fn server_counts(pg: &Postgres) -> (u64, u64, u64) {
    let row = pg.admin(
        "prov",
        "SELECT (SELECT count(*) FROM prov.commands), (SELECT count(DISTINCT uuid) FROM prov.commands),
                (SELECT count(*) FROM prov.file_events)",
    );
    let n: Vec<u64> = row.split('\t').map(|v| v.parse().unwrap()).collect();
    (n[0], n[1], n[2])
}

#[test]
fn records_of_two_hosts_meet_in_the_central_store_once_each_and_link() {
    let pg = cluster("sync-two-hosts");
    let project = shared_dir("sync-two-hosts");
    let node17 = Node::new("sync-two-hosts-node17", "node17", &pg, "alice", "alice-pw");
    let login = Node::new("sync-two-hosts-login", "login1", &pg, "alice", "alice-pw");

    node17.run_in(&project, "printf 'gene\\t3\\n' > counts.tsv");
    login.run_in(&project, "tr a-z A-Z < counts.tsv > plot.txt");
    // Each journal has its own host's record only.
    assert_eq!(node17.hosts_of(&["query", "history"]), ["node17"]);
    assert_eq!(login.hosts_of(&["query", "history"]), ["login1"]);

    assert!(node17.sync().starts_with("prov sync: pushed 1 record(s) (1 file events)"), "{}", node17.sync());
    assert!(login.sync().contains("pushed 1 record(s) (2 file events)"));
    assert!(login.sync().starts_with("prov sync: pushed 0 record(s)"), "a second push stores nothing");
    assert_eq!(server_counts(&pg), (2, 2, 3));

    // A push whose marks were lost (a crash after the server's commit)
    // finds the records there and stores nothing twice.
    let db = login.case.database();
    let st = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(&db)
        .arg("DELETE FROM sync_pushed; DELETE FROM sync_state WHERE key = 'pushed_through'")
        .status()
        .unwrap();
    assert!(st.success());
    let status = login.prov(["sync", "--status"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout).trim(), "1 record(s) pending");
    assert!(login.sync().contains("pushed 0 record(s) (0 file events) to alice@"), "{}", login.sync());
    assert_eq!(server_counts(&pg), (2, 2, 3));

    // Every host's records, with the same filters and output.
    let mut everywhere = login.hosts_of(&["query", "history", "--everywhere"]);
    everywhere.sort();
    assert_eq!(everywhere, ["login1", "node17"]);
    assert_eq!(login.hosts_of(&["query", "history", "--everywhere", "--host", "node17"]), ["node17"]);
    let counts = project.join("counts.tsv");
    let writer = login.json([OsStr::new("query"), OsStr::new("wrote"), counts.as_os_str(), OsStr::new("--everywhere")]);
    assert_eq!(writer.len(), 1, "{writer:#?}");
    assert_eq!(writer[0]["host"], "node17");
    // --local (the default) is this host's journal only.
    assert_eq!(login.hosts_of(&["query", "history", "--local"]), ["login1"]);

    // Lineage follows the file from the login node to the job's node.
    let plot = project.join("plot.txt");
    let out = login.prov([
        OsStr::new("query"),
        OsStr::new("lineage"),
        plot.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
        OsStr::new("--everywhere"),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let lineage: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts: Vec<&str> =
        lineage["commands"].as_array().unwrap().iter().map(|c| c["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["node17", "login1"], "{lineage:#}");
    assert!(lineage["flows"].as_array().unwrap().iter().any(|f| f["match"] == "path"), "{lineage:#}");

    // The HTML report too.
    let out = login.prov(["report", "-o", "-", "--everywhere"]);
    assert!(out.status.success(), "{}", describe(&out));
    let html = String::from_utf8_lossy(&out.stdout);
    // One session (lane) per host: sessions of different hosts never merge.
    assert!(html.contains(r#""host":"node17""#) && html.contains(r#""host":"login1""#), "a session of each host");

    // prov delete applies to the central store at the next push, and to
    // every host's cache at its next pull.
    let out = node17.prov(["delete", "--text", "printf", "--yes"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 of them are deleted in the central store at the next push")
    );
    assert!(node17.sync().contains(", deleted 1 there"), "{}", node17.sync());
    assert_eq!(server_counts(&pg), (1, 1, 2));
    assert_eq!(login.hosts_of(&["query", "history", "--everywhere"]), ["login1"]);
}

#[test]
fn a_push_cut_by_an_outage_resumes_without_loss_or_duplicates() {
    let pg = cluster("sync-outage");
    let project = shared_dir("sync-outage");
    let node = Node::new("sync-outage-node", "node3", &pg, "alice", "alice-pw");
    for i in 1..=3 {
        node.run_in(&project, &format!("echo {i} > out{i}.txt"));
    }
    // The server goes away in the middle of the push: the connection of the
    // second record's transaction is terminated by the server.
    pg.admin(
        "prov",
        "CREATE FUNCTION prov.cut() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN
             IF position('out2' in convert_from(NEW.text, 'UTF8')) > 0 THEN
                 PERFORM pg_terminate_backend(pg_backend_pid());
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER cut BEFORE INSERT ON prov.commands FOR EACH ROW EXECUTE FUNCTION prov.cut()",
    );
    let out = node.prov(["sync"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(err.contains("cannot reach the central store"), "{err}");
    assert!(err.contains("pushed 1 record(s) before that; 2 record(s) pending"), "{err}");
    assert!(!err.trim().contains('\n'), "one line: {err}");
    assert_eq!(server_counts(&pg), (1, 1, 1));
    pg.admin("prov", "DROP TRIGGER cut ON prov.commands");

    // Then the whole server is down: the push fails in one line, records
    // stay pending, the local journal answers as before.
    pg.stop();
    let out = node.prov(["sync"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("prov: cannot reach the central store alice@") && err.contains("2 record(s) pending"),
        "{err}"
    );
    assert_eq!(node.json(["query", "history"]).len(), 3);
    node.run_in(&project, "echo 4 > out4.txt");
    // --everywhere without a server and without a cache is an error, not a hang.
    let out = node.prov(["query", "history", "--everywhere"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));

    pg.resume();
    assert!(node.sync().starts_with("prov sync: pushed 3 record(s) (3 file events)"), "resumed");
    assert_eq!(server_counts(&pg), (4, 4, 4));
    let texts: Vec<String> = node
        .json(["query", "history", "--everywhere"])
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts.len(), 4, "{texts:?}");

    // The cache answers while the server is down again, and says so.
    pg.stop();
    let out = node.prov(["query", "history", "--everywhere", "--json"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(parse_json_lines(&out.stdout).len(), 4);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("showing the central store as last pulled"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_node_whose_clock_is_off_is_pulled_all_the_same() {
    let pg = cluster("sync-skew");
    let project = shared_dir("sync-skew");
    let login = Node::new("sync-skew-login", "login1", &pg, "alice", "alice-pw");
    let skewed = Node::new("sync-skew-node", "node9", &pg, "alice", "alice-pw");
    login.run_in(&project, "echo now > now.txt");
    login.sync();
    assert_eq!(login.json(["query", "history", "--everywhere"]).len(), 1);

    // node9's clock is three days behind: its record says so.
    skewed.run_in(&project, "echo late > late.txt");
    let three_days = 3 * 86_400 * 1_000_000_000i64;
    let st = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(skewed.case.database())
        .arg(format!("UPDATE commands SET start_ns = start_ns - {three_days}, end_ns = end_ns - {three_days}"))
        .status()
        .unwrap();
    assert!(st.success());
    skewed.sync();
    // The login node's cache, pulled before, still gets the "older" record,
    // and lists it by its start time.
    let history = login.json(["query", "history", "--everywhere"]);
    let hosts: Vec<&str> = history.iter().map(|c| c["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["login1", "node9"], "newest first: {history:#?}");
    assert_eq!(login.hosts_of(&["query", "history", "--everywhere", "--until", "1d"]), ["node9"]);
}

#[test]
fn users_read_only_their_own_rows_even_with_their_own_sql_unless_granted() {
    let pg = cluster("sync-privacy");
    let project = shared_dir("sync-privacy");
    let alice = Node::new("sync-privacy-alice", "node1", &pg, "alice", "alice-pw");
    let bob = Node::new("sync-privacy-bob", "node2", &pg, "bob", "bob-pw");
    alice.run_in(&alice.case.work, "echo mine > alice.txt");
    bob.run_in(&bob.case.work, "echo secret > bob-private.txt");
    bob.run_in(&project, "echo shared > bob-project.txt");
    alice.sync();
    bob.sync();
    assert_eq!(server_counts(&pg).0, 3);

    // Alice's own SQL sees her rows only, in every table.
    let as_alice = |sql: &str| pg.psql("alice", "alice-pw", "prov", sql);
    assert_eq!(as_alice("SELECT count(*) FROM prov.commands").unwrap(), "1");
    assert_eq!(as_alice("SELECT count(*) FROM prov.commands WHERE owner = 'bob'").unwrap(), "0");
    assert_eq!(as_alice("SELECT count(*) FROM prov.file_events").unwrap(), "1");
    assert_eq!(
        as_alice("SELECT count(*) FROM prov.command_dirs WHERE position('bob' in encode(path, 'escape')) > 0").unwrap(),
        "0"
    );
    // She cannot write around the push functions, nor into Bob's records.
    let err = as_alice("INSERT INTO prov.commands(uuid, owner, start_ns, seq, session, host, user_name, shell, text, cwd, counters, hash_params) VALUES (gen_random_uuid(), 'bob', 0, 0, '', '', '', '', '', '', '{}', '{}')").unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    let bobs_id = pg.admin("prov", "SELECT min(id) FROM prov.commands WHERE owner = 'bob'");
    let err = as_alice(&format!(
        "SELECT prov.push_events({bobs_id}, '{{0}}', '{{x}}', '{{1}}', '{{1}}', '{{1}}', '{{1}}', '{{0}}', '{{1}}')"
    ))
    .unwrap_err();
    assert!(err.contains("was not stored by this transaction"), "{err}");
    let err = as_alice("DELETE FROM prov.commands").unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(as_alice("SELECT prov.delete_commands(array(SELECT uuid FROM prov.commands))").unwrap(), "1");
    alice.run_in(&alice.case.work, "echo again > alice2.txt");
    alice.sync();
    assert_eq!(server_counts(&pg).0, 3, "Bob's two records are still there");
    assert_eq!(alice.hosts_of(&["query", "history", "--everywhere"]), ["node1"]);

    // An administrator grants the project's group read access to records
    // run in the project directory: Bob's project record, not his others.
    pg.admin("prov", "CREATE ROLE proj_x NOLOGIN");
    pg.admin("prov", "GRANT proj_x TO alice");
    pg.admin("prov", &format!("INSERT INTO prov.read_grants VALUES ('proj_x', '{}'::bytea)", project.display()));
    let visible = as_alice("SELECT convert_from(text, 'UTF8') FROM prov.commands WHERE owner = 'bob'").unwrap();
    assert_eq!(visible, "sh -c 'echo shared > bob-project.txt'");
    assert_eq!(as_alice("SELECT count(*) FROM prov.file_events").unwrap(), "2");
    let texts: Vec<String> = alice
        .json(["query", "history", "--everywhere"])
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    assert!(texts.contains(&"sh -c 'echo shared > bob-project.txt'".to_string()), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("secret")), "{texts:?}");

    // Retention for everyone is the owner's, not a user's.
    let err = as_alice("SELECT prov.expire(9223372036854775807)").unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    let expired = pg.psql("prov_owner", "owner-pw", "prov", "SELECT prov.expire(9223372036854775807)").unwrap();
    assert_eq!(expired, "3");
    assert_eq!(server_counts(&pg), (0, 0, 0));
}

#[test]
fn records_are_pushed_in_the_background_after_commands() {
    let pg = cluster("sync-background");
    let node = Node::with_config("sync-background-node", "node5", &pg, "alice", "alice-pw", "background = true\n");
    node.run_in(&node.case.work, "echo bg > bg.txt");
    let deadline = Instant::now() + Duration::from_secs(30);
    while server_counts(&pg).0 < 1 {
        assert!(
            Instant::now() < deadline,
            "not pushed in the background; {}",
            describe(&node.prov(["sync", "--status"]))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // With the server down, commands run and are recorded as ever.
    pg.stop();
    node.run_in(&node.case.work, "echo offline > off.txt");
    assert_eq!(node.json(["query", "history"]).len(), 2);
    std::thread::sleep(Duration::from_millis(500));
    let status = node.prov(["sync", "--status"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout).trim(), "1 record(s) pending", "{}", describe(&status));
    pg.resume();
    assert!(node.sync().starts_with("prov sync: pushed 1 record(s)"));
}

#[test]
fn hosts_sharing_a_home_keep_one_journal_each() {
    let pg = cluster("sync-nfs-layout");
    let a = Node::with_config(
        "sync-nfs-layout",
        "nodeA",
        &pg,
        "alice",
        "alice-pw",
        "background = false\n[database]\npath = \"~/.local/share/prov/{host}/prov.db\"\n",
    );
    // The same home (as over NFS), another host.
    let b = Node { case: Case::new("sync-nfs-layout"), host: "nodeB".into() };
    a.run_in(&a.case.work, "echo a > a.txt");
    b.run_in(&b.case.work, "echo b > b.txt");
    let share = a.case.home.join(".local/share/prov");
    assert!(share.join("nodeA/prov.db").exists() && share.join("nodeB/prov.db").exists());
    assert!(!share.join("prov.db").exists());
    assert_eq!(a.hosts_of(&["query", "history"]), ["nodeA"]);
    assert_eq!(b.hosts_of(&["query", "history"]), ["nodeB"]);
    a.sync();
    b.sync();
    let mut hosts = a.hosts_of(&["query", "history", "--everywhere"]);
    hosts.sort();
    assert_eq!(hosts, ["nodeA", "nodeB"]);
    assert!(share.join("nodeA/central.db").exists(), "the cache is per host too");
}

#[test]
fn a_bad_url_or_no_url_is_one_line() {
    let case = Case::new("sync-bad-url");
    let out = case.prov(["sync"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("prov: no central store is configured: set [sync] url in "), "{err}");
    case.write_config("[sync]\nurl = \"postgresql://a@b:notaport/x\"\n");
    let out = case.prov(["sync"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("prov: bad [sync] url: ") && err.trim().lines().count() == 1, "{err}");
    // verify-ca with no CA to verify with: said before any connection.
    case.write_config("[sync]\nurl = \"postgresql://a@db.example/prov?sslmode=verify-ca\"\n");
    let out = case.prov(["sync"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("sslmode=verify-ca needs the CA that signed the server's certificate")
            && err.contains(".postgresql/root.crt does not exist")
            && err.trim().lines().count() == 1,
        "{err}"
    );
    case.write_config("[sync]\n\nurl = \"\"\n");
    let out = case.prov(["config"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml:3: "), "{err}");
}

/// A process tree as compared across hosts: everything of each process but
/// its ids (the cache numbers records and processes its own way), its
/// parent by position, its files sorted.
fn process_tree(all: &[Value]) -> Vec<Value> {
    let position = |id: &Value| all.iter().position(|p| &p["id"] == id);
    all.iter()
        .map(|p| {
            let sorted = |key: &str| {
                let mut v: Vec<String> =
                    p[key].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
                v.sort();
                v
            };
            serde_json::json!({
                "parent": position(&p["parent"]), "depth": p["depth"], "pid": p["pid"], "ppid": p["ppid"],
                "exe": p["exe"], "args": p["args"], "args_unknown": p["args_unknown"], "cwd": p["cwd"],
                "start_ns": p["start_ns"], "end_ns": p["end_ns"],
                "writes": sorted("writes"), "reads": sorted("reads"),
            })
        })
        .collect()
}

/// `prov query lineage FILE --processes` with the record ids masked.
fn process_lineage(node: &Node, file: &Path, extra: &[&str]) -> String {
    let mut args = vec![OsStr::new("query"), OsStr::new("lineage"), file.as_os_str(), OsStr::new("--processes")];
    args.extend([OsStr::new("--no-pager")]);
    args.extend(extra.iter().map(OsStr::new));
    let out = node.prov(&args);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut masked = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("command ") {
        masked.push_str(&rest[..at + "command ".len()]);
        rest = rest[at + "command ".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        masked.push('#');
    }
    masked.push_str(rest);
    masked
}

#[test]
fn a_commands_processes_are_pushed_and_read_on_another_host_as_their_own() {
    let pg = cluster("sync-processes");
    let project = shared_dir("sync-processes");
    let node_a = Node::new("sync-processes-a", "node21", &pg, "alice", "alice-pw");
    let login = Node::new("sync-processes-login", "login1", &pg, "alice", "alice-pw");
    let bob = Node::new("sync-processes-bob", "node22", &pg, "bob", "bob-pw");
    std::fs::write(
        project.join("Makefile"),
        "report.txt: sorted.txt\n\tcp sorted.txt report.txt\nsorted.txt: data.txt\n\tsort -o sorted.txt data.txt\n",
    )
    .unwrap();
    node_a.run_in(&project, "seq 30000 -1 1 > data.txt");
    // A make-like command: make, and sort and cp under it (the sh that
    // runs make and make are one pid, two images).
    node_a.run_in(&project, "make report.txt");
    let id_on = |node: &Node, everywhere: bool| -> String {
        let mut args = vec!["query", "history"];
        if everywhere {
            args.push("--everywhere");
        }
        let all = node.json(&args);
        let make = all.iter().find(|c| c["text"].as_str().unwrap().contains("make report.txt"));
        make.unwrap_or_else(|| panic!("the make record: {all:#?}"))["id"].as_i64().unwrap().to_string()
    };
    let local_id = id_on(&node_a, false);
    // The process table is stored once the last process is gone, which can
    // trail the record's end by a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let on_a = loop {
        let all = node_a.json(["query", "processes", &local_id]);
        if all.len() >= 4 || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(on_a.len() >= 4, "make, sh, sort, wc: {on_a:#?}");
    node_a.sync();
    let rows = pg.admin(
        "prov",
        "SELECT count(*) FROM prov.processes p JOIN prov.commands c ON c.id = p.command_id
         WHERE position('make report.txt' in convert_from(c.text, 'UTF8')) > 0",
    );
    assert_eq!(rows, on_a.len().to_string(), "one server row per process");

    // The login node sees the same tree, each file under the same process.
    let cache_id = id_on(&login, true);
    let on_login = login.json(["query", "processes", &cache_id, "--everywhere"]);
    assert_eq!(process_tree(&on_login), process_tree(&on_a), "{on_login:#?}\n{on_a:#?}");
    let report = project.join("report.txt");
    let here = process_lineage(&node_a, &report, &[]);
    // report.txt <- cp <- sorted.txt <- sort <- data.txt.
    // (A process gone within a millisecond may keep no arguments, only its
    // executable: process_table.rs.)
    let lines: Vec<&str> = here.lines().collect();
    assert!(lines.len() >= 5 && lines[1].contains("written by ") && lines[1].contains("cp"), "{here}");
    assert!(lines[2].ends_with(&format!("read {}/sorted.txt", project.display())), "{here}");
    assert!(lines[3].contains("written by ") && lines[3].contains("sort"), "{here}");
    assert_eq!(process_lineage(&login, &report, &["--everywhere"]), here);
    // Pushed again (marks lost), nothing is stored twice.
    let st = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(node_a.case.database())
        .arg("DELETE FROM sync_pushed; DELETE FROM sync_state WHERE key = 'pushed_through'")
        .status()
        .unwrap();
    assert!(st.success());
    node_a.sync();
    let all_rows = pg.admin("prov", "SELECT count(*) FROM prov.processes");
    node_a.sync();
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.processes"), all_rows);

    // Bob's own SQL sees none of Alice's processes; Alice's sees them.
    bob.run_in(&bob.case.work, "echo b > b.txt");
    bob.sync();
    let alices = pg.admin(
        "prov",
        "SELECT string_agg(DISTINCT command_id::text, ',') FROM prov.processes
         WHERE command_id IN (SELECT id FROM prov.commands WHERE owner = 'alice')",
    );
    let as_bob = |sql: &str| pg.psql("bob", "bob-pw", "prov", sql).unwrap();
    let as_role = |role: &str, sql: &str| pg.psql(role, &format!("{role}-pw"), "prov", sql).unwrap();
    assert_eq!(as_bob(&format!("SELECT count(*) FROM prov.processes WHERE command_id IN ({alices})")), "0");
    let bobs = pg.admin(
        "prov",
        "SELECT count(*) FROM prov.processes WHERE command_id IN (SELECT id FROM prov.commands WHERE owner = 'bob')",
    );
    assert_eq!(as_bob("SELECT count(*) FROM prov.processes"), bobs, "his own only");
    assert_eq!(pg.psql("alice", "alice-pw", "prov", "SELECT count(*) FROM prov.processes").unwrap(), all_rows);
    let err = pg
        .psql(
            "bob",
            "bob-pw",
            "prov",
            "SELECT prov.push_processes(1, '{1}', '{1}', '{x}', '{x}', '{x}', '{x}', '{1}', '{1}', '{0}')",
        )
        .unwrap_err();
    assert!(err.contains("was not stored by this transaction"), "{err}");
    // Nor can push_records add to another's record: a uuid the server has is
    // skipped whole, events and all.
    let bobs = pg.admin("prov", "SELECT uuid FROM prov.commands WHERE owner = 'bob'");
    let events_before = pg.admin("prov", "SELECT count(*) FROM prov.file_events");
    let ids = as_role("alice", &format!(
        "SELECT prov.push_records(ARRAY['{bobs}']::uuid[], '{{s}}', '{{1}}', '{{x}}', '{{/}}', '{{h}}', '{{u}}', '{{sh}}',
             '{{1}}', '{{2}}', '{{0}}', '{{0,0,0,0,0,0,0}}', '{{NULL}}', '{{NULL}}', '{{}}', '{{1}}', '{{0}}', '{{}}', '{{}}',
             '{{}}', '{{1}}', '{{-1}}', '{{planted}}', '{{1}}', '{{1}}', '{{1}}', '{{NULL}}', '{{0}}', '{{1}}')"
    ));
    assert_eq!(ids, "{NULL}");
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.file_events"), events_before);

    // prov delete removes them centrally and from the caches.
    let out = node_a.prov(["delete", "--text", "make report.txt", "--yes"]);
    assert!(out.status.success(), "{}", describe(&out));
    node_a.sync();
    let left = pg.psql("alice", "alice-pw", "prov", "SELECT count(*) FROM prov.processes").unwrap();
    assert_eq!(left.parse::<u64>().unwrap(), all_rows.parse::<u64>().unwrap() - rows.parse::<u64>().unwrap());
    assert!(login
        .json(["query", "history", "--everywhere"])
        .iter()
        .all(|c| !c["text"].as_str().unwrap().contains("make")));
}

#[test]
fn prov_doctor_says_what_is_wrong_with_the_central_store_in_one_line() {
    let pg = cluster("sync-doctor");
    let node = Node::new("sync-doctor-node", "node7", &pg, "alice", "alice-pw");
    let central_lines = |node: &Node| -> Vec<String> {
        let out = node.prov(["doctor"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.contains("central store"));
        let at = at.unwrap_or_else(|| panic!("a central store line: {}", describe(&out)));
        // The finding and, when not ok, its remedy.
        lines[at..].iter().take(2).map(|l| l.to_string()).collect()
    };
    node.run_in(&node.case.work, "echo one > one.txt");
    let lines = central_lines(&node);
    assert!(lines[0].starts_with("ok    central store alice@"), "{lines:?}");
    assert!(lines[0].ends_with(": reachable, schema version 4, 1 record(s) pending"), "{lines:?}");

    // A wrong password: said, with where the password comes from.
    let pgpass = node.case.home.join(".pgpass");
    let good = std::fs::read_to_string(&pgpass).unwrap();
    std::fs::write(&pgpass, good.replace("alice-pw", "not-it")).unwrap();
    let lines = central_lines(&node);
    assert!(lines[0].starts_with("WARN  the central store alice@"), "{lines:?}");
    assert!(
        lines[0].contains("password authentication failed") && lines[0].ends_with("; 1 record(s) pending"),
        "{lines:?}"
    );
    assert!(lines[1].contains("~/.pgpass"), "{lines:?}");
    std::fs::write(&pgpass, good).unwrap();

    // The server down: said, and that records wait.
    pg.stop();
    let lines = central_lines(&node);
    assert!(lines[0].starts_with("WARN  cannot reach the central store alice@"), "{lines:?}");
    assert!(lines[1].contains("records wait in the local journal"), "{lines:?}");
    pg.resume();
    node.sync();
    assert!(central_lines(&node)[0].ends_with("schema version 4, 0 record(s) pending"));
}

#[test]
fn tls_to_the_central_store_is_checked_as_sslmode_asks() {
    let pg = set_up(Postgres::start_tls(&installation().root.join("sync-tls").join("pg")), "sync-tls");
    let port = pg.port;
    let tls = pg.tls_dir();
    let (ca, other_ca) = (tls.join("ca.crt"), tls.join("other-ca.crt"));
    let url = |host: &str, settings: &str| format!("host={host} port={port} dbname=prov user=alice {settings}");
    let node = |name: &str, url: &str| Node::with_url(name, "node9", url, "alice", "alice-pw", "background = false\n");
    let failure = |node: &Node| {
        let out = node.prov(["sync"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        err
    };
    let doctor_line = |node: &Node| {
        let out = node.prov(["doctor"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find(|l| l.contains("central store")).unwrap_or_else(|| panic!("{}", describe(&out))).to_owned()
    };

    // verify-full with the CA that signed the server's certificate: pushed.
    let good = node("sync-tls-good", &url("localhost", &format!("sslmode=verify-full sslrootcert={}", ca.display())));
    good.run_in(&good.case.work, "echo one > one.txt");
    let line = good.sync();
    assert!(line.contains("pushed 1 record"), "{line}");
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.commands"), "1");
    let line = doctor_line(&good);
    assert!(line.contains(": reachable over TLS (sslmode=verify-full), schema version 4"), "{line}");

    // Another CA: refused, saying why, and nothing is sent.
    let wrong =
        node("sync-tls-wrong", &url("localhost", &format!("sslmode=verify-full sslrootcert={}", other_ca.display())));
    wrong.run_in(&wrong.case.work, "echo two > two.txt");
    let err = failure(&wrong);
    assert!(
        err.starts_with("prov: no secure connection to the central store alice@localhost:")
            && err.contains(&format!(
                "its certificate is not signed by a CA of {} (sslmode=verify-full)",
                other_ca.display()
            )),
        "{err}"
    );
    assert!(doctor_line(&wrong).starts_with("WARN  no secure connection"));

    // The right CA but the wrong name (the certificate is for localhost):
    // verify-full refuses, verify-ca (the chain only) connects.
    let by_address =
        node("sync-tls-name", &url("127.0.0.1", &format!("sslmode=verify-full sslrootcert={}", ca.display())));
    let err = failure(&by_address);
    assert!(err.contains("its certificate is not for the host name connected to (sslmode=verify-full)"), "{err}");
    let chain_only = node("sync-tls-ca", &url("127.0.0.1", &format!("sslmode=verify-ca sslrootcert={}", ca.display())));
    chain_only.sync();

    // require without a root file: encrypted, not verified (as libpq).
    let required = node("sync-tls-require", &url("127.0.0.1", "sslmode=require"));
    required.run_in(&required.case.work, "echo three > three.txt");
    assert!(required.sync().contains("pushed 1 record"));
    assert!(doctor_line(&required).contains("reachable over TLS (sslmode=require)"));
    // No sslmode: libpq's prefer, TLS when the server offers it.
    let preferred = node("sync-tls-prefer", &url("127.0.0.1", ""));
    assert!(doctor_line(&preferred).contains("reachable over TLS (sslmode=prefer)"));

    // Without TLS the server (hostssl only) has no entry for the client.
    let plain = node("sync-tls-plain", &url("127.0.0.1", "sslmode=disable"));
    let err = failure(&plain);
    assert!(err.contains("no pg_hba.conf entry") && err.contains("no encryption"), "{err}");
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.commands"), "2");

    // A server that offers no TLS: require refuses it, saying so.
    let mut pg = pg;
    pg.restart_without_tls();
    let err = failure(&required);
    assert!(err.contains("the server does not offer TLS, which sslmode=require asks for"), "{err}");
}

#[test]
fn processes_stored_after_their_record_was_pushed_reach_the_central_store() {
    let pg = cluster("sync-late");
    let node = Node::new("sync-late-node", "node31", &pg, "alice", "alice-pw");
    let login = Node::new("sync-late-login", "login2", &pg, "alice", "alice-pw");
    let work = node.case.work.clone();
    std::fs::write(work.join("in.txt"), "late\n").unwrap();
    // The command returns at once; its background job outlives it, waits
    // for the gate, then copies: the record ends before its last process,
    // whose table (and late events) the journal stores when it ends.
    node.run_in(&work, "(while [ ! -e gate ]; do sleep 0.05; done; cp in.txt late.txt) >/dev/null 2>&1 & echo started");
    let local_id = node.json(["query", "history"]).last().unwrap()["id"].as_i64().unwrap().to_string();
    assert!(node.json(["query", "processes", &local_id]).is_empty(), "the job still runs: no process table yet");
    let line = node.sync();
    assert!(line.contains("pushed 1 record"), "{line}");
    // Rows of `table` (as t) of the record on the server where `condition`.
    let on_server = |table: &str, condition: &str| {
        pg.admin(
            "prov",
            &format!(
                "SELECT count(*) FROM {table} t WHERE {condition} AND t.command_id IN (SELECT id FROM prov.commands
                 WHERE position('echo started' in convert_from(text, 'UTF8')) > 0)"
            ),
        )
    };
    assert_eq!(on_server("prov.processes", "true"), "0");
    // The login node caches the record as it is now.
    assert_eq!(login.json(["query", "history", "--everywhere"]).len(), 1);

    // Nobody takes back another's record.
    let uuid = pg.admin("prov", "SELECT uuid FROM prov.commands");
    assert_eq!(pg.psql("bob", "bob-pw", "prov", &format!("SELECT prov.take_back('{uuid}')")).unwrap(), "f");
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.commands"), "1");

    std::fs::write(work.join("gate"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let on_node = loop {
        let all = node.json(["query", "processes", &local_id]);
        if !all.is_empty() || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(on_node.iter().any(|p| p["exe"].as_str().is_some_and(|e| e.ends_with("/cp"))), "{on_node:#?}");
    let line = node.sync();
    assert!(line.contains("pushed 1 record"), "stored again with its processes: {line}");
    assert_eq!(on_server("prov.processes", "true"), on_node.len().to_string());
    assert_eq!(
        pg.admin(
            "prov",
            "SELECT count(*) FROM prov.commands WHERE position('echo started' in convert_from(text, 'UTF8')) > 0"
        ),
        "1"
    );
    // The copy's events came late too, and are there.
    assert_eq!(on_server("prov.file_events", "t.name = 'late.txt'::bytea AND t.access = 1"), "1");
    // The login node replaces its copy: the same tree as the node's.
    let history = login.json(["query", "history", "--everywhere"]);
    assert_eq!(history.len(), 1, "{history:#?}");
    let cache_id = history[0]["id"].as_i64().unwrap().to_string();
    let on_login = login.json(["query", "processes", &cache_id, "--everywhere"]);
    assert_eq!(process_tree(&on_login), process_tree(&on_node), "{on_login:#?}\n{on_node:#?}");
    // Nothing more to do: not stored a third time.
    assert!(node.sync().contains("pushed 0 record"));
}

/// A member of a project group pushes, through the push functions, a
/// record claiming to be a colleague's: user name "alice", a host whose
/// line breaks would be Makefile rules, a file the project has. Pulled,
/// it is the role the server stamped it with ("bob"), not the claim:
/// `--user alice` does not find it, `--user bob` does, and the Makefile
/// of its lineage names bob on one comment line and runs nothing else.
#[test]
fn a_forged_record_shows_who_pushed_it_and_stays_data_in_exports() {
    let pg = cluster("sync-forged");
    let project = shared_dir("sync-forged");
    pg.admin("prov", "CREATE ROLE proj_f NOLOGIN");
    pg.admin("prov", "GRANT proj_f TO alice, bob");
    pg.admin("prov", &format!("INSERT INTO prov.read_grants VALUES ('proj_f', '{}'::bytea)", project.display()));
    let alice = Node::new("sync-forged-alice", "node1", &pg, "alice", "alice-pw");
    alice.run_in(&project, "echo mine > alice.txt");
    alice.sync();

    let content = b"forged\n";
    std::fs::write(project.join("result.txt"), content).unwrap();
    let hash = u64::from_str_radix(&expected_hash_of(content), 16).unwrap() as i64;
    let dir = project.display().to_string();
    let host = "node1\n.PHONY: all\nall: pwn\npwn:\n\ttouch PWNED";
    let forge = format!(
        "WITH c AS (SELECT prov.push_command(gen_random_uuid(), 'forged-session', 1,
             convert_to('echo forged > result.txt', 'UTF8'), convert_to('{dir}', 'UTF8'), E'{host}', 'alice', 'bash',
             (extract(epoch FROM now()) * 1e9)::bigint - 2000000000, (extract(epoch FROM now()) * 1e9)::bigint - 1000000000,
             0, '{{0,0,0,0,0,0,0}}', NULL, NULL, '{{256,3}}', ARRAY[convert_to('{dir}', 'UTF8')]) AS id)
         SELECT prov.push_events((SELECT id FROM c), '{{0}}', ARRAY[convert_to('result.txt', 'UTF8')], '{{1}}',
             '{{{size}}}', '{{0}}', '{{{hash}}}', '{{0}}', '{{NULL}}')",
        host = host.replace('\n', "\\n").replace('\t', "\\t"),
        size = content.len(),
    );
    pg.psql("bob", "bob-pw", "prov", &forge).unwrap();
    assert_eq!(
        pg.admin("prov", "SELECT owner || ' ' || user_name FROM prov.commands WHERE session = 'forged-session'"),
        "bob alice"
    );

    let users = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["query", "history", "--everywhere"];
        args.extend_from_slice(extra);
        alice
            .json(&args)
            .iter()
            .map(|c| format!("{} {}", c["user"].as_str().unwrap(), c["text"].as_str().unwrap()))
            .collect()
    };
    let all = users(&[]);
    assert!(all.contains(&"bob echo forged > result.txt".to_string()), "{all:?}");
    assert!(!all.iter().any(|u| u.starts_with("alice echo forged")), "shown as the claimed user: {all:?}");
    assert_eq!(users(&["--user", "alice"]), ["alice sh -c 'echo mine > alice.txt'"]);
    assert_eq!(users(&["--user", "bob"]), ["bob echo forged > result.txt"]);

    let mk = alice.case.work.join("forged.mk");
    let out = alice.prov([
        OsStr::new("query"),
        OsStr::new("lineage"),
        project.join("result.txt").as_os_str(),
        OsStr::new("--everywhere"),
        OsStr::new("--format"),
        OsStr::new("makefile"),
        OsStr::new("-o"),
        mk.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = std::fs::read_to_string(&mk).unwrap();
    let by: Vec<&str> = text.lines().filter(|l| l.starts_with("# #")).collect();
    assert_eq!(by.len(), 1, "{text}");
    assert!(by[0].contains("by bob@node1\\n.PHONY: all\\nall: pwn"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("pwn:")), "{text}");
    let dry = alice
        .command_in(&alice.case.work, "make", [OsStr::new("-n"), OsStr::new("-f"), mk.as_os_str()])
        .output()
        .unwrap();
    assert!(dry.status.success(), "{}", describe(&dry));
    assert!(!String::from_utf8_lossy(&dry.stdout).contains("PWNED"), "{}", describe(&dry));
}

/// The content hash prov records with its default hash parameters.
fn expected_hash_of(content: &[u8]) -> String {
    prov_e2e::expected_hash(content, 256, 3)
}

/// A record's environment (its variables and git state) and the executed
/// file of each of its programs travel with it: stored once per distinct
/// environment on the server, shown on another host by `prov query env`
/// and found by `--env` as in the journal, read by no other user, and
/// removed with the records.
#[test]
fn a_commands_environment_travels_with_it() {
    let pg = cluster("sync-env");
    let project = shared_dir("sync-env");
    let node = Node::new("sync-env-node", "node41", &pg, "alice", "alice-pw");
    let login = Node::new("sync-env-login", "login4", &pg, "alice", "alice-pw");
    let bob = Node::new("sync-env-bob", "node42", &pg, "bob", "bob-pw");
    let git = node
        .command_in(
            &project,
            "sh",
            ["-c", "git init -q . && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m one"],
        )
        .output()
        .unwrap();
    assert!(git.status.success(), "{}", describe(&git));
    // Two steps of one Slurm job, and a command outside it.
    let run = |job: Option<&str>, script: &str| {
        let mut cmd = node.command_in(&project, node.case.inst.prov(), ["run", "--", "sh", "-c", script]);
        if let Some(job) = job {
            cmd.env("SLURM_JOB_ID", job);
        }
        let out = cmd.output().unwrap();
        prov_e2e::assert_traced(&out);
        assert!(out.status.success(), "{script}: {}", describe(&out));
    };
    run(Some("4242"), "seq 100 > job-a.txt");
    run(Some("4242"), "sort -n job-a.txt > job-b.txt");
    run(None, "cat job-b.txt > outside.txt");
    // Oldest first.
    let history = node.json(["query", "history"]);
    let local: Vec<String> = history.iter().rev().map(|c| c["id"].as_i64().unwrap().to_string()).collect();
    assert_eq!(local.len(), 3, "{history:#?}");
    // The process tables (the executed files) are stored when the last
    // process is gone, which can trail the records' ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    let on_node: Vec<Value> = loop {
        let all: Vec<Value> = local.iter().map(|id| node.json(["query", "env", id]).remove(0)).collect();
        let with_programs = all.iter().filter(|e| !e["executables"].as_array().unwrap().is_empty()).count();
        if with_programs == 3 || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(on_node[0]["variables"]["SLURM_JOB_ID"], "4242", "{on_node:#?}");
    assert!(on_node[0]["git"]["commit"].as_str().is_some_and(|c| c.len() == 40), "{on_node:#?}");
    assert!(on_node[1]["executables"].as_array().unwrap().iter().any(|e| e["path"]
        .as_str()
        .unwrap()
        .ends_with("/sort")
        && e["hash"].is_string()));
    node.sync();
    // One row per distinct environment.
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.environments"), "2");

    // Another host shows each record's environment and programs as the
    // node does (environment ids are each database's own).
    let masked = |mut e: Value| {
        e.as_object_mut().unwrap().remove("command_id");
        e.as_object_mut().unwrap().remove("environment_id");
        e
    };
    let cached = login.json(["query", "history", "--everywhere"]);
    assert_eq!(cached.len(), 3, "{cached:#?}");
    for (c, here) in cached.iter().rev().zip(&on_node) {
        let id = c["id"].as_i64().unwrap().to_string();
        let there = login.json(["query", "env", &id, "--everywhere"]).remove(0);
        assert_eq!(masked(there), masked(here.clone()));
    }
    let job: Vec<String> = login
        .json(["query", "history", "--everywhere", "--env", "SLURM_JOB_ID=4242"])
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(job.len(), 2, "{job:?}");
    assert!(job.iter().all(|t| t.contains("job-")), "{job:?}");

    // Bob reads none of them, even with his own SQL, nor adds to them.
    bob.run_in(&bob.case.work, "echo b > b.txt");
    bob.sync();
    let as_bob = |sql: &str| pg.psql("bob", "bob-pw", "prov", sql);
    assert_eq!(as_bob("SELECT count(*) FROM prov.environments").unwrap(), "1", "his own only");
    assert_eq!(
        as_bob("SELECT count(*) FROM prov.environments WHERE position('4242' in encode(vars, 'escape')) > 0").unwrap(),
        "0"
    );
    let alices = pg.admin("prov", "SELECT min(id) FROM prov.commands WHERE owner = 'alice'");
    let err = as_bob(&format!("SELECT prov.push_environment({alices}, 'x', 'PATH=/evil', NULL, NULL, NULL, NULL)"))
        .unwrap_err();
    assert!(err.contains("was not stored by this transaction"), "{err}");

    // Deleted, they are gone from the server.
    let out = node.prov(["delete", "--text", "job-a", "--yes"]);
    assert!(out.status.success(), "{}", describe(&out));
    node.sync();
    assert_eq!(pg.admin("prov", "SELECT count(*) FROM prov.environments WHERE owner = 'alice'"), "1");
}
