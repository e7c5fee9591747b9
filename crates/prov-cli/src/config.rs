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
    fn long_arrays_are_shown_on_one_line() {
        let value: toml::Value = toml::from_str::<toml::Table>("v = [\"*.swp\", [1, 2], true]").unwrap()["v"].clone();
        assert_eq!(inline(&value), "[\"*.swp\", [1, 2], true]");
        assert_eq!(inline(&toml::Value::Integer(5)), "5");
        // A string with a quote stays one TOML value that reads back the same.
        let quoted = inline(&toml::Value::String("a\"b".into()));
        assert_eq!(toml::from_str::<toml::Table>(&format!("v = {quoted}")).unwrap()["v"].as_str(), Some("a\"b"));
    }

    /// `exclude` given without the default entries replaces them (the
    /// user most likely meant `exclude_also`); naming them keeps them.
    #[test]
    fn an_exclude_list_without_the_defaults_is_found() {
        let dir = std::env::temp_dir().join(format!("prov-cli-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        let defaults = prov_model::config::EventFilter::default_read().exclude;
        assert!(!defaults.is_empty());

        std::fs::write(&file, "[read]\nexclude = [\"*.tmp\"]\n").unwrap();
        let found = replaced_defaults(&file);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "read");
        assert_eq!(found[0].1, defaults.iter().map(|d| d.0.clone()).collect::<Vec<_>>());

        let all: Vec<String> = defaults.iter().map(|d| format!("{:?}", d.0)).collect();
        std::fs::write(&file, format!("[read]\nexclude = [{}, \"*.tmp\"]\n", all.join(", "))).unwrap();
        assert!(replaced_defaults(&file).is_empty());

        std::fs::write(&file, "[read]\nexclude_also = [\"*.tmp\"]\n").unwrap();
        assert!(replaced_defaults(&file).is_empty());
        // Not a valid configuration: reported elsewhere, not here.
        std::fs::write(&file, "[read\nexclude = [\"*.tmp\"]\n").unwrap();
        assert!(replaced_defaults(&file).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_are_found_in_their_sections() {
        let text = "# c\n[read]\nexclude_also = [\"*.swp\",\n  \"**/.git/**\"]\n[query] # q\nlimit=5\n";
        assert_eq!(key_lines(text), [("read".into(), "exclude_also".into(), 3), ("query".into(), "limit".into(), 6)]);
    }
}
