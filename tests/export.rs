//! Lineage and exports of a pipeline recorded by the real tracer, checked
//! with the tools a user would check them with: Graphviz, the `prov` Python
//! package, roc-validator, GNU make, Snakemake and shournal-to-snakemake
//! (from the venv .ci/run installs; everything runs offline).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use prov_e2e::*;
use serde_json::Value;

/// The venv of Python tools (tests/python-requirements.txt).
const VENV: &str = "/opt/prov-test-venv/bin";

const RAW: &str = "printf 'pear\\napple\\nfig\\n' > raw.txt";
const SORT: &str = "sh sort.sh raw.txt > sorted.txt";
const UNRELATED: &str = "echo unrelated > other.txt";
const COMBINE: &str = "cat sorted.txt params.txt > result.txt";

/// Three steps and an unrelated command in between, each recorded by
/// `prov run -- sh -c STEP` (so its text is `sh -c 'STEP'`).
fn pipeline(name: &str) -> Case {
    let case = Case::new(name);
    case.write("sort.sh", b"sort \"$1\"\n");
    case.write("params.txt", b"scale=3\n");
    for step in [RAW, SORT, UNRELATED, COMBINE] {
        case.run_sh(step);
    }
    case
}

fn text_of(step: &str) -> String {
    format!("sh -c '{}'", step.replace('\'', "'\\''"))
}

fn ok(out: Output, what: &str) -> Vec<u8> {
    assert!(out.status.success(), "{what}: {}", describe(&out));
    out.stdout
}

/// `prov query lineage ARGS…` as the user; its standard output.
fn lineage(case: &Case, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["query", "lineage"];
    all.extend_from_slice(args);
    ok(case.prov(&all), &format!("prov {all:?}"))
}

fn lineage_json(case: &Case, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    serde_json::from_slice(&lineage(case, &all)).unwrap()
}

fn texts(doc: &Value) -> Vec<String> {
    doc["commands"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap().to_string()).collect()
}

/// (access, file name) of a command object's files.
fn file_names(command: &Value) -> BTreeSet<(String, String)> {
    command["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            (f["access"].as_str().unwrap().to_string(), path.rsplit('/').next().unwrap().to_string())
        })
        .collect()
}

