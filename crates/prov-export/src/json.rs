//! A lineage as one JSON document (`--format json`).
//!
//! `{"type": "lineage", "target", "direction" ("upstream"/"downstream"),
//! "truncated" (the depth limit cut the walk), "start" (ids of the commands
//! that touched the target), "commands": [...], "flows": [...]}`. Commands
//! are oldest first, with the fields of `prov query --json` (`id`, `uuid`,
//! `session`, `seq`, `text`, `cwd`, `host`, `user`, `shell`, `start_ns`,
//! `start`, `end_ns`, `end`, `exit_status`, `complete`, `incomplete`,
//! `incomplete_reason`, `untraced`, `files`) plus `depth` (1 = touched the target). A flow is a file passed from a writer
//! to a reader: `writer`, `written_file` (event id), `reader`, `read_file`,
//! `path`, `hash`, `match` ("path": the write at this path with this
//! content; "moved": the same content, size and mtime written under another
//! name; "content": identical content at another path, only with
//! `--by-content`) and `linked_by` (the same value, its older name).
//! `start_match` gives the `match` of each of `start`.

use std::io::Write;

use crate::Result;
use prov_store::{CommandRow, FileRow};
use serde_json::{json, Map, Value};

use crate::lineage::Lineage;
use crate::text::{hash_hex, put_bytes, rfc3339};

/// A command with all its files, as in `prov query --json`.
pub fn command_json(c: &CommandRow, files: &[FileRow]) -> Map<String, Value> {
    let mut o = command_fields(c);
    o.insert("files".into(), files.iter().map(|f| Value::Object(file_fields(f))).collect::<Vec<_>>().into());
    o
}

/// A command's own fields in `prov query --json` (everything but its files).
pub fn command_fields(c: &CommandRow) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("type".into(), "command".into());
    o.insert("id".into(), c.id.into());
    o.insert("uuid".into(), c.uuid.clone().into());
    o.insert("session".into(), c.session.clone().into());
    o.insert("seq".into(), c.seq.into());
    put_bytes(&mut o, "text", &c.text);
    put_bytes(&mut o, "cwd", &c.cwd);
    o.insert("host".into(), c.host.clone().into());
    o.insert("user".into(), c.user.clone().into());
    o.insert("shell".into(), c.shell.clone().into());
    o.insert("start_ns".into(), c.start_ns.into());
    o.insert("start".into(), rfc3339(c.start_ns).into());
    o.insert("end_ns".into(), c.end_ns.into());
    o.insert("end".into(), c.end_ns.map(rfc3339).into());
    o.insert("exit_status".into(), c.exit_status.into());
    o.insert("complete".into(), c.is_complete().into());
    let reasons: Map<String, Value> =
        c.completeness.reasons().into_iter().map(|(k, n)| (k.to_string(), n.into())).collect();
    o.insert("incomplete".into(), reasons.into());
    o.insert("incomplete_reason".into(), c.incomplete.clone().into());
    o.insert("untraced".into(), c.untraced.clone().into());
    o
}

/// A file event's fields in `prov query --json`.
pub fn file_fields(f: &FileRow) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("id".into(), f.id.into());
    o.insert("access".into(), f.access.as_str().into());
    put_bytes(&mut o, "path", &f.path);
    o.insert("size".into(), f.size.into());
    o.insert("mtime_ns".into(), f.mtime_ns.into());
    o.insert("mtime".into(), rfc3339(f.mtime_ns).into());
    o.insert("hash".into(), f.hash.map(hash_hex).into());
    o.insert("hash_chunk_size".into(), f.hash_params.chunk_size.into());
    o.insert("hash_chunks".into(), f.hash_params.chunks.into());
    o.insert("pid".into(), f.pid.into());
    o
}

pub fn write_lineage(lineage: &Lineage, out: &mut dyn Write) -> Result<()> {
    let commands: Vec<Value> = lineage
        .records()
        .iter()
        .map(|(c, files)| {
            let mut o = command_json(c, files);
            o.insert("depth".into(), lineage.steps[&c.id].depth.into());
            Value::Object(o)
        })
        .collect();
    let flows: Vec<Value> = lineage
        .flows
        .iter()
        .map(|fl| {
            let mut o = Map::new();
            o.insert("writer".into(), fl.writer.into());
            o.insert("written_file".into(), fl.written.into());
            o.insert("reader".into(), fl.reader.into());
            o.insert("read_file".into(), fl.read.into());
            if let Some(f) = lineage.file(fl.reader, fl.read) {
                put_bytes(&mut o, "path", &f.path);
                o.insert("hash".into(), f.hash.map(hash_hex).into());
            }
            o.insert("match".into(), fl.by.as_str().into());
            o.insert("linked_by".into(), fl.by.as_str().into());
            Value::Object(o)
        })
        .collect();
    let mut doc = Map::new();
    doc.insert("type".into(), "lineage".into());
    put_bytes(&mut doc, "target", &lineage.target.path);
    doc.insert("direction".into(), lineage.direction.as_str().into());
    doc.insert("truncated".into(), lineage.truncated().into());
    doc.insert("start".into(), json!(lineage.start.iter().map(|(c, _)| c).collect::<Vec<_>>()));
    doc.insert("start_match".into(), json!(lineage.start_kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>()));
    doc.insert("commands".into(), commands.into());
    doc.insert("flows".into(), flows.into());
    serde_json::to_writer(&mut *out, &Value::Object(doc))?;
    out.write_all(b"\n")?;
    Ok(())
}
