//! `--format ro-crate`: a directory holding `ro-crate-metadata.json`, an
//! RO-Crate 1.1 that conforms to the Process Run Crate profile 0.5.
//!
//! Each command is a `CreateAction` with its `instrument` (the program, a
//! `SoftwareApplication` named after the command's first word), `object`
//! (files read) and `result` (files written), `agent` (the user, a
//! `Person`), `startTime`/`endTime`, and `actionStatus`
//! (`CompletedActionStatus` for exit status 0, else `FailedActionStatus`
//! with the status in `error`).
//!
//! Files are not copied: a lineage is history, and the files may have
//! changed or be gone since. Each is referenced by its absolute `file://`
//! URI and described by `name`, `contentSize`, `dateModified` and its
//! partial hash (`xxh3PartialHash`, with `xxh3PartialHashChunkSize` and
//! `xxh3PartialHashChunks`: terms the crate's context defines). When the
//! crate holds several versions of one path, each version's URI gets
//! `#<hash>-<size>` appended. A version read (or wanted) under another
//! name than it was written as has `movedFrom` (a term the crate's context
//! defines) naming the version written.
//!
//! Where the environment was recorded, a command's action has the
//! profile's `environment`: a `PropertyValue` (`name`, `value`) per
//! variable, each shared by the actions that had it; the git state of its
//! directory as `gitWorkTree`, `gitCommit`, `gitBranch` and `gitDirty`;
//! and the programs it ran as `executables`: a `SoftwareApplication` per
//! executable version (`identifier` its path, `contentSize`,
//! `dateModified`, the partial hash) — which samtools made this BAM.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

