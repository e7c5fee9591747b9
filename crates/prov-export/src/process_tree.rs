//! A command's processes as a tree: each process image under the image of
//! its parent, with the files it closed (shared by `prov query processes`,
//! the process lineage and the process-step exports).

use prov_model::Access;
use prov_store::{FileRow, ProcessRow, Reader};

use crate::Result;

/// One process image with its place in the tree and its files.
pub struct ProcessNode {
    pub row: ProcessRow,
    pub parent: Option<usize>,
    pub depth: usize,
    pub writes: Vec<Vec<u8>>,
    pub reads: Vec<Vec<u8>>,
    /// The events themselves, in storage order.
    pub files: Vec<FileRow>,
}

/// The command's processes, in tree order (each after its parent), with
/// the files each closed.
pub fn process_tree(store: &Reader, command_id: i64) -> Result<Vec<ProcessNode>> {
    if store.processes_of(command_id)?.is_empty() {
        return Ok(Vec::new());
    }
    process_tree_of(store, command_id, &store.files_of(command_id)?)
}

/// `process_tree` for a command whose events are loaded already.
pub fn process_tree_of(store: &Reader, command_id: i64, files: &[FileRow]) -> Result<Vec<ProcessNode>> {
    let rows = store.processes_of(command_id)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let owners = store.process_of_events(command_id, files, &rows)?;
    let mut nodes: Vec<ProcessNode> = rows
        .into_iter()
        .map(|row| ProcessNode {
            row,
            parent: None,
            depth: 0,
            writes: Vec::new(),
            reads: Vec::new(),
            files: Vec::new(),
        })
        .collect();
    for (f, owner) in files.iter().zip(owners) {
        if let Some(i) = owner {
            match f.access {
                Access::Write => nodes[i].writes.push(f.path.clone()),
                Access::Read => nodes[i].reads.push(f.path.clone()),
            }
            nodes[i].files.push(f.clone());
        }
    }
    // The parent: the image of the parent pid current when the child was
    // seen, else that pid's first.
    for i in 0..nodes.len() {
        let (ppid, first) = (nodes[i].row.record.ppid, nodes[i].row.record.first_event);
        let Some(ppid) = ppid else { continue };
        let candidates: Vec<usize> = (0..nodes.len()).filter(|&j| j != i && nodes[j].row.record.pid == ppid).collect();
        nodes[i].parent = candidates
            .iter()
            .copied()
            .filter(|&j| nodes[j].row.record.first_event <= first)
            .max_by_key(|&j| nodes[j].row.record.first_event)
            .or_else(|| candidates.first().copied());
    }
    Ok(tree_order(nodes))
}

/// Depth-first order from the roots (processes without a recorded parent),
/// children in the order they were seen; a parent cycle (pids reused) is
/// cut where it closes.
fn tree_order(mut nodes: Vec<ProcessNode>) -> Vec<ProcessNode> {
    let n = nodes.len();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        match node.parent {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    loop {
        while let Some((i, depth)) = stack.pop() {
            if placed[i] {
                continue;
            }
            placed[i] = true;
            nodes[i].depth = depth;
            order.push(i);
            stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
        }
        // Only a cycle is left unplaced: start it at its first node.
        match (0..n).find(|&i| !placed[i]) {
            Some(i) => {
                nodes[i].parent = None;
                stack.push((i, 0));
            }
            None => break,
        }
    }
    let new_index: Vec<usize> = {
        let mut v = vec![0; n];
        for (k, &i) in order.iter().enumerate() {
            v[i] = k;
        }
        v
    };
    let mut slots: Vec<Option<ProcessNode>> = nodes.into_iter().map(Some).collect();
    order
        .iter()
        .map(|&i| {
            let mut node = slots[i].take().expect("each node placed once");
            node.parent = node.parent.map(|p| new_index[p]);
            node
        })
        .collect()
}
