//! A command's environment as the outputs show it: its variables, the git
//! state of its directory and the programs it ran, with the executable's
//! size, mtime and partial hash (which version of a program made a file).

use prov_model::env::Environment;
use prov_store::Executable;
use serde_json::{Map, Value};

use crate::text::{hash_hex, put_bytes, rfc3339};

/// `{"variables": {NAME: VALUE…}, "git": {…} | null}`; a name or value
/// that is not UTF-8 is shown lossily, with its exact bytes in
/// `variables_hex` (NAME=VALUE entries, hex).
pub fn environment_json(env: &Environment) -> Value {
    let mut vars = Map::new();
    let mut exact = Vec::new();
    for (name, value) in env.pairs() {
        if std::str::from_utf8(name).is_err() || std::str::from_utf8(value).is_err() {
            exact.push(Value::from(prov_model::record::bytes_as_hex::encode(&[name, b"=", value].concat())));
        }
        vars.insert(String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned().into());
    }
    let mut obj = Map::new();
    obj.insert("variables".into(), vars.into());
    if !exact.is_empty() {
        obj.insert("variables_hex".into(), exact.into());
    }
    obj.insert(
        "git".into(),
        match &env.git {
            Some(g) => {
                let mut git = Map::new();
                put_bytes(&mut git, "root", &g.root);
                git.insert("commit".into(), g.commit.clone().into());
                git.insert("branch".into(), g.branch.clone().into());
                git.insert("dirty".into(), g.dirty.into());
                git.into()
            }
            None => Value::Null,
        },
    );
    obj.into()
}

/// `{"path", "size", "mtime_ns", "mtime", "hash"}`; the file's fields are
/// null when it was not recorded.
pub fn executable_json(e: &Executable) -> Value {
    let mut obj = Map::new();
    put_bytes(&mut obj, "path", &e.path);
    let f = e.file.as_ref();
    obj.insert("size".into(), f.map(|f| f.size).into());
    obj.insert("mtime_ns".into(), f.map(|f| f.mtime_ns).into());
    obj.insert("mtime".into(), f.map(|f| rfc3339(f.mtime_ns)).into());
    obj.insert("hash".into(), f.and_then(|f| f.hash).map(hash_hex).into());
    obj.into()
}
