//! `--format prov-json`: a W3C PROV document in PROV-JSON.
//!
//! - one `activity` per command (`cmd:<uuid>`): `prov:startTime`,
//!   `prov:endTime`, `prov:label` (the command text), `shell:cwd`,
//!   `shell:exitStatus`, `shell:host`, `shell:session`, `shell:shell`;
//! - one `entity` per file version (`file:v<n>`; the same path with the same
//!   content is one entity, so a file written by one command and read by
//!   the next links them): `prov:label` and `shell:path` (the path),
//!   `shell:size`, `shell:hash` (16 hex digits), `shell:hashChunkSize`,
//!   `shell:hashChunks`, `shell:mtime`; `shell:pathHex` when the name is not
//!   UTF-8;
//! - one `agent` per user and host (`prov:type` `prov:Person`);
//! - `used` for reads, `wasGeneratedBy` for writes, `wasAssociatedWith`
//!   linking each command to its user;
//! - `wasDerivedFrom` (`prov:type` `shell:Moved`) from a file version read
//!   (or wanted) under another name to the version written under the old
//!   one: the same content, moved since;
//! - where the environment was recorded, on the activity:
//!   `shell:environment` (`NAME=VALUE` strings), `shell:gitWorkTree`,
//!   `shell:gitCommit`, `shell:gitBranch`, `shell:gitDirty`; and each
//!   program it ran, an entity of its executable (`prov:type`
//!   `shell:Executable`; the file's version when it was also read) that the
//!   activity `used` with `prov:role` `shell:program`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use crate::Result;
use prov_model::record::bytes_as_hex;
use prov_model::Access;
use prov_store::{CommandEnvironment, CommandRow, FileRow};
use serde_json::{json, Map, Value};

use crate::text::{hash_hex, lossy, rfc3339};

/// The namespace of prov's own attributes and ids.
const NS: &str = "urn:x-prov-shell:";

type FileKey = (Vec<u8>, Option<u64>, u64);

