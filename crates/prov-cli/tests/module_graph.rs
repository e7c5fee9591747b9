//! prov-cli's modules import each other in one direction only
//! (docs/architecture.md, "Inside prov-cli"): read from the sources, every
//! `crate::a::b` and, inside a directory module, `super::b` is an arrow; a
//! circle fails with its modules named. Test code is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the modules it uses.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let name_of = |path: &Path| {
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let parts = if parts.last().is_some_and(|p| p == "mod") { &parts[..parts.len() - 1] } else { &parts[..] };
        parts.join("::")
    };
    let known: BTreeSet<String> = files.iter().map(|f| name_of(f)).collect();
    // `a::b` if that is a module of its own, else `a`.
    let resolve = |a: &str, b: Option<&str>| match b {
        Some(b) if known.contains(&format!("{a}::{b}")) => format!("{a}::{b}"),
        _ => a.to_string(),
    };
    let mut out = BTreeMap::new();
    for file in &files {
        let name = name_of(file);
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let mut uses = BTreeSet::new();
        let words = |s: &str| {
            s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).map(|w| w.to_string()).collect::<Vec<_>>()
        };
        for word in words(code) {
            let parts: Vec<&str> = word.split("::").collect();
            if parts.len() >= 2 && parts[0] == "crate" && !parts[1].is_empty() {
                uses.insert(resolve(parts[1], parts.get(2).copied()));
            }
            if parts.len() >= 2 && parts[0] == "super" && name.contains("::") {
                let parent = name.rsplit_once("::").unwrap().0;
                uses.insert(resolve(parent, Some(parts[1])));
            }
        }
        // `use crate::{a, b::c}`: each entry of the group.
        for group in code.split("use crate::{").skip(1) {
            let group = group.split("};").next().unwrap_or("");
            for entry in group.split(',') {
                let parts: Vec<&str> = entry.trim().trim_matches(|c| c == '{' || c == '}').split("::").collect();
                let first = parts[0].trim();
                if first.chars().next().is_some_and(|c| c.is_ascii_lowercase()) && known.contains(first) {
                    uses.insert(resolve(first, parts.get(1).map(|p| p.trim_matches(|c| c == '{' || c == ' '))));
                }
            }
        }
        uses.retain(|u| known.contains(u) && *u != name);
        out.insert(name, uses);
    }
    out
}

/// A circle of the graph, if it has one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_of_prov_cli_imports_one_that_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    // The reading itself works: arrows the architecture document shows.
    assert!(graph["run::client"].contains("run::preparer"), "{:?}", graph["run::client"]);
    assert!(graph["journal"].contains("run::record_end"), "{:?}", graph["journal"]);
    assert!(graph["rerun"].contains("sandbox"), "{:?}", graph["rerun"]);
    assert_eq!(circle(&graph), None);
}

#[test]
fn a_circle_is_found_and_named() {
    let arrows = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")];
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in arrows {
        graph.entry(from.into()).or_default().insert(to.into());
        graph.entry(to.into()).or_default();
    }
    assert_eq!(circle(&graph), Some(["a", "b", "c", "a"].map(String::from).to_vec()));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(circle(&graph), None);
}
