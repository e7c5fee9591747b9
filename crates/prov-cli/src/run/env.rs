//! The environment `prov run` records for its command: the variables
//! `[env]` selects from its own environment, which the command inherits.

use std::os::unix::ffi::OsStrExt;

use prov_model::env::EnvConfig;

/// The selected variables as `NAME=VALUE` entries each ending in a NUL
/// (the collector redacts them).
pub fn of_this_process(config: &EnvConfig) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in std::env::vars_os() {
        if config.records(name.as_bytes()) {
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
            out.push(0);
        }
    }
    out
}
