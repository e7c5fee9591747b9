//! The environment of each command, as a user checks it: the variables of
//! a Slurm-style job exported in a traced bash or zsh (or given to `prov
//! run`) are shown by `prov query env ID`, and `--env SLURM_JOB_ID=4242`
//! lists exactly the commands of that job; secrets in kept variables are
//! not in prov's files; a thousand-command shell is one stored
//! environment; the git commit and dirty state of the directory, and the
//! executable's hash of a program run, are shown.

use std::time::{Duration, Instant};

use prov_e2e::pty::*;
use prov_e2e::*;
use serde_json::Value;

const GITHUB: &str = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8";
const HF: &str = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890";

fn env_of(case: &Case, id: i64) -> Value {
    let mut found = case.query(["env", &id.to_string()]);
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

fn ids_with(case: &Case, var: &str) -> Vec<i64> {
    let mut ids: Vec<i64> =
        case.query(["history", "-n", "1000", "--env", var]).iter().map(|c| c["id"].as_i64().unwrap()).collect();
    ids.sort();
    ids
}

/// The records of the typed lines, oldest first, once `n` are stored
/// (a shell's last record may be on its way when the shell exits).
fn typed(case: &Case, n: usize) -> Vec<(i64, String)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut found: Vec<(i64, String)> = case
            .query(["history", "-n", "1000"])
            .iter()
            .map(|c| (c["id"].as_i64().unwrap(), c["text"].as_str().unwrap_or("").to_string()))
            .filter(|(_, t)| t != "exit" && !t.starts_with("echo \"P\""))
            .collect();
        found.reverse();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn slurm_job_in_a_typed_shell(shell: &'static str) {
    let case = Case::new(&format!("env-slurm-{shell}"));
    let mut sh = Shell::start(&case, shell);
    let lines = [
        "echo before > before.txt",
        "export SLURM_JOB_ID=4242 SLURM_JOB_NAME=align OMP_NUM_THREADS=3 UNRELATED=1",
        "echo step1 > one.txt",
        "cat one.txt > two.txt",
        "unset SLURM_JOB_ID",
        "echo after > after.txt",
    ];
    for line in lines {
        sh.run(line);
    }
    sh.exit();
    let records = typed(&case, 6);
    let texts: Vec<&str> = records.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, lines);
    // The environment a command starts with: the export's own line ran
    // before it took effect, the unset's line after. Ids follow the order
    // the records were stored in, which concurrent writers may swap.
    let mut job: Vec<i64> = [2, 3, 4].iter().map(|&i| records[i].0).collect();
    job.sort();
    assert_eq!(ids_with(&case, "SLURM_JOB_ID=4242"), job, "{}", case.collector_state());
    assert!(ids_with(&case, "SLURM_JOB_ID=424").is_empty(), "a value matches whole");
    let env = env_of(&case, records[2].0);
    let vars = &env["variables"];
    assert_eq!(vars["SLURM_JOB_ID"], "4242", "{env}");
    assert_eq!(vars["SLURM_JOB_NAME"], "align");
    assert_eq!(vars["OMP_NUM_THREADS"], "3");
    assert_eq!(vars["PATH"], "/usr/local/bin:/usr/bin:/bin");
    // Only the documented set: not any variable of the shell.
    assert!(vars.get("UNRELATED").is_none() && vars.get("HOME").is_none(), "{env}");
    assert!(env_of(&case, records[5].0)["variables"].get("SLURM_JOB_ID").is_none());
    // The job's commands share one stored environment.
    let ids: Vec<Value> = job[..2].iter().map(|&id| env_of(&case, id)["environment_id"].clone()).collect();
    assert!(ids[0].is_i64() && ids[0] == ids[1], "{ids:?}");
    // As a person reads it.
    let out = case.prov(["query", "env", &records[2].0.to_string()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\n  SLURM_JOB_ID=4242\n"), "{}", describe(&out));
}

#[test]
fn slurm_job_in_bash() {
    slurm_job_in_a_typed_shell("bash");
}

#[test]
fn slurm_job_in_zsh() {
    slurm_job_in_a_typed_shell("zsh");
}

#[test]
fn slurm_job_with_prov_run() {
    let case = Case::new("env-slurm-run");
    let run = |job: Option<&str>, script: &str| {
        let mut cmd = case.command(case.inst.prov());
        if let Some(job) = job {
            cmd.env("SLURM_JOB_ID", job).env("SLURM_NTASKS", "2");
        }
        let out = cmd.args(["run", "--", "sh", "-c", script]).output().unwrap();
        assert_traced(&out);
        assert!(out.status.success(), "{}", describe(&out));
        case.last_command_ended()["id"].as_i64().unwrap()
    };
    let a = run(Some("4242"), "echo a > a.txt");
    let b = run(Some("4242"), "cat a.txt > b.txt");
    run(Some("999"), "echo c > c.txt");
    run(None, "echo d > d.txt");
    assert_eq!(ids_with(&case, "SLURM_JOB_ID=4242"), [a, b]);
    assert_eq!(case.query(["history", "--env", "SLURM_JOB_ID=4242", "--env", "SLURM_NTASKS=2"]).len(), 2);
    let env = env_of(&case, a);
    assert_eq!((&env["variables"]["SLURM_JOB_ID"], &env["variables"]["SLURM_NTASKS"]), (&"4242".into(), &"2".into()));
    assert_eq!(env["environment_id"], env_of(&case, b)["environment_id"]);
    // A bad filter is one line naming it.
    let out = case.prov(["query", "history", "--env", "SLURM_JOB_ID"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KEY=VALUE"), "{}", describe(&out));
}

/// Variables the user keeps hold secrets sometimes: stored redacted, as in
/// command texts, by bash and by `prov run`.
#[test]
fn secrets_in_kept_variables_are_redacted() {
    let case = Case::new("env-secrets");
    case.write_config("[env]\nkeep = [\"HF_TOKEN\", \"PIPELINE_*\"]\n");
    let mut sh = Shell::start(&case, "bash");
    sh.run(&format!("export HF_TOKEN={HF} PIPELINE_NOTE='push with {GITHUB}' PIPELINE_STEP=align"));
    sh.run("echo x > x.txt");
    sh.exit();
    let records = typed(&case, 2);
    let env = env_of(&case, records[1].0);
    let vars = &env["variables"];
    assert_eq!(vars["HF_TOKEN"], "[REDACTED]", "{env}");
    assert_eq!(vars["PIPELINE_NOTE"], "push with [REDACTED]");
    assert_eq!(vars["PIPELINE_STEP"], "align", "an ordinary value is kept");
    let out = case
        .command(case.inst.prov())
        .env("HF_TOKEN", HF)
        .env("PIPELINE_NOTE", GITHUB)
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let env = env_of(&case, case.last_command_ended()["id"].as_i64().unwrap());
    assert_eq!(
        (&env["variables"]["HF_TOKEN"], &env["variables"]["PIPELINE_NOTE"]),
        (&"[REDACTED]".into(), &"[REDACTED]".into())
    );
    let stored = case.stored_bytes();
    for secret in [HF, GITHUB] {
        assert!(!contains_bytes(&stored, secret), "{secret} is in prov's files");
    }
}

/// Many commands in one environment: one stored environment.
#[test]
fn environments_are_stored_once() {
    let case = Case::new("env-dedup");
    let mut sh = Shell::start(&case, "bash");
    sh.run("export SLURM_JOB_ID=77");
    for i in 0..30 {
        sh.run(&format!("echo {i} > f{i}.txt"));
    }
    sh.run("export OMP_NUM_THREADS=4");
    sh.run("echo last > last.txt");
    sh.exit();
    let records = typed(&case, 33);
    // Every typed line after the export (the shell's own `exit` too).
    let mut job: Vec<i64> = records[1..].iter().map(|(id, _)| *id).collect();
    job.sort();
    let found: Vec<i64> = ids_with(&case, "SLURM_JOB_ID=77").into_iter().filter(|id| job.contains(id)).collect();
    assert_eq!(found, job);
    let mut env_ids: Vec<i64> =
        records.iter().map(|(id, _)| env_of(&case, *id)["environment_id"].as_i64().unwrap()).collect();
    env_ids.sort();
    env_ids.dedup();
    // Before the export, during the job, and with OMP_NUM_THREADS too.
    assert_eq!(env_ids.len(), 3, "{env_ids:?}");
}

fn git(case: &Case, args: &[&str]) {
    let out = case
        .command("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", describe(&out));
}

/// The commit and dirty state of the directory's repository, and which
/// version of a program ran: its executable's size and partial hash.
#[test]
fn git_state_and_executables_are_shown() {
    let case = Case::new("env-git");
    git(&case, &["init", "-q"]);
    case.write("data.csv", b"a,b\n1,2\n");
    let tool = std::fs::read("/bin/true").unwrap();
    let tool_path = case.write("mytool", &tool);
    std::fs::set_permissions(&tool_path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&case, &["add", "."]);
    git(&case, &["commit", "-q", "-m", "data"]);
    let head = case.command("git").args(["rev-parse", "HEAD"]).output().unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    case.run_sh("./mytool && cat data.csv > copy.csv");
    let clean = env_of(&case, case.last_command_ended()["id"].as_i64().unwrap());
    let g = &clean["git"];
    assert_eq!(
        (g["commit"].as_str(), g["branch"].as_str(), &g["dirty"]),
        (Some(head.as_str()), Some("main"), &false.into()),
        "{clean}"
    );
    assert_eq!(g["root"], case.work.canonicalize().unwrap().to_str().unwrap());
    let exe = clean["executables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"].as_str().is_some_and(|p| p.ends_with("/mytool")))
        .unwrap_or_else(|| panic!("mytool among {clean}"))
        .clone();
    assert_eq!(exe["size"], tool.len() as u64);
    assert_eq!(exe["hash"], expected_hash(&tool, 256, 3));
    // A tracked file edited: dirty.
    case.write("data.csv", b"a,b\n1,3\n");
    case.run_sh("cat data.csv > copy.csv");
    let dirty = env_of(&case, case.last_command_ended()["id"].as_i64().unwrap());
    assert_eq!((&dirty["git"]["commit"], &dirty["git"]["dirty"]), (&head.clone().into(), &true.into()), "{dirty}");
    // Outside any repository: no git state.
    let out = case.command(case.inst.prov()).current_dir("/").args(["run", "--", "true"]).output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(env_of(&case, case.last_command_ended()["id"].as_i64().unwrap())["git"].is_null());
}