/// `links`: how the records are tied (see [`crate::plan`]); moves among
/// them become `wasDerivedFrom`.
pub fn write_prov_json(
    records: &[(CommandRow, Vec<FileRow>)],
    links: &[crate::plan::PlanLink],
    environments: &BTreeMap<i64, CommandEnvironment>,
    out: &mut dyn Write,
) -> Result<()> {
    let mut entities = Map::new();
    let mut activities = Map::new();
    let mut agents = Map::new();
    let mut used = Map::new();
    let mut generated = Map::new();
    let mut associated = Map::new();
    let mut entity_ids: HashMap<FileKey, String> = HashMap::new();
    let mut agent_ids: HashMap<(String, String), String> = HashMap::new();

    for (c, files) in records {
        let activity = format!("cmd:{}", c.uuid);
        let mut a = Map::new();
        a.insert("prov:startTime".into(), rfc3339(c.start_ns).into());
        if let Some(end) = c.end_ns {
            a.insert("prov:endTime".into(), rfc3339(end).into());
        }
        a.insert("prov:label".into(), lossy(&c.text).into());
        a.insert("shell:cwd".into(), lossy(&c.cwd).into());
        if let Some(status) = c.exit_status {
            a.insert("shell:exitStatus".into(), status.into());
        }
        a.insert("shell:host".into(), c.host.clone().into());
        a.insert("shell:session".into(), c.session.clone().into());
        a.insert("shell:shell".into(), c.shell.clone().into());
        let env = environments.get(&c.id);
        if let Some((_, e)) = env.and_then(|e| e.env.as_ref()) {
            let vars: Vec<Value> = e.pairs().iter().map(|(n, v)| lossy(&[n, &b"="[..], v].concat()).into()).collect();
            a.insert("shell:environment".into(), vars.into());
            if let Some(g) = &e.git {
                a.insert("shell:gitWorkTree".into(), lossy(&g.root).into());
                a.insert("shell:gitCommit".into(), g.commit.clone().into());
                a.insert("shell:gitBranch".into(), g.branch.clone().into());
                a.insert("shell:gitDirty".into(), g.dirty.into());
            }
        }
        activities.insert(activity.clone(), a.into());
        for x in env.map(|e| e.executables.as_slice()).unwrap_or_default() {
            let Some(row) = x.as_file_row(c.id) else { continue };
            let n = entity_ids.len();
            let program = entity_ids
                .entry((row.path.clone(), row.hash, row.size))
                .or_insert_with(|| {
                    let id = format!("file:v{n}");
                    entities.insert(id.clone(), entity(&row));
                    id
                })
                .clone();
            if let Some(Value::Object(e)) = entities.get_mut(&program) {
                e.insert("prov:type".into(), json!({"$": "shell:Executable", "type": "prov:QUALIFIED_NAME"}));
            }
            used.insert(
                format!("_:used{}", used.len()),
                json!({"prov:activity": activity, "prov:entity": program,
                       "prov:role": {"$": "shell:program", "type": "prov:QUALIFIED_NAME"}}),
            );
        }

        let n = agent_ids.len();
        let agent = agent_ids.entry((c.user.clone(), c.host.clone())).or_insert_with(|| {
            let id = format!("agent:a{n}");
            agents.insert(
                id.clone(),
                json!({"prov:type": {"$": "prov:Person", "type": "prov:QUALIFIED_NAME"},
                       "prov:label": format!("{}@{}", c.user, c.host)}),
            );
            id
        });
        associated
            .insert(format!("_:assoc{}", associated.len()), json!({"prov:activity": activity, "prov:agent": agent}));

        for f in files {
            let n = entity_ids.len();
            let entity = entity_ids
                .entry((f.path.clone(), f.hash, f.size))
                .or_insert_with(|| {
                    let id = format!("file:v{n}");
                    entities.insert(id.clone(), entity(f));
                    id
                })
                .clone();
            match f.access {
                Access::Read => {
                    used.insert(
                        format!("_:used{}", used.len()),
                        json!({"prov:activity": activity, "prov:entity": entity}),
                    );
                }
                Access::Write => {
                    generated.insert(
                        format!("_:gen{}", generated.len()),
                        json!({"prov:entity": entity, "prov:activity": activity}),
                    );
                }
            }
        }
    }

    let mut derived = Map::new();
    for (w, new) in crate::plan::moved_versions(records, links) {
        let (Some(old), n) = (entity_ids.get(&(w.path.clone(), w.hash, w.size)).cloned(), entity_ids.len()) else {
            continue;
        };
        let moved = entity_ids
            .entry((new.clone(), w.hash, w.size))
            .or_insert_with(|| {
                let id = format!("file:v{n}");
                entities.insert(id.clone(), entity(&FileRow { path: new.clone(), ..w.clone() }));
                id
            })
            .clone();
        derived.insert(
            format!("_:derived{}", derived.len()),
            json!({"prov:generatedEntity": moved, "prov:usedEntity": old,
                   "prov:type": {"$": "shell:Moved", "type": "prov:QUALIFIED_NAME"}}),
        );
    }

    let mut doc = Map::new();
    doc.insert(
        "prefix".into(),
        json!({
            "cmd": "urn:uuid:",
            "file": format!("{NS}file:"),
            "agent": format!("{NS}agent:"),
            "shell": NS,
        }),
    );
    for (key, map) in [
        ("entity", entities),
        ("activity", activities),
        ("agent", agents),
        ("used", used),
        ("wasGeneratedBy", generated),
        ("wasAssociatedWith", associated),
        ("wasDerivedFrom", derived),
    ] {
        if !map.is_empty() {
            doc.insert(key.into(), map.into());
        }
    }
    serde_json::to_writer_pretty(&mut *out, &Value::Object(doc))?;
    out.write_all(b"\n")?;
    Ok(())
}

fn entity(f: &FileRow) -> Value {
    let mut e = Map::new();
    e.insert("prov:label".into(), lossy(&f.path).into());
    e.insert("shell:path".into(), lossy(&f.path).into());
    if std::str::from_utf8(&f.path).is_err() {
        e.insert("shell:pathHex".into(), bytes_as_hex::encode(&f.path).into());
    }
    e.insert("shell:size".into(), f.size.into());
    if let Some(h) = f.hash {
        e.insert("shell:hash".into(), hash_hex(h).into());
    }
    e.insert("shell:hashChunkSize".into(), f.hash_params.chunk_size.into());
    e.insert("shell:hashChunks".into(), f.hash_params.chunks.into());
    e.insert("shell:mtime".into(), rfc3339(f.mtime_ns).into());
    Value::Object(e)
}