use crate::{ExportError, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use prov_model::Access;
use prov_store::{CommandEnvironment, CommandRow, FileRow};
use serde_json::{json, Map, Value};

use crate::text::{base_name, file_uri, hash_hex, lossy};

const METADATA: &str = "ro-crate-metadata.json";
const PROFILE: &str = "https://w3id.org/ro/wfrun/process/0.5";
/// Where the ad hoc terms live.
const TERMS: &str = "urn:x-prov-shell:";

/// ISO 8601 as the profile asks: milliseconds and a `+00:00` offset.
fn iso(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// A list property: a single value when there is one (RO-Crate's advice).
fn refs(ids: &[String]) -> Value {
    match ids {
        [one] => json!({ "@id": one }),
        many => many.iter().map(|id| json!({ "@id": id })).collect(),
    }
}

/// The crate's id of each file version.
fn file_ids(
    records: &[(CommandRow, Vec<FileRow>)],
    moved: &[(&FileRow, Vec<u8>)],
) -> HashMap<(Vec<u8>, Option<u64>, u64), String> {
    let mut versions: BTreeMap<&[u8], BTreeSet<(Option<u64>, u64)>> = BTreeMap::new();
    for (_, files) in records {
        for f in files {
            versions.entry(&f.path).or_default().insert((f.hash, f.size));
        }
    }
    for (w, new) in moved {
        versions.entry(new).or_default().insert((w.hash, w.size));
    }
    let mut ids = HashMap::new();
    for (path, vs) in versions {
        let uri = file_uri(path);
        for &(hash, size) in &vs {
            let id = if vs.len() == 1 {
                uri.clone()
            } else {
                format!("{uri}#{}-{size}", hash.map_or("unreadable".into(), hash_hex))
            };
            ids.insert((path.to_vec(), hash, size), id);
        }
    }
    ids
}

/// Writes the crate into `dir` (created if needed; an existing crate
/// there is not overwritten). `title` names the crate.
/// `links`: how the records are tied (see [`crate::plan`]); moves among
/// them become `movedFrom`.
pub fn write_ro_crate(
    records: &[(CommandRow, Vec<FileRow>)],
    links: &[crate::plan::PlanLink],
    environments: &BTreeMap<i64, CommandEnvironment>,
    title: &str,
    dir: &Path,
) -> Result<()> {
    let metadata = dir.join(METADATA);
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Create { path: dir.to_path_buf(), source })?;
    let mut file = match std::fs::File::create_new(&metadata) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(ExportError::CrateExists(metadata)),
        Err(source) => return Err(ExportError::Create { path: metadata, source }),
    };

    let moved = crate::plan::moved_versions(records, links);
    let ids = file_ids(records, &moved);
    let mut graph: Vec<Value> = Vec::new();
    let mut files: BTreeMap<String, Value> = BTreeMap::new();
    let mut actions = Vec::new();
    let mut people: BTreeMap<String, Value> = BTreeMap::new();
    let mut programs: BTreeMap<String, String> = BTreeMap::new();
    let mut software = Software::default();

    for (c, events) in records {
        let action = format!("#command-{}", c.uuid);
        let person = format!("#person-{}", people.len());
        let who = format!("{}@{}", c.user, c.host);
        let person =
            people.entry(who.clone()).or_insert_with(|| json!({"@id": person, "@type": "Person", "name": who}))["@id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        let program = lossy(base_name(c.text.split(|b| b.is_ascii_whitespace()).next().unwrap_or_default()));
        let n = programs.len();
        let instrument = programs.entry(program).or_insert_with(|| format!("#program-{n}")).clone();

        let mut object = Vec::new();
        let mut result = Vec::new();
        for f in events {
            let id = ids[&(f.path.clone(), f.hash, f.size)].clone();
            files.entry(id.clone()).or_insert_with(|| file_entity(&id, f));
            let list = if f.access == Access::Read { &mut object } else { &mut result };
            if !list.contains(&id) {
                list.push(id);
            }
        }

        let mut a = Map::new();
        a.insert("@id".into(), action.clone().into());
        a.insert("@type".into(), "CreateAction".into());
        a.insert("name".into(), lossy(&c.text).into());
        a.insert(
            "description".into(),
            format!("The command `{}` run by {who} in {}", lossy(&c.text), lossy(&c.cwd)).into(),
        );
        a.insert("instrument".into(), json!({ "@id": instrument }));
        a.insert("agent".into(), json!({ "@id": person }));
        a.insert("startTime".into(), iso(c.start_ns).into());
        if let Some(end) = c.end_ns {
            a.insert("endTime".into(), iso(end).into());
        }
        match c.exit_status {
            Some(0) => {
                a.insert("actionStatus".into(), "http://schema.org/CompletedActionStatus".into());
            }
            Some(status) => {
                a.insert("actionStatus".into(), "http://schema.org/FailedActionStatus".into());
                a.insert("error".into(), format!("exit status {status}").into());
            }
            // Still running, or its end was never recorded.
            None => {}
        }
        if !object.is_empty() {
            a.insert("object".into(), refs(&object));
        }
        if !result.is_empty() {
            a.insert("result".into(), refs(&result));
        }
        if let Some(env) = environments.get(&c.id) {
            software.describe(&mut a, env);
        }
        actions.push(action);
        graph.push(Value::Object(a));
    }

    for (w, new) in &moved {
        let old = ids[&(w.path.clone(), w.hash, w.size)].clone();
        let id = ids[&(new.clone(), w.hash, w.size)].clone();
        let entity =
            files.entry(id.clone()).or_insert_with(|| file_entity(&id, &FileRow { path: new.clone(), ..(*w).clone() }));
        entity["movedFrom"] = json!({ "@id": old });
    }

    let now = iso(Utc::now().timestamp_nanos_opt().unwrap_or(0));
    let file_list: Vec<String> = files.keys().cloned().collect();
    let mut root = json!({
        "@id": "./",
        "@type": "Dataset",
        "name": title,
        "description": format!("{title}: {} commands recorded by prov, the files they read and wrote", records.len()),
        "datePublished": now,
        "license": { "@id": "#license" },
        "conformsTo": { "@id": PROFILE },
        "mentions": refs(&actions),
    });
    if !file_list.is_empty() {
        root["hasPart"] = refs(&file_list);
    }
    if let Some(first) = people.values().next() {
        root["author"] = json!({ "@id": first["@id"] });
    }

    let mut all = vec![
        json!({
            "@id": METADATA,
            "@type": "CreativeWork",
            "about": { "@id": "./" },
            "conformsTo": { "@id": "https://w3id.org/ro/crate/1.1" },
        }),
        root,
        json!({"@id": PROFILE, "@type": "CreativeWork", "name": "Process Run Crate", "version": "0.5"}),
        json!({
            "@id": "#license",
            "@type": "CreativeWork",
            "name": "No license stated",
            "description": "Exported by prov from a shell journal; the crate's author has stated no license.",
        }),
    ];
    all.extend(graph);
    all.extend(people.into_values());
    all.extend(programs.into_iter().map(|(name, id)| json!({"@id": id, "@type": "SoftwareApplication", "name": name})));
    all.extend(files.into_values());
    all.extend(software.entities.into_values());

    let doc = json!({
        "@context": [
            "https://w3id.org/ro/crate/1.1/context",
            {
                "xxh3PartialHash": format!("{TERMS}xxh3PartialHash"),
                "xxh3PartialHashChunkSize": format!("{TERMS}xxh3PartialHashChunkSize"),
                "xxh3PartialHashChunks": format!("{TERMS}xxh3PartialHashChunks"),
                "movedFrom": { "@id": format!("{TERMS}movedFrom"), "@type": "@id" },
                "executables": { "@id": format!("{TERMS}executables"), "@type": "@id" },
                // The Process Run Crate's term (its workflow-run context).
                "environment": { "@id": "https://w3id.org/ro/terms/workflow-run#environment", "@type": "@id" },
                "gitWorkTree": format!("{TERMS}gitWorkTree"),
                "gitCommit": format!("{TERMS}gitCommit"),
                "gitBranch": format!("{TERMS}gitBranch"),
                "gitDirty": format!("{TERMS}gitDirty"),
            }
        ],
        "@graph": all,
    });
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    file.write_all(text.as_bytes()).map_err(|source| ExportError::Write { path: metadata, source })?;
    Ok(())
}

/// The variables and executables of the crate, each entity once.
#[derive(Default)]
struct Software {
    entities: BTreeMap<String, Value>,
}

impl Software {
    /// Adds `env` to action `a`: its variables, git state and programs.
    fn describe(&mut self, a: &mut Map<String, Value>, env: &CommandEnvironment) {
        if let Some((_, e)) = &env.env {
            let mut vars = Vec::new();
            for (name, value) in e.pairs() {
                let entry = [name, &b"="[..], value].concat();
                let id = format!("#env-{}", hash_hex(xxhash_rust::xxh3::xxh3_64(&entry)));
                self.entities.entry(id.clone()).or_insert_with(
                    || json!({"@id": id, "@type": "PropertyValue", "name": lossy(name), "value": lossy(value)}),
                );
                vars.push(id);
            }
            if !vars.is_empty() {
                a.insert("environment".into(), refs(&vars));
            }
            if let Some(g) = &e.git {
                a.insert("gitWorkTree".into(), lossy(&g.root).into());
                a.insert("gitCommit".into(), g.commit.clone().into());
                a.insert("gitBranch".into(), g.branch.clone().into());
                a.insert("gitDirty".into(), g.dirty.into());
            }
        }
        let mut programs = Vec::new();
        for x in &env.executables {
            let Some(row) = x.as_file_row(0) else { continue };
            let version = row.hash.map_or("unreadable".into(), hash_hex);
            let id = format!("#exe-{}-{version}-{}", hash_hex(xxhash_rust::xxh3::xxh3_64(&row.path)), row.size);
            self.entities.entry(id.clone()).or_insert_with(|| {
                let mut e = file_entity(&id, &row);
                e["@type"] = "SoftwareApplication".into();
                e["identifier"] = file_uri(&row.path).into();
                e
            });
            if !programs.contains(&id) {
                programs.push(id);
            }
        }
        if !programs.is_empty() {
            a.insert("executables".into(), refs(&programs));
        }
    }
}

fn file_entity(id: &str, f: &FileRow) -> Value {
    let mut e = json!({
        "@id": id,
        "@type": "File",
        "name": lossy(base_name(&f.path)),
        "contentSize": f.size.to_string(),
        "dateModified": iso(f.mtime_ns),
        "xxh3PartialHashChunkSize": f.hash_params.chunk_size,
        "xxh3PartialHashChunks": f.hash_params.chunks,
    });
    if let Some(h) = f.hash {
        e["xxh3PartialHash"] = hash_hex(h).into();
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_model::HashParams;

    fn command(id: i64, exit_status: Option<i32>) -> CommandRow {
        CommandRow {
            uuid: format!("00000000-0000-0000-0000-{id:012}"),
            seq: 0,
            text: b"./run.sh --fast".to_vec(),
            start_ns: id * 1_000_000_000,
            end_ns: Some(id * 1_000_000_000 + 5),
            exit_status,
            ..CommandRow::fixture(id)
        }
    }

    fn file(access: Access, path: &[u8], hash: u64) -> FileRow {
        FileRow {
            id: hash as i64,
            command_id: 0,
            access,
            path: path.to_vec(),
            size: 4,
            mtime_ns: 0,
            hash: Some(hash),
            hash_params: HashParams::default(),
            pid: None,
        }
    }

    #[test]
    fn failed_commands_and_rewritten_files_are_told_apart() {
        let records = vec![
            (command(1, Some(0)), vec![file(Access::Write, b"/w/out", 1)]),
            (command(2, Some(3)), vec![file(Access::Read, b"/w/out", 1), file(Access::Write, b"/w/out", 2)]),
            (command(3, None), vec![file(Access::Write, b"/w/caf\xe9", 3)]),
        ];
        let dir = std::env::temp_dir().join(format!("prov-export-crate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_ro_crate(&records, &[], &BTreeMap::new(), "t", &dir).unwrap();
        let meta: Value = serde_json::from_slice(&std::fs::read(dir.join(METADATA)).unwrap()).unwrap();
        assert!(write_ro_crate(&records, &[], &BTreeMap::new(), "t", &dir).is_err(), "an existing crate is kept");
        let _ = std::fs::remove_dir_all(&dir);

        let graph = meta["@graph"].as_array().unwrap();
        let action =
            |n: i64| graph.iter().find(|e| e["@id"] == format!("#command-00000000-0000-0000-0000-{n:012}")).unwrap();
        assert_eq!(action(1)["actionStatus"], "http://schema.org/CompletedActionStatus");
        assert_eq!(action(2)["actionStatus"], "http://schema.org/FailedActionStatus");
        assert_eq!(action(2)["error"], "exit status 3");
        assert!(action(3).get("actionStatus").is_none(), "unknown status: none claimed");
        // Two versions of /w/out: two entities, the read one is the first write.
        let v1 = format!("file:///w/out#{}-4", hash_hex(1));
        assert_eq!(action(1)["result"]["@id"], v1.as_str());
        assert_eq!(action(2)["object"]["@id"], v1.as_str());
        assert_eq!(action(2)["result"]["@id"], format!("file:///w/out#{}-4", hash_hex(2)).as_str());
        assert_eq!(action(3)["result"]["@id"], "file:///w/caf%E9");
        let program = graph.iter().find(|e| e["@type"] == "SoftwareApplication").unwrap();
        assert_eq!(program["name"], "run.sh");
    }

    /// The environment and programs of a command: shared variables once,
    /// the git state on the action, each executable version once.
    #[test]
    fn environments_and_programs_are_described() {
        use prov_model::env::{Environment, GitState};
        use prov_store::{CommandEnvironment, Executable};
        let env = Environment {
            vars: b"PATH=/usr/bin\0SLURM_JOB_ID=4242\0".to_vec(),
            git: Some(GitState {
                root: b"/w".to_vec(),
                commit: Some("c".repeat(40)),
                branch: None,
                dirty: Some(false),
            }),
        };
        let samtools = Executable {
            path: b"/opt/bin/samtools".to_vec(),
            file: Some(prov_model::ExeFile {
                size: 9,
                mtime_ns: 0,
                hash: Some(0xab),
                hash_params: HashParams::default(),
            }),
        };
        let records = vec![(command(1, Some(0)), vec![]), (command(2, Some(0)), vec![])];
        let shown = CommandEnvironment { env: Some((1, env)), executables: vec![samtools] };
        let environments = BTreeMap::from([(1, shown.clone()), (2, shown)]);
        let dir = std::env::temp_dir().join(format!("prov-export-crate-env-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_ro_crate(&records, &[], &environments, "t", &dir).unwrap();
        let meta: Value = serde_json::from_slice(&std::fs::read(dir.join(METADATA)).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let graph = meta["@graph"].as_array().unwrap();
        let action = graph.iter().find(|e| e["@id"] == "#command-00000000-0000-0000-0000-000000000001").unwrap();
        let vars = action["environment"].as_array().unwrap();
        assert_eq!(vars.len(), 2);
        let job = graph.iter().find(|e| e["@id"] == vars[1]["@id"]).unwrap();
        assert_eq!(
            (&job["@type"], &job["name"], &job["value"]),
            (&"PropertyValue".into(), &"SLURM_JOB_ID".into(), &"4242".into())
        );
        assert_eq!(graph.iter().filter(|e| e["@type"] == "PropertyValue").count(), 2, "shared variables once");
        assert_eq!((&action["gitCommit"], &action["gitDirty"]), (&"c".repeat(40).into(), &false.into()));
        let exe = graph.iter().find(|e| e["@id"] == action["executables"]["@id"]).unwrap();
        assert_eq!((&exe["name"], &exe["identifier"]), (&"samtools".into(), &"file:///opt/bin/samtools".into()));
        assert_eq!((&exe["contentSize"], &exe["xxh3PartialHash"]), (&"9".into(), &hash_hex(0xab).into()));
    }
}
