//! The documents cannot drift from the code or from each other: every
//! configuration key is in docs/reference.md, and every relative link
//! between the project's documents names a file that exists.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `section.key` for every key of the configuration, taken from the
/// serialised default configuration (keys without a default, such as
/// `database.path`, serialise as null and are kept).
fn config_keys() -> Vec<String> {
    let value = serde_json::to_value(prov_model::config::Config::default()).unwrap();
    let mut keys = Vec::new();
    for (section, table) in value.as_object().unwrap() {
        for key in table.as_object().unwrap_or_else(|| panic!("[{section}] is not a table")).keys() {
            keys.push(format!("{section}.{key}"));
        }
    }
    keys
}

#[test]
fn every_configuration_key_is_in_the_reference() {
    let reference = std::fs::read_to_string(repo().join("docs/reference.md")).unwrap();
    let keys = config_keys();
    assert!(keys.len() > 30, "the configuration has its keys: {keys:?}");
    let missing: Vec<_> = keys.iter().filter(|k| !reference.contains(&format!("| `{k}` |"))).collect();
    assert!(missing.is_empty(), "docs/reference.md has no row for {missing:?}");
}

/// The Markdown documents of the project: README, CONTRIBUTING,
/// CHANGELOG, docs/ and the READMEs of its directories.
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
            } else if name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    found
}

/// The targets of the inline links `[text](target)` in a Markdown text,
/// outside code spans and indented code.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with("    ")) {
        let mut in_code = false;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'`' => in_code = !in_code,
                b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                    if let Some(end) = line[i + 2..].find(')') {
                        targets.push(line[i + 2..i + 2 + end].to_string());
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    targets
}

/// The anchors GitHub gives a document's headings.
fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn relative_links_between_documents_resolve() {
    let mut broken = Vec::new();
    let docs = documents();
    assert!(docs.iter().any(|d| d.ends_with("docs/guide.md")), "{docs:?}");
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() { doc.clone() } else { doc.parent().unwrap().join(file) };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if !anchor.is_empty() && path.extension().is_some_and(|e| e == "md") {
                let linked = std::fs::read_to_string(&path).unwrap();
                if !anchors(&linked).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {target} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn link_targets_skip_code() {
    let text = "see [a](x.md) and `[b](y.md)`\n    [c](z.md)\n[d](w.md#h)";
    assert_eq!(link_targets(text), ["x.md", "w.md#h"]);
    assert_eq!(
        anchors("## A cluster: one journal on PostgreSQL\n### `prov doctor`"),
        ["a-cluster-one-journal-on-postgresql", "prov-doctor"]
    );
}
