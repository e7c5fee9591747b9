//! The environment a re-run gets: the variables recorded with the command
//! set over the current environment; the rest comes from the environment
//! `prov rerun` runs in. A variable recorded redacted (a secret) keeps its
//! current value, and prov says so.

use prov_model::env::Environment;
use prov_model::escape::escape;

/// The variables recorded for command `id`, to set over the current
/// environment; says on standard error what cannot be restored.
pub fn recorded(id: i64, env: Option<&Environment>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(env) = env else {
        eprintln!("prov: #{id} has no recorded environment: it runs in the current one");
        return Vec::new();
    };
    let mut set = Vec::new();
    for (name, value) in env.pairs() {
        if contains(value, prov_model::redact::MARK.as_bytes()) {
            eprintln!("prov: #{id}: {} was recorded redacted: the re-run gets its current value", escape(name));
            continue;
        }
        set.push((name.to_vec(), value.to_vec()));
    }
    set
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
