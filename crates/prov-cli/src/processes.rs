//! `prov query processes ID`: the process tree of one command, each
//! process with what it ran and the files it wrote and read.
//!
//! JSON Lines, one object per process image (`"type": "process"`): `id`,
//! `command_id`, `pid`, `ppid`, `parent` (the id of the parent's image, or
//! null), `depth` (0 for the command's first processes), `exe` (the file
//! executed; empty when unknown or not the user's to see), `args` (list of
//! strings, null when unknown), `args_unknown` (why, or null), `cwd`,
//! `start_ns`/`start`, `end_ns`/`end` (null when not known), `writes` and
//! `reads` (paths). Byte strings that are not UTF-8 come as a lossy string
//! plus `<field>_hex` (for `args`: `args_hex`).

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use prov_export::process_tree::{process_tree, ProcessNode};
use prov_export::text::{put_bytes, rfc3339};
use prov_model::escape::escape;
use prov_store::ProcessRow;
use serde_json::{Map, Value};

use crate::output;

/// What to show of a command's processes.
pub struct ProcessQuery {
    pub command_id: i64,
    pub json: bool,
    /// Only processes whose executable's path or name is this.
    pub exe: Option<String>,
    /// Only processes with an argument containing this.
    pub arg: Option<String>,
    /// List every file read, not only the count.
    pub files: bool,
}

pub fn query(q: &ProcessQuery, reach: crate::journal::Reach) -> Result<ExitCode> {
    let Some(store) = crate::journal::open_for(reach)? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let Some(command) = store.command(q.command_id)? else {
        eprintln!("prov: no command with id {}", q.command_id);
        return Ok(ExitCode::from(1));
    };
    let nodes = process_tree(&store, q.command_id)?;
    let shown: Vec<&ProcessNode> = nodes.iter().filter(|n| matches(q, &n.row)).collect();
    if shown.is_empty() {
        eprintln!("prov: no process matched");
        return Ok(ExitCode::from(1));
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    if q.json {
        for node in &shown {
            output::write_json(&mut out, &process_json(node, &nodes)).context("writing output")?;
        }
    } else {
        writeln!(out, "{}  {}", command.id, escape(&command.text)).context("writing output")?;
        for node in &shown {
            write_human(&mut out, node, q.files).context("writing output")?;
        }
    }
    out.flush().context("writing output")?;
    Ok(ExitCode::SUCCESS)
}

fn matches(q: &ProcessQuery, row: &ProcessRow) -> bool {
    let r = &row.record;
    let exe_ok = q.exe.as_deref().is_none_or(|want| {
        let name = r.exe.rsplit(|&b| b == b'/').next().unwrap_or(&r.exe);
        let argv0 = r.argv().and_then(|a| a.first().map(|a0| a0.rsplit(|&b| b == b'/').next().unwrap_or(a0).to_vec()));
        r.exe == want.as_bytes() || name == want.as_bytes() || argv0.as_deref() == Some(want.as_bytes())
    });
    let arg_ok = q
        .arg
        .as_deref()
        .is_none_or(|want| r.argv().is_some_and(|args| args.iter().any(|a| contains(a, want.as_bytes()))));
    exe_ok && arg_ok
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A process as one line of text: its arguments, or its executable and why
/// they are unknown.
pub fn process_label(r: &prov_model::ProcessRecord) -> String {
    match r.argv() {
        Some(args) if !args.is_empty() => args.iter().map(|a| shell_word(&escape(a))).collect::<Vec<_>>().join(" "),
        _ => {
            let exe = if r.exe.is_empty() { "(executable not shown)".to_string() } else { escape(&r.exe) };
            format!("{exe} (arguments unknown: {})", r.unknown.as_deref().unwrap_or("none read"))
        }
    }
}

/// A word quoted for reading when it holds spaces or is empty.
fn shell_word(w: &str) -> String {
    if !w.is_empty() && !w.contains([' ', '\t', '\'', '"']) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn write_human(out: &mut impl Write, node: &ProcessNode, all_files: bool) -> std::io::Result<()> {
    let r = &node.row.record;
    let indent = "  ".repeat(node.depth + 1);
    write!(out, "{indent}{}  {}", r.pid, process_label(r))?;
    if !r.cwd.is_empty() {
        write!(out, "  [in {}]", escape(&r.cwd))?;
    }
    writeln!(out)?;
    for w in &node.writes {
        writeln!(out, "{indent}    wrote {}", escape(w))?;
    }
    if all_files {
        for f in &node.reads {
            writeln!(out, "{indent}    read  {}", escape(f))?;
        }
    } else if !node.reads.is_empty() {
        writeln!(out, "{indent}    read {} file(s) (--files lists them)", node.reads.len())?;
    }
    Ok(())
}

pub fn process_json(node: &ProcessNode, all: &[ProcessNode]) -> Value {
    let r = &node.row.record;
    let mut o = Map::new();
    o.insert("type".into(), "process".into());
    o.insert("id".into(), node.row.id.into());
    o.insert("command_id".into(), node.row.command_id.into());
    o.insert("pid".into(), r.pid.into());
    o.insert("ppid".into(), r.ppid.into());
    o.insert("parent".into(), node.parent.map(|p| all[p].row.id).into());
    o.insert("depth".into(), node.depth.into());
    put_bytes(&mut o, "exe", &r.exe);
    match r.argv() {
        Some(args) => {
            let lossy: Vec<Value> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned().into()).collect();
            if args.iter().any(|a| std::str::from_utf8(a).is_err()) {
                let hex: Vec<Value> = args.iter().map(|a| prov_model::record::bytes_as_hex::encode(a).into()).collect();
                o.insert("args_hex".into(), hex.into());
            }
            o.insert("args".into(), lossy.into());
        }
        None => {
            o.insert("args".into(), Value::Null);
        }
    }
    o.insert("args_unknown".into(), r.unknown.clone().into());
    put_bytes(&mut o, "cwd", &r.cwd);
    o.insert("start_ns".into(), r.start_ns.into());
    o.insert("start".into(), rfc3339(r.start_ns).into());
    o.insert("end_ns".into(), r.end_ns.into());
    o.insert("end".into(), r.end_ns.map(rfc3339).into());
    let paths = |list: &[Vec<u8>]| -> Value {
        list.iter().map(|p| Value::from(String::from_utf8_lossy(p).into_owned())).collect::<Vec<_>>().into()
    };
    o.insert("writes".into(), paths(&node.writes));
    o.insert("reads".into(), paths(&node.reads));
    Value::Object(o)
}
