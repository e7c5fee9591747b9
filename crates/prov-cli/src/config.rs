//! `prov config`: the effective configuration, each value with where it
//! came from (the file and line, or the built-in default), and the
//! documented defaults (`--default`).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use prov_model::config::section_header;
use prov_model::escape::escape;

use crate::setup::UserSetup;

pub fn config(default: bool) -> Result<ExitCode> {
    if default {
        // Byte for byte the embedded file, so it can be saved as a start.
        std::io::stdout().write_all(prov_model::config::DEFAULT_TOML.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    // Loading checks the file: a bad one is an error naming its line.
    let user = UserSetup::load()?;
    let path = user.locations.config_file();
    let shown = escape(path.as_os_str().as_bytes());
    let text = prov_model::small_file::read_to_string(&path, prov_model::small_file::CONFIG_LIMIT).ok();
    let mut out = std::io::stdout().lock();
    match &text {
        Some(_) => writeln!(out, "# {shown}: valid; each value says where it comes from")?,
        None => {
            writeln!(out, "# {shown}: absent, so every value is the default (prov config --default explains them)")?
        }
    }
    let file_name = path.file_name().map_or("config.toml".into(), |n| n.to_string_lossy().into_owned());
    let origins = text.as_deref().map(key_lines).unwrap_or_default();
    let effective = toml::Table::try_from(&user.config).context("cannot show the configuration")?;
    for (section, keys) in &effective {
        let Some(keys) = keys.as_table() else { continue };
        writeln!(out, "\n[{section}]")?;
        if section == "database" && !keys.contains_key("path") {
            writeln!(out, "# path = {:?}  # default", user.database().display().to_string())?;
        }
        if section == "sync" && !keys.contains_key("url") {
            writeln!(out, "# url: none, records stay in this host's journal  # default")?;
        }
        for (key, value) in keys {
            let origin = match origins.iter().find(|(s, k, _)| s == section && k == key) {
                Some((_, _, line)) => format!("{file_name}:{line}"),
                None => "default".into(),
            };
            writeln!(out, "{key} = {}  # {origin}", inline(value))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A value on one line (toml writes long arrays over several).
fn inline(value: &toml::Value) -> String {
    match value {
        toml::Value::Array(items) => format!("[{}]", items.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// (section, key, line) of every `key =` line of a configuration file.
fn key_lines(text: &str) -> Vec<(String, String, usize)> {
    let mut section = String::new();
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = section_header(line) {
            section = name.to_string();
            continue;
        }
        let Some((key, _)) = line.split_once('=') else { continue };
        let key = key.trim().trim_matches('"');
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            found.push((section.clone(), key.to_string(), i + 1));
        }
    }
    found
}

/// `[read] exclude` or `[write] exclude` given in the file without the
/// default entries: the list replaced the defaults, which is rarely meant.
/// Returns (section, the default entries it left out).
pub fn replaced_defaults(file: &Path) -> Vec<(&'static str, Vec<String>)> {
    let Ok(text) = prov_model::small_file::read_to_string(file, prov_model::small_file::CONFIG_LIMIT) else {
        return Vec::new();
    };
    let Ok(config) = prov_model::Config::parse(&text, file) else { return Vec::new() };
    let lines = key_lines(&text);
    let mut found = Vec::new();
    for (section, filter, default) in [
        ("read", &config.read, prov_model::config::EventFilter::default_read()),
        ("write", &config.write, prov_model::config::EventFilter::default_write()),
    ] {
        if !lines.iter().any(|(s, k, _)| s == section && k == "exclude") {
            continue;
        }
        let missing: Vec<String> =
            default.exclude.iter().filter(|d| !filter.exclude.contains(d)).map(|d| d.0.clone()).collect();
        if !missing.is_empty() {
            found.push((section, missing));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_in_their_sections() {
        let text = "# c\n[read]\nexclude_also = [\"*.swp\",\n  \"**/.git/**\"]\n[query] # q\nlimit=5\n";
        assert_eq!(key_lines(text), [("read".into(), "exclude_also".into(), 3), ("query".into(), "limit".into(), 6)]);
    }
}
