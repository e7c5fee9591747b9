//! Ignoring what does not matter, as a user configures it: `exclude_also`
//! adds to the default excludes, glob patterns, a project's `.provignore`;
//! `prov config` says where each value comes from, `prov doctor` notices an
//! `exclude` that replaced the defaults, and a typo in `[read]` leaves
//! queries working with one warning.

use prov_e2e::*;

/// The paths a command read, relative to the work directory when below it.
fn reads(case: &Case, command: &serde_json::Value) -> Vec<String> {
    let work = format!("{}/", case.work.display());
    let mut r: Vec<String> = files(command)
        .into_iter()
        .filter(|(access, _)| access == "read")
        .map(|(_, p)| String::from_utf8_lossy(&p).into_owned())
        .map(|p| p.strip_prefix(&work).map_or(p.clone(), str::to_string))
        .collect();
    r.sort();
    r
}

/// A project with a .git directory, an editor swap file and data.
fn project(case: &Case) {
    for (name, content) in [
        ("proj/.git/HEAD", "ref: refs/heads/main\n"),
        ("proj/.git/config", "[core]\n"),
        ("proj/.notes.txt.swp", "swap"),
        ("proj/data.csv", "a,1\n"),
        ("proj/scratch/tmp.csv", "x\n"),
        ("proj/run.log", "log\n"),
    ] {
        let path = case.work.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    case.chown_tree(&case.work);
}

const READ_ALL: &str = "cat proj/.git/HEAD proj/.git/config proj/.notes.txt.swp proj/data.csv proj/scratch/tmp.csv proj/run.log /etc/passwd > out.txt";

#[test]
fn exclude_also_and_globs_add_to_the_defaults() {
    let case = Case::new("ignore-also");
    project(&case);
    case.write_config("[read]\nexclude_also = [\"**/.git/**\", \"*.swp\"]\n");
    case.run_sh(READ_ALL);
    let cmd = case.writer_of("out.txt");
    // /etc/passwd stays excluded by the defaults.
    assert_eq!(reads(&case, &cmd), ["proj/data.csv", "proj/run.log", "proj/scratch/tmp.csv"]);
}

#[test]
fn provignore_leaves_out_the_files_below_it() {
    let case = Case::new("ignore-provignore");
    project(&case);
    std::fs::write(case.work.join("proj/.provignore"), "# not worth recording\n.git/\nscratch/\n*.log\n*.swp\n")
        .unwrap();
    case.chown_tree(&case.work);
    case.run_sh(READ_ALL);
    case.run_sh("echo x > proj/scratch/new.csv; echo y > proj/made.csv");
    let cmd = case.writer_of("out.txt");
    assert_eq!(reads(&case, &cmd), ["proj/data.csv"]);
    // Writes too: the scratch file is left out, the other kept.
    assert!(same_file(case.query(["wrote", "proj/scratch/new.csv"])).is_empty());
    assert_eq!(same_file(case.query(["wrote", "proj/made.csv"])).len(), 1);
    // Files outside the project are not its business.
    case.write("elsewhere.log", b"l\n");
    case.run_sh("cat elsewhere.log > out2.txt");
    assert_eq!(reads(&case, &case.writer_of("out2.txt")), ["elsewhere.log"]);
}

#[test]
fn a_provignore_of_another_user_is_not_honoured() {
    let case = Case::new("ignore-foreign");
    let shared = case.work.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("data.csv"), "a\n").unwrap();
    case.chown_tree(&case.work);
    // Root may leave rules for everyone (as /etc would); another user may not.
    std::fs::write(shared.join(".provignore"), "*.csv\n").unwrap();
    let st = std::process::Command::new("chown").arg("nobody").arg(shared.join(".provignore")).status().unwrap();
    assert!(st.success());
    case.run_sh("cat shared/data.csv > out.txt");
    assert_eq!(reads(&case, &case.writer_of("out.txt")), ["shared/data.csv"]);
}

#[test]
fn prov_config_says_where_each_value_comes_from() {
    let case = Case::new("ignore-config");
    let out = case.prov(["config"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(text.contains("absent, so every value is the default"), "{text}");
    assert!(text.contains("limit = 20  # default"), "{text}");
    case.write_config("[query]\nlimit = 7\n\n[read]\nexclude_also = [\"*.swp\"]\n");
    let text = String::from_utf8_lossy(&case.prov(["config"]).stdout).into_owned();
    assert!(text.contains("limit = 7  # config.toml:2"), "{text}");
    assert!(text.contains("exclude_also = [\"*.swp\"]  # config.toml:5"), "{text}");
    assert!(text.contains("exclude = [\"/usr\", \"/lib\""), "the defaults are shown: {text}");
}

#[test]
fn doctor_notices_an_exclude_that_replaced_the_defaults() {
    let case = Case::new("ignore-doctor");
    let out = case.prov(["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("configuration: defaults, no file"), "{text}");
    assert!(!text.contains("exclude replaces"), "{text}");
    case.write_config("[read]\nexclude = [\"~/proj/.git\"]\n");
    let text = String::from_utf8_lossy(&case.prov(["doctor"]).stdout).into_owned();
    let line = text.lines().position(|l| l.contains("[read] exclude replaces the default list")).expect(&text);
    assert!(text.lines().nth(line).unwrap().starts_with("WARN"), "{text}");
    assert!(text.lines().nth(line + 1).unwrap().contains("exclude_also"), "a remedy: {text}");
}

#[test]
fn a_typo_in_read_leaves_queries_working_with_one_warning() {
    let case = Case::new("ignore-typo");
    case.run_sh("echo a > a.txt");
    case.write_config("[read]\nexclud = [\"~/proj/.git\"]\n");
    let out = case.prov(["query", "history"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("echo a > a.txt"), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one warning: {err}");
    assert!(err.contains("config.toml:2") && err.contains("exclud"), "{err}");
    // Tracing does not start on a configuration it cannot read, and says why.
    let run = case.run(["sh", "-c", "echo b > b.txt"]);
    assert!(String::from_utf8_lossy(&run.stderr).contains("config.toml:2"), "{}", describe(&run));
}