fn set(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn lineage_walks_back_and_forth_through_a_pipeline() {
    let case = pipeline("lineage");
    let result = case.work.join("result.txt");

    let doc = lineage_json(&case, &["result.txt"]);
    assert_eq!(doc["direction"], "upstream");
    assert_eq!(doc["target"].as_str().unwrap(), result.to_str().unwrap());
    assert_eq!(
        texts(&doc),
        vec![text_of(RAW), text_of(SORT), text_of(COMBINE)],
        "exactly the three steps, oldest first"
    );
    let commands = doc["commands"].as_array().unwrap();
    assert_eq!(file_names(&commands[0]), set(&[("write", "raw.txt")]));
    assert_eq!(file_names(&commands[1]), set(&[("read", "sort.sh"), ("read", "raw.txt"), ("write", "sorted.txt")]));
    assert_eq!(
        file_names(&commands[2]),
        set(&[("read", "sorted.txt"), ("read", "params.txt"), ("write", "result.txt")])
    );
    let depths: Vec<u64> = commands.iter().map(|c| c["depth"].as_u64().unwrap()).collect();
    assert_eq!(depths, vec![3, 2, 1]);
    // Two links, both by path: raw.txt from step 1 to 2, sorted.txt from 2 to 3.
    let id = |i: usize| commands[i]["id"].clone();
    let flows: BTreeSet<(String, String, String)> = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["match"], "path");
            let name = f["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
            (f["writer"].to_string(), f["reader"].to_string(), name)
        })
        .collect();
    assert_eq!(
        flows,
        BTreeSet::from([
            (id(0).to_string(), id(1).to_string(), "raw.txt".to_string()),
            (id(1).to_string(), id(2).to_string(), "sorted.txt".to_string()),
        ])
    );

    // The tree says the same for people.
    let tree = String::from_utf8(lineage(&case, &["result.txt"])).unwrap();
    for step in [RAW, SORT, COMBINE] {
        assert!(tree.contains(&text_of(step)), "{step} missing from:\n{tree}");
    }
    assert!(!tree.contains("unrelated"), "{tree}");
    assert!(tree.lines().any(|l| l.contains("params.txt") && l.contains("(no recorded writer)")), "{tree}");
    assert!(tree.lines().any(|l| l.contains("sort.sh") && l.contains("(no recorded writer)")), "{tree}");

    // A renamed result is still found: moved since.
    std::fs::rename(&result, case.work.join("renamed.txt")).unwrap();
    assert_eq!(texts(&lineage_json(&case, &["renamed.txt"])).len(), 3);
    std::fs::rename(case.work.join("renamed.txt"), &result).unwrap();

    // The depth limit keeps only the last step and says the walk was cut.
    let shallow = lineage_json(&case, &["result.txt", "--depth", "1"]);
    assert_eq!(texts(&shallow), vec![text_of(COMBINE)]);
    assert_eq!(shallow["truncated"], true);
    assert_eq!(doc["truncated"], false);

    // Downstream from raw.txt reaches result.txt.
    let down = lineage_json(&case, &["raw.txt", "--downstream"]);
    assert_eq!(down["direction"], "downstream");
    assert_eq!(texts(&down), vec![text_of(SORT), text_of(COMBINE)]);
    let written: Vec<String> = down["commands"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| file_names(c).into_iter().filter(|(a, _)| a == "write").map(|(_, n)| n))
        .collect();
    assert_eq!(written, vec!["sorted.txt", "result.txt"]);
    let down_tree = String::from_utf8(lineage(&case, &["raw.txt", "--downstream"])).unwrap();
    assert!(down_tree.contains("wrote ") && down_tree.contains("result.txt"), "{down_tree}");

    // A file nobody wrote is a clear error, not an empty answer.
    let out = case.prov(["query", "lineage", "params.txt"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no recorded command wrote"), "{}", describe(&out));
}

#[test]
fn dot_output_is_valid_graphviz() {
    let case = pipeline("dot");
    let dot = lineage(&case, &["result.txt", "--format", "dot"]);
    let path = case.work.join("lineage.dot");
    std::fs::write(&path, &dot).unwrap();
    let out = Command::new("dot").arg("-Tsvg").arg(&path).output().expect("graphviz's dot (installed by .ci/run)");
    let svg = String::from_utf8(ok(out, "dot -Tsvg")).unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    // Three command boxes; result.txt, sorted.txt, raw.txt, sort.sh and params.txt as file nodes.
    let dot = String::from_utf8(dot).unwrap();
    assert_eq!(dot.matches("shape=box").count(), 3, "{dot}");
    assert_eq!(dot.matches("shape=ellipse").count(), 5, "{dot}");
    for name in ["result.txt", "sorted.txt", "raw.txt", "sort.sh", "params.txt"] {
        assert!(svg.contains(name), "{name} not drawn");
    }
}

/// Python code run with the venv's interpreter; its standard output.
fn python(script: &str, args: &[&Path]) -> String {
    let out = Command::new(format!("{VENV}/python")).arg("-c").arg(script).args(args).output().expect("the test venv");
    String::from_utf8(ok(out, "python")).unwrap()
}

const CHECK_PROV: &str = r#"
import sys
from prov.model import ProvDocument, ProvActivity, ProvEntity, ProvAgent, ProvUsage, ProvGeneration, ProvAssociation
doc = ProvDocument.deserialize(source=sys.argv[1], format="json")
count = lambda cls: len([r for r in doc.get_records() if isinstance(r, cls)])
provn = doc.get_provn()
assert provn.startswith("document"), provn
print(count(ProvActivity), count(ProvEntity), count(ProvAgent), count(ProvUsage), count(ProvGeneration), count(ProvAssociation))
labels = sorted(str(a.label) for a in doc.get_records(ProvActivity))
print("\n".join(labels))
"#;

#[test]
fn prov_json_is_read_by_the_prov_package() {
    let case = pipeline("provjson");
    let path = case.work.join("lineage.provjson");
    lineage(&case, &["result.txt", "--format", "prov-json", "--output", path.to_str().unwrap()]);
    let report = python(CHECK_PROV, &[&path]);
    let mut lines = report.lines();
    // 3 commands; 5 file versions (raw, sort.sh, sorted, params, result)
    // and 3 executables (sh, sort, cat); one user; reads: sort.sh, raw,
    // sorted, params, and each command's programs (sh; sh, sort; sh, cat);
    // writes: raw, sorted, result.
    assert_eq!(lines.next(), Some("3 8 1 9 3 3"), "{report}");
    let mut want = vec![text_of(RAW), text_of(SORT), text_of(COMBINE)];
    want.sort();
    assert_eq!(lines.map(str::to_string).collect::<Vec<_>>(), want);

    // An existing file is not overwritten.
    let out =
        case.prov(["query", "lineage", "result.txt", "--format", "prov-json", "--output", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never overwritten"), "{}", describe(&out));
}

/// roc-validator resolves the crate's JSON-LD context over HTTP through its
/// cache; the tests are offline, so the cache is filled with the RO-Crate
/// context that ro-crate-py ships and the validator runs with --offline.
const SEED_CONTEXT: &str = r#"
import io, json, os, sys
import requests, requests_cache, rocrate, urllib3
context = json.load(open(os.path.join(os.path.dirname(rocrate.__file__), "data", "ro-crate.jsonld")))["@context"]
body = json.dumps({"@context": context}).encode()
url = "https://w3id.org/ro/crate/1.1/context"
r = requests.Response()
r.status_code, r.reason, r._content, r.url, r.encoding = 200, "OK", body, url, "utf-8"
r.headers["Content-Type"] = "application/ld+json"
r.request = requests.Request("GET", url).prepare()
r.raw = urllib3.HTTPResponse(body=io.BytesIO(body), status=200, headers=dict(r.headers), preload_content=False, request_url=url)
requests_cache.CachedSession(cache_name=sys.argv[1], backend="sqlite", expire_after=-1).cache.save_response(r)
"#;

/// The crate in `dir` checked by roc-validator (its HTTP cache seeded under
/// `cache`): it must pass; returns its metadata.
fn validated_crate(case: &Case, dir: &Path, cache: &str) -> Value {
    let cache = case.inst.root.join(cache);
    python(SEED_CONTEXT, &[&cache]);
    let out = validate_crate(dir, &cache);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    let report: Value =
        serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(report["passed"], true, "{report:#}");
    serde_json::from_slice(&std::fs::read(dir.join("ro-crate-metadata.json")).unwrap()).unwrap()
}

fn validate_crate(crate_dir: &Path, cache: &Path) -> Output {
    Command::new(format!("{VENV}/rocrate-validator"))
        .args(["-y", "--disable-color", "validate", "--offline", "--cache-path"])
        .arg(cache)
        .args(["-p", "process-run-crate", "--no-paging", "-f", "json"])
        .arg(crate_dir)
        .output()
        .expect("rocrate-validator in the test venv")
}

#[test]
fn ro_crate_passes_the_process_run_crate_profile() {
    let case = pipeline("rocrate");
    let dir = case.work.join("crate");
    lineage(&case, &["result.txt", "--format", "ro-crate", "--output", dir.to_str().unwrap()]);
    let meta = validated_crate(&case, &dir, "rocrate-http-cache");
    let graph = meta["@graph"].as_array().unwrap();
    let actions: Vec<&Value> = graph.iter().filter(|e| e["@type"] == "CreateAction").collect();
    assert_eq!(actions.len(), 3);
    let combine = actions.iter().find(|a| a["name"] == text_of(COMBINE)).unwrap();
    assert_eq!(combine["actionStatus"], "http://schema.org/CompletedActionStatus");
    let result_uri = format!("file://{}", case.work.join("result.txt").display());
    assert_eq!(combine["result"]["@id"], result_uri.as_str());
    assert_eq!(combine["object"].as_array().unwrap().len(), 2);
    let result_entity = graph.iter().find(|e| e["@id"] == result_uri.as_str()).unwrap();
    let content = std::fs::read(case.work.join("result.txt")).unwrap();
    assert_eq!(result_entity["xxh3PartialHash"], expected_hash(&content, 256, 3));

    // The validator does reject a crate that breaks the profile.
    let broken = case.work.join("broken");
    std::fs::create_dir(&broken).unwrap();
    let without_instrument = serde_json::to_string(&meta).unwrap().replace("\"instrument\"", "\"instrumentGone\"");
    std::fs::write(broken.join("ro-crate-metadata.json"), without_instrument).unwrap();
    let out = validate_crate(&broken, &case.inst.root.join("rocrate-http-cache"));
    let text = String::from_utf8_lossy(&out.stdout);
    let report: Value =
        serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(report["passed"], false, "{report:#}");

    // An existing crate is not overwritten.
    let out = case.prov(["query", "lineage", "result.txt", "--format", "ro-crate", "--output", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

/// The recorded hash of every file the lineage's commands wrote, by name.
fn recorded_outputs(case: &Case) -> BTreeMap<String, String> {
    let doc = lineage_json(case, &["result.txt"]);
    let mut hashes = BTreeMap::new();
    for c in doc["commands"].as_array().unwrap() {
        for f in c["files"].as_array().unwrap().iter().filter(|f| f["access"] == "write") {
            let name = f["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
            hashes.insert(name, f["hash"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(hashes.keys().collect::<Vec<_>>(), ["raw.txt", "result.txt", "sorted.txt"]);
    hashes
}

/// Deletes the pipeline's outputs, runs `rebuild` as the user, and compares
/// the regenerated files' hashes with the recorded ones.
fn round_trip(case: &Case, rebuild: Command) {
    let recorded = recorded_outputs(case);
    for name in recorded.keys() {
        std::fs::remove_file(case.work.join(name)).unwrap();
    }
    let mut rebuild = rebuild;
    ok(rebuild.output().unwrap(), "the rebuild");
    for (name, hash) in &recorded {
        let content = std::fs::read(case.work.join(name)).unwrap_or_else(|e| panic!("{name} was not rebuilt: {e}"));
        assert_eq!(&expected_hash(&content, 256, 3), hash, "{name} differs from the recorded version");
    }
}

/// Exports the lineage of `target` as `format` to the work dir's `name`.
fn export_to(case: &Case, target: &str, format: &str, name: &str) -> PathBuf {
    let path = case.work.join(name);
    lineage(case, &[target, "--format", format, "--output", path.to_str().unwrap()]);
    path
}

#[test]
fn makefile_rebuilds_the_recorded_outputs() {
    let case = pipeline("makefile");
    let mk = export_to(&case, "result.txt", "makefile", "exported.mk");
    std::fs::remove_file(case.work.join("other.txt")).unwrap();
    let mut make = case.command("make");
    make.arg("-f").arg(&mk);
    round_trip(&case, make);
    assert!(!case.work.join("other.txt").exists(), "the unrelated command is not part of the rebuild");
    // Up to date now: a second run does nothing.
    let again = ok(case.command("make").arg("-f").arg(&mk).output().unwrap(), "make again");
    assert!(String::from_utf8_lossy(&again).contains("Nothing to be done"), "{}", String::from_utf8_lossy(&again));
}

#[test]
fn snakemake_rebuilds_the_recorded_outputs() {
    let case = pipeline("snakemake");
    let smk = export_to(&case, "result.txt", "snakemake", "exported.smk");
    let mut snakemake = case.command(format!("{VENV}/snakemake"));
    snakemake.arg("-s").arg(&smk).args(["--cores", "1"]).env("XDG_CACHE_HOME", case.home.join(".cache"));
    round_trip(&case, snakemake);
}

/// shournal-to-snakemake's rules: (input names, output names, raw command).
fn converter_rules(text: &str) -> Vec<(BTreeSet<String>, BTreeSet<String>, String)> {
    let mut rules = Vec::new();
    for block in text.split("rule ").skip(1) {
        let (mut inputs, mut outputs, mut raw) = (BTreeSet::new(), BTreeSet::new(), String::new());
        let mut section = "";
        for line in block.lines().skip(1) {
            let line = line.trim();
            match line {
                "input:" | "output:" | "shell:" => section = line,
                _ if line.starts_with("# raw: ") => raw = line["# raw: ".len()..].to_string(),
                _ if line.ends_with(',') => {
                    let quoted = line.trim_end_matches(',');
                    let path = &quoted[quoted.find('"').unwrap() + 1..quoted.len() - 1];
                    let set = if section == "input:" { &mut inputs } else { &mut outputs };
                    set.insert(path.to_string());
                }
                _ => {}
            }
        }
        rules.push((inputs, outputs, raw));
    }
    rules
}

#[test]
fn shournal_json_feeds_shournal_to_snakemake() {
    let case = pipeline("shournal");
    let lines = lineage(&case, &["result.txt", "--format", "shournal-json"]);
    let text = String::from_utf8(lines.clone()).unwrap();
    let kinds: Vec<&str> = text.lines().map(|l| &l[..l.find(':').unwrap()]).collect();
    assert_eq!(kinds, ["HEADER", "COMMAND", "COMMAND", "COMMAND", "FOOTER"]);
    let first: Value = serde_json::from_str(&text.lines().nth(1).unwrap()["COMMAND:".len()..]).unwrap();
    assert_eq!(first["command"], text_of(RAW));
    assert_eq!(first["workingDir"].as_str().unwrap(), case.work.to_str().unwrap());
    let content = std::fs::read(case.work.join("raw.txt")).unwrap();
    let hash = u64::from_str_radix(&expected_hash(&content, 256, 3), 16).unwrap();
    assert_eq!(first["fileWriteEvents"][0]["hash"], hash.to_string(), "a quoted decimal, as the predecessor wrote it");

    let input = case.work.join("lineage.shournal");
    std::fs::write(&input, &lines).unwrap();
    let out =
        Command::new(format!("{VENV}/shournal-to-snakemake")).arg(&input).output().expect("shournal-to-snakemake");
    let rules = converter_rules(&String::from_utf8(ok(out, "shournal-to-snakemake")).unwrap());
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        rules,
        vec![
            (names(&[]), names(&["raw.txt"]), text_of(RAW)),
            (names(&["sort.sh", "raw.txt"]), names(&["sorted.txt"]), text_of(SORT)),
            (names(&["sorted.txt", "params.txt"]), names(&["result.txt"]), text_of(COMBINE)),
        ]
    );
}

#[test]
fn odd_names_survive_lineage_and_rebuilds() {
    use std::os::unix::ffi::OsStrExt;
    let case = Case::new("oddnames");
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9 {x} $y.txt");
    let step = "printf 'odd\\n' > \"$1\" && cat \"$1\" \"$1\" > 'out put.txt'";
    let out = case.run([std::ffi::OsStr::new("sh"), "-c".as_ref(), step.as_ref(), "sh".as_ref(), odd]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    case.run_sh("sort 'out put.txt' > final.txt");

    let doc = lineage_json(&case, &["final.txt"]);
    assert_eq!(doc["commands"].as_array().unwrap().len(), 2, "{doc:#}");
    let first = &doc["commands"][0];
    let odd_path = [case.work.as_os_str().as_bytes(), b"/", odd.as_bytes()].concat();
    assert!(first["files"].as_array().unwrap().iter().any(|f| path_bytes(f) == odd_path), "{first:#}");

    let mk = export_to(&case, "final.txt", "makefile", "odd.mk");
    let smk = export_to(&case, "final.txt", "snakemake", "odd.smk");
    let recorded: BTreeMap<Vec<u8>, String> = doc["commands"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["files"].as_array().unwrap().clone())
        .filter(|f| f["access"] == "write")
        .map(|f| (path_bytes(&f), f["hash"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    for rebuild in [
        vec!["make".to_string(), "-f".into(), mk.to_str().unwrap().into()],
        vec![format!("{VENV}/snakemake"), "-s".into(), smk.to_str().unwrap().into(), "--cores".into(), "1".into()],
    ] {
        for path in recorded.keys() {
            std::fs::remove_file(std::ffi::OsStr::from_bytes(path)).unwrap();
        }
        let out = case
            .command(&rebuild[0])
            .args(&rebuild[1..])
            .env("XDG_CACHE_HOME", case.home.join(".cache"))
            .output()
            .unwrap();
        ok(out, &rebuild[0]);
        for (path, hash) in &recorded {
            let content = std::fs::read(std::ffi::OsStr::from_bytes(path)).unwrap();
            assert_eq!(
                &expected_hash(&content, 256, 3),
                hash,
                "{} after {}",
                String::from_utf8_lossy(path),
                rebuild[0]
            );
        }
    }
}

/// A `make` of two steps, recorded as one command with its processes.
fn make_pipeline(name: &str) -> Case {
    let case = Case::new(name);
    let rows: String = (0..100_000).map(|i| format!("{}\n", (i * 7919) % 100_000)).collect();
    case.write("data.txt", rows.as_bytes());
    case.write(
        "Makefile",
        b"report.txt: sorted.txt\n\tpython3 -c 'import sys; open(sys.argv[2], \"w\").write(str(len(open(sys.argv[1]).readlines())))' sorted.txt report.txt\n\
          sorted.txt: data.txt\n\tsort -n -o sorted.txt data.txt\n",
    );
    let out = case.run(["make", "report.txt"]);
    assert!(out.status.success(), "{}", describe(&out));
    case
}

#[test]
fn process_steps_are_activities_in_prov_json_and_actions_in_a_valid_ro_crate() {
    let case = make_pipeline("process-steps");
    let path = case.work.join("steps.provjson");
    lineage(
        &case,
        &["report.txt", "--steps", "processes", "--format", "prov-json", "--output", path.to_str().unwrap()],
    );
    let report = python(CHECK_PROV, &[&path]);
    let labels: Vec<&str> = report.lines().skip(1).collect();
    assert_eq!(labels.len(), 2, "one activity per process step, not `make report.txt`: {report}");
    assert!(labels.iter().any(|l| l.contains("sort") && l.contains("data.txt")), "{report}");
    assert!(labels.iter().any(|l| l.contains("python3") && l.contains("report.txt")), "{report}");

    let dir = case.work.join("crate");
    lineage(&case, &["report.txt", "--steps", "processes", "--format", "ro-crate", "--output", dir.to_str().unwrap()]);
    let meta = validated_crate(&case, &dir, "rocrate-http-cache-steps");
    let actions = meta["@graph"].as_array().unwrap().iter().filter(|e| e["@type"] == "CreateAction").count();
    assert_eq!(actions, 2, "{meta:#}");

    // DOT draws the steps: a box per process, valid for graphviz.
    let dot = String::from_utf8(lineage(&case, &["report.txt", "--steps", "processes", "--format", "dot"])).unwrap();
    let boxes: Vec<&str> = dot.lines().filter(|l| l.contains("shape=box")).collect();
    assert_eq!(boxes.len(), 2, "one box per process step, not `make report.txt`: {dot}");
    assert!(boxes.iter().any(|l| l.contains("process ") && l.contains("sort") && l.contains("data.txt")), "{dot}");
    assert!(boxes.iter().any(|l| l.contains("python3") && l.contains("report.txt")), "{dot}");
    assert!(dot.contains("peripheries=2"), "the target is marked: {dot}");
    let path = case.work.join("steps.dot");
    std::fs::write(&path, &dot).unwrap();
    ok(Command::new("dot").arg("-Tsvg").arg(&path).output().unwrap(), "dot -Tsvg");
}

/// Hostile file names a user could plant in a shared directory, and
/// whether each format can carry them (else the export is refused):
/// (name, Makefile, Snakefile).
const HOSTILE_NAMES: &[(&[u8], bool, bool)] = &[
    // Python ends a comment at \r: the rest would be code in the Snakefile.
    (b"data\r__import__(\"os\").system(\"touch PWNED\")#", false, true),
    // make splits a prerequisite list at `;`, escaped or not, and runs the rest.
    (b"c;touch$${IFS}PWNED;#", false, false),
    (b"c;touch$IFS'PWNED';#", false, true),
    (b"x\n.PHONY: all\nall: pwn\npwn:\n\ttouch PWNED\n", false, true),
    (b"a=b", false, true),
    (b"a+=b", false, true),
    (b"a?=b", false, true),
    (b"lib(m)", false, true),
    (b"p%q", false, true),
    (b"t\\", false, true),
    (b"p|q", false, true),
    (b"$(touch PWNED)", false, true),
    (b"\x01ctl\x1b[2J", false, true),
    (b"amp&", false, true),
    // Snakemake reads braces in a file name as a wildcard.
    (b"{m}", true, false),
    (b"`touch PWNED`", true, true),
    ("\u{202e}txt.sh".as_bytes(), true, true),
    (b"sp ace #hash :colon *star ?q [b] ~t", true, true),
    ("café 'q\" $HOME -EOF @x +y".as_bytes(), true, true),
    // Snakemake cannot lock a name that is not UTF-8.
    (b"caf\xe9 'q\" $HOME", true, false),
];

/// Files named PWNED anywhere in the case's home.
fn pwned(case: &Case) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if e.file_name() == "PWNED" {
                found.push(path.clone());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(&case.home, &mut found);
    found
}

/// `make -f FILE` and `snakemake -s FILE`, as the user, with `extra` (`-n`).
fn rebuild_command(case: &Case, format: &str, file: &Path, extra: &[&str]) -> Command {
    let mut cmd = if format == "makefile" {
        let mut make = case.command("make");
        make.arg("-f").arg(file);
        make
    } else {
        let mut snakemake = case.command(format!("{VENV}/snakemake"));
        snakemake.arg("-s").arg(file).args(["--cores", "1"]).env("XDG_CACHE_HOME", case.home.join(".cache"));
        snakemake
    };
    cmd.args(extra);
    cmd
}

/// Exports `target`'s lineage as `format` to `file`: `Ok` when written,
/// `Err(stderr)` when prov refused.
fn try_export(case: &Case, target: &Path, format: &str, file: &Path) -> Result<(), String> {
    let out = case.prov([
        "query".as_ref(),
        "lineage".as_ref(),
        target.as_os_str(),
        "--format".as_ref(),
        format.as_ref(),
        "--output".as_ref(),
        file.as_os_str(),
    ]);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn hostile_file_names_never_become_make_or_python_code() {
    use std::os::unix::ffi::OsStrExt;
    let case = Case::new("hostile-names");
    let shared = case.work.join("shared");
    std::fs::create_dir(&shared).unwrap();
    case.chown_tree(&shared);
    for (i, &(name, make_ok, snakemake_ok)) in HOSTILE_NAMES.iter().enumerate() {
        let shown = String::from_utf8_lossy(name).escape_debug().to_string();
        let input = shared.join(std::ffi::OsStr::from_bytes(name));
        std::fs::write(&input, format!("data {i}\n")).unwrap();
        case.chown_tree(&input);
        let output = case.work.join(format!("out{i}.txt"));
        // The victim's command reads the planted file.
        let out = case.run([
            "sh".as_ref(),
            "-c".as_ref(),
            "cat -- \"$1\" > \"$2\"".as_ref(),
            "sh".as_ref(),
            input.as_os_str(),
            output.as_os_str(),
        ]);
        assert!(out.status.success(), "{shown}: {}", describe(&out));
        let recorded = std::fs::read(&output).unwrap();
        for (format, expect_ok) in [("makefile", make_ok), ("snakemake", snakemake_ok)] {
            let file = case.work.join(format!("rebuild{i}.{format}"));
            match try_export(&case, &output, format, &file) {
                Err(stderr) => {
                    assert!(!expect_ok, "{format} refused {shown}: {stderr}");
                    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
                    let dir = format!("{}/shared/", case.work.display());
                    assert!(stderr.starts_with("prov: cannot write a ") && stderr.contains(&dir), "{stderr}");
                    assert!(!file.exists(), "a refused export leaves no file: {shown}");
                }
                Ok(()) => {
                    assert!(expect_ok, "{format} of {shown} was written, not refused");
                    std::fs::remove_file(&output).unwrap();
                    ok(rebuild_command(&case, format, &file, &["-n"]).output().unwrap(), "a dry run");
                    assert!(!output.exists(), "{format} -n of {shown} ran the command");
                    let run = rebuild_command(&case, format, &file, &[]).output().unwrap();
                    assert!(run.status.success(), "{format} of {shown}: {}", describe(&run));
                    assert_eq!(std::fs::read(&output).unwrap(), recorded, "{format} of {shown} rebuilt something else");
                }
            }
            assert_eq!(pwned(&case), Vec::<PathBuf>::new(), "{format} of {shown} ran planted code");
        }
    }
}

#[test]
fn a_name_gone_since_is_a_comment_that_stays_one() {
    let case = Case::new("hostile-gone");
    // Read, then removed: the exports name it in a comment.
    let names: [&str; 2] = ["gone\r__import__(\"os\").system(\"touch PWNED\")#", "gone\nall:\n\ttouch PWNED\n"];
    for (i, name) in names.iter().enumerate() {
        case.write(name, b"once\n");
        let step = format!("{{ cat -- \"$1\" || echo gone; }} > out{i}.txt 2>/dev/null");
        let out = case.run(["sh", "-c", &step, "sh", name]);
        assert!(out.status.success(), "{}", describe(&out));
        std::fs::remove_file(case.work.join(name)).unwrap();
        for format in ["makefile", "snakemake"] {
            let file = case.work.join(format!("gone{i}.{format}"));
            try_export(&case, &case.work.join(format!("out{i}.txt")), format, &file).unwrap();
            let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
            assert!(text.contains("# read "), "{text}");
            ok(rebuild_command(&case, format, &file, &["-n"]).output().unwrap(), "a dry run");
            ok(rebuild_command(&case, format, &file, &[]).output().unwrap(), "the rebuild");
            assert_eq!(pwned(&case), Vec::<PathBuf>::new(), "{format}:\n{text}");
        }
    }
}

#[test]
fn multi_line_commands_rerun_byte_for_byte() {
    let case = Case::new("multi-line");
    // Lines make would strip under .ONESHELL (`-`, `+`, `@`), a tab, a
    // trailing backslash and `$` inside a quoted here-document.
    let script = "cat > here.txt <<'EOF'\n-minus\n+plus\n@at\n\tindented \\\n$HOME %s {x}\nEOF";
    case.run_sh(script);
    let recorded = std::fs::read(case.work.join("here.txt")).unwrap();
    assert_eq!(recorded, b"-minus\n+plus\n@at\n\tindented \\\n$HOME %s {x}\n");
    for format in ["makefile", "snakemake"] {
        let file = case.work.join(format!("here.{format}"));
        try_export(&case, &case.work.join("here.txt"), format, &file).unwrap();
        std::fs::remove_file(case.work.join("here.txt")).unwrap();
        ok(rebuild_command(&case, format, &file, &[]).output().unwrap(), format);
        assert_eq!(std::fs::read(case.work.join("here.txt")).unwrap(), recorded, "{format}");
    }
}
