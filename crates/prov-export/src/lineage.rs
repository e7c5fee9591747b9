//! The lineage walk: from a file back through the commands that wrote it and
//! the files they read (upstream), or forward through the commands that read
//! it and the files they wrote (downstream). Uses only the store's public
//! queries.
//!
//! A file version is linked to its writer by content first (hash, size and
//! hash parameters equal), and by exact path only when no writer of that
//! content is known (a file whose hash could not be taken, or one changed by
//! something unrecorded). The writer must have started before the reader;
//! of several candidates the newest wins. The walk stops at files nobody
//! recorded writing (or reading, downstream), at commands already visited
//! (so cycles end) and at the depth limit.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;

use crate::Result;
use prov_model::{Access, HashParams};
use prov_store::{CommandRow, FileRow, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Towards the inputs: who wrote this, from what.
    Upstream,
    /// Towards the outputs: who read this, and what they made.
    Downstream,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Upstream => "upstream",
            Direction::Downstream => "downstream",
        }
    }
}

/// How a read was tied to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkedBy {
    Content,
    Path,
}

impl LinkedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkedBy::Content => "content",
            LinkedBy::Path => "path",
        }
    }
}

/// A file passed from the command that wrote it to one that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub writer: i64,
    /// The write event (of `writer`).
    pub written: i64,
    pub reader: i64,
    /// The read event (of `reader`).
    pub read: i64,
    pub by: LinkedBy,
}

/// A command of the lineage with all its files.
#[derive(Debug, Clone)]
pub struct Step {
    pub command: CommandRow,
    pub files: Vec<FileRow>,
    /// 1 for the commands that touched the target itself.
    pub depth: usize,
}

/// The file the walk starts from, as it is now and as it was recorded.
#[derive(Debug, Clone)]
pub struct Target {
    /// Absolute path, as the kernel reports paths.
    pub path: Vec<u8>,
    /// The file's current (hash, size, parameters) under every parameter
    /// set in use; empty when it is gone or unreadable.
    pub content: Vec<(u64, u64, HashParams)>,
}

#[derive(Debug, Clone)]
pub struct Lineage {
    pub target: Target,
    pub direction: Direction,
    /// The commands that touched the target (the target's writer upstream,
    /// its readers downstream) and the event of each that did.
    pub start: Vec<(i64, i64)>,
    /// Every command of the walk, by id.
    pub steps: BTreeMap<i64, Step>,
    pub flows: Vec<Flow>,
    /// Links the depth limit kept the walk from following.
    pub cut: Vec<Flow>,
}

/// Walks from `target` in `direction`, at most `max_depth` commands deep.
pub fn walk(store: &Store, mut target: Target, direction: Direction, max_depth: Option<usize>) -> Result<Lineage> {
    // An empty file's content says nothing about where it came from.
    target.content.retain(|&(_, size, _)| size > 0);
    let mut lookup = Lookup { store, cache: HashMap::new() };
    let mut lineage =
        Lineage { target, direction, start: Vec::new(), steps: BTreeMap::new(), flows: Vec::new(), cut: Vec::new() };
    let (content, path) = (&lineage.target.content, &lineage.target.path[..]);
    lineage.start = match direction {
        // The file as it is now was made by one command: the newest writer
        // of its content, else the newest writer of its path.
        Direction::Upstream => {
            let found = lookup.find(Access::Write, content, Some(path))?;
            pick_newest(&found, content, path).map(|(c, f, _)| (c, f)).into_iter().collect()
        }
        // Everyone who read this content (or, when the content is unknown
        // or nobody read it, this path).
        Direction::Downstream => {
            let by_content = matches_of(&lookup.find(Access::Read, content, None)?, content, None, LinkedBy::Content);
            if by_content.is_empty() {
                matches_of(&lookup.find(Access::Read, &[], Some(path))?, &[], Some(path), LinkedBy::Path)
            } else {
                by_content
            }
            .into_iter()
            .map(|(c, f, _)| (c, f))
            .collect()
        }
    };

    let mut queue: VecDeque<(i64, usize)> = VecDeque::new();
    let mut seen: HashSet<i64> = HashSet::new();
    for &(id, _) in &lineage.start {
        if seen.insert(id) {
            queue.push_back((id, 1));
        }
    }
    while let Some((id, depth)) = queue.pop_front() {
        let Some(command) = store.command(id)? else { continue };
        let files = store.files_of(id)?;
        let next_depth = depth + 1;
        let may_expand = !matches!(max_depth, Some(max) if next_depth > max);
        for f in &files {
            let linked = match (direction, f.access) {
                (Direction::Upstream, Access::Read) => lookup
                    .writer_of(&command, f)?
                    .map(|(w, written, by)| vec![Flow { writer: w, written, reader: id, read: f.id, by }]),
                (Direction::Downstream, Access::Write) => Some(
                    lookup
                        .readers_of(&command, f)?
                        .into_iter()
                        .map(|(r, read, by)| Flow { writer: id, written: f.id, reader: r, read, by })
                        .collect(),
                ),
                _ => None,
            };
            for flow in linked.into_iter().flatten() {
                let next = if direction == Direction::Upstream { flow.writer } else { flow.reader };
                if !seen.contains(&next) {
                    if !may_expand {
                        lineage.cut.push(flow);
                        continue;
                    }
                    seen.insert(next);
                    queue.push_back((next, next_depth));
                }
                lineage.flows.push(flow);
            }
        }
        lineage.steps.insert(id, Step { command, files, depth });
    }
    Ok(lineage)
}

/// A file version's content key: `None` when it has no hash, or is empty
/// (every empty file has the same content, so it links by path only).
fn content_of(f: &FileRow) -> Vec<(u64, u64, HashParams)> {
    f.hash.filter(|_| f.size > 0).map(|h| (h, f.size, f.hash_params)).into_iter().collect()
}

type Found = Rc<Vec<(CommandRow, Vec<FileRow>)>>;
type LookupKey = (Access, Vec<(u64, u64, HashParams)>, Option<Vec<u8>>);

/// The store's event lookups, each asked once per walk: a file read by a
/// hundred commands of the lineage costs one query.
pub(crate) struct Lookup<'s> {
    store: &'s Store,
    cache: HashMap<LookupKey, Found>,
}

impl<'s> Lookup<'s> {
    pub(crate) fn new(store: &'s Store) -> Lookup<'s> {
        Lookup { store, cache: HashMap::new() }
    }

    fn find(&mut self, access: Access, content: &[(u64, u64, HashParams)], path: Option<&[u8]>) -> Result<Found> {
        let key = (access, content.to_vec(), path.map(<[u8]>::to_vec));
        if let Some(found) = self.cache.get(&key) {
            return Ok(found.clone());
        }
        let found = Rc::new(self.store.find_file_events(access, content, path, None)?);
        self.cache.insert(key, found.clone());
        Ok(found)
    }

    /// The command that wrote what `reader` read as `read`, started before
    /// the reader: see [`pick_newest`].
    pub(crate) fn writer_of(&mut self, reader: &CommandRow, read: &FileRow) -> Result<Option<(i64, i64, LinkedBy)>> {
        let content = content_of(read);
        let found = self.find(Access::Write, &content, Some(&read.path))?;
        let earlier: Vec<_> =
            found.iter().filter(|(c, _)| c.id != reader.id && c.start_ns <= reader.start_ns).cloned().collect();
        Ok(pick_newest(&earlier, &content, &read.path))
    }

    /// The commands that read what `writer` wrote as `written`, started
    /// after it. By content only: a path alone cannot tell which later
    /// version a reader saw; only a file without a content key falls back
    /// to its path.
    fn readers_of(&mut self, writer: &CommandRow, written: &FileRow) -> Result<Vec<(i64, i64, LinkedBy)>> {
        let content = content_of(written);
        let (path, by) =
            if content.is_empty() { (Some(&written.path[..]), LinkedBy::Path) } else { (None, LinkedBy::Content) };
        let found = self.find(Access::Read, &content, path)?;
        let later: Vec<_> =
            found.iter().filter(|(c, _)| c.id != writer.id && c.start_ns >= writer.start_ns).cloned().collect();
        Ok(matches_of(&later, &content, path, by))
    }
}

fn same_content(f: &FileRow, content: &[(u64, u64, HashParams)]) -> bool {
    content.iter().any(|&(h, s, p)| f.hash == Some(h) && f.size == s && f.hash_params == p)
}

/// Each command's first event matching `content` (or `path`, when given).
fn matches_of(
    found: &[(CommandRow, Vec<FileRow>)],
    content: &[(u64, u64, HashParams)],
    path: Option<&[u8]>,
    by: LinkedBy,
) -> Vec<(i64, i64, LinkedBy)> {
    found
        .iter()
        .filter_map(|(c, files)| {
            files
                .iter()
                .find(|f| same_content(f, content) || path.is_some_and(|p| f.path == p))
                .map(|f| (c.id, f.id, by))
        })
        .collect()
}

/// Of commands listed newest first, the newest that wrote this content at
/// this path; else the newest that wrote this content anywhere (the file
/// was renamed or copied since); else the newest that wrote this path.
fn pick_newest(
    found: &[(CommandRow, Vec<FileRow>)],
    content: &[(u64, u64, HashParams)],
    path: &[u8],
) -> Option<(i64, i64, LinkedBy)> {
    let first = |pred: &dyn Fn(&FileRow) -> bool| {
        found.iter().find_map(|(c, files)| files.iter().find(|f| pred(f)).map(|f| (c.id, f.id)))
    };
    let by = |by| move |(c, f)| (c, f, by);
    first(&|f| same_content(f, content) && f.path == path)
        .or_else(|| first(&|f| same_content(f, content)))
        .map(by(LinkedBy::Content))
        .or_else(|| first(&|f| f.path == path).map(by(LinkedBy::Path)))
}

impl Lineage {
    /// The depth limit cut the walk short somewhere.
    pub fn truncated(&self) -> bool {
        !self.cut.is_empty()
    }

    /// The commands of the walk with all their files, oldest first: the
    /// input of every exporter.
    pub fn records(&self) -> Vec<(CommandRow, Vec<FileRow>)> {
        let mut steps: Vec<&Step> = self.steps.values().collect();
        steps.sort_by_key(|s| (s.command.start_ns, s.command.id));
        steps.into_iter().map(|s| (s.command.clone(), s.files.clone())).collect()
    }

    /// The file event with this id, wherever it is.
    pub fn file(&self, command: i64, event: i64) -> Option<&FileRow> {
        self.steps.get(&command)?.files.iter().find(|f| f.id == event)
    }

    /// The files of a step worth showing: on the side the walk goes (reads
    /// upstream, writes downstream) all of them, on the other side those
    /// that link to another step or are the target.
    pub fn shown_files<'a>(&'a self, step: &'a Step) -> impl Iterator<Item = &'a FileRow> + 'a {
        let walked = match self.direction {
            Direction::Upstream => Access::Read,
            Direction::Downstream => Access::Write,
        };
        step.files.iter().filter(move |f| {
            f.access == walked
                || self.start.contains(&(step.command.id, f.id))
                || self.flows.iter().any(|fl| fl.written == f.id || fl.read == f.id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(id: i64, start: i64) -> CommandRow {
        CommandRow {
            cwd: b"/".to_vec(),
            shell: "run".into(),
            start_ns: start,
            end_ns: Some(start + 1),
            ..CommandRow::fixture(id)
        }
    }

    fn file(id: i64, command: i64, path: &str, hash: Option<u64>) -> FileRow {
        FileRow {
            id,
            command_id: command,
            access: Access::Write,
            path: path.as_bytes().to_vec(),
            size: 3,
            mtime_ns: 0,
            hash,
            hash_params: HashParams::default(),
            pid: None,
        }
    }

    #[test]
    fn the_writer_of_the_content_wins_over_newer_writers_of_the_path() {
        let p = HashParams::default();
        // Newest first, as the store lists them.
        let found = vec![
            (cmd(3, 30), vec![file(30, 3, "/a", Some(9))]),
            (cmd(2, 20), vec![file(20, 2, "/moved", Some(7))]),
            (cmd(1, 10), vec![file(10, 1, "/a", Some(7))]),
        ];
        assert_eq!(
            pick_newest(&found, &[(7, 3, p)], b"/a"),
            Some((1, 10, LinkedBy::Content)),
            "same content and path first"
        );
        assert_eq!(pick_newest(&found, &[(7, 3, p)], b"/elsewhere"), Some((2, 20, LinkedBy::Content)));
        assert_eq!(pick_newest(&found, &[(8, 3, p)], b"/a"), Some((3, 30, LinkedBy::Path)));
        assert_eq!(pick_newest(&found, &[], b"/none"), None);
    }

    /// A store in a temporary directory with commands `(start, events)`,
    /// where an event is (access, path, hash); ids are 1, 2, … in order.
    /// (access, path, hash) of a recorded event.
    type Event = (Access, &'static str, Option<u64>);

    fn store_with(name: &str, commands: &[(i64, &[Event])]) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("prov-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = dir.join("prov.db");
        let mut store = Store::open(&db, std::time::Duration::from_secs(5)).unwrap();
        for (i, (start, events)) in commands.iter().enumerate() {
            let begin = prov_model::CommandBegin {
                uuid: format!("00000000-0000-0000-0000-{i:012}"),
                session: "s".into(),
                seq: i as u64,
                text: format!("step {}", i + 1).into_bytes(),
                cwd: b"/w".to_vec(),
                host: "h".into(),
                user: "u".into(),
                shell: "bash".into(),
                start_ns: *start,
            };
            let id = store.begin_command(&begin).unwrap();
            let events: Vec<prov_model::FileEvent> = events
                .iter()
                .map(|&(access, path, hash)| prov_model::FileEvent {
                    access,
                    path: path.as_bytes().to_vec(),
                    size: 1,
                    mtime_ns: *start,
                    hash,
                    hash_params: HashParams::default(),
                    pid: None,
                })
                .collect();
            store.add_events(id, &events).unwrap();
            store.end_command(id, &prov_model::CommandEnd::with_status(start + 1, 0)).unwrap();
        }
        drop(store);
        (Store::open_read_only(&db).unwrap(), dir)
    }

    fn target(path: &str, hash: Option<u64>) -> Target {
        Target {
            path: path.as_bytes().to_vec(),
            content: hash.map(|h| (h, 1, HashParams::default())).into_iter().collect(),
        }
    }

    fn ids(l: &Lineage) -> Vec<i64> {
        l.records().iter().map(|(c, _)| c.id).collect()
    }

    #[test]
    fn a_diamond_is_walked_once_each_way_and_the_depth_limit_cuts() {
        use Access::*;
        let (store, dir) = store_with(
            "diamond",
            &[
                (10, &[(Write, "/w/a", Some(1))]),
                (20, &[(Read, "/w/a", Some(1)), (Write, "/w/b", Some(2))]),
                (30, &[(Read, "/w/a", Some(1)), (Write, "/w/c", Some(3))]),
                (40, &[(Read, "/w/b", Some(2)), (Read, "/w/c", Some(3)), (Write, "/w/d", Some(4))]),
                (50, &[(Write, "/w/unrelated", Some(5))]),
            ],
        );
        let up = walk(&store, target("/w/d", Some(4)), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&up), vec![1, 2, 3, 4]);
        assert_eq!(up.flows.len(), 4, "a->b, a->c, b->d, c->d");
        assert!(up.flows.iter().all(|f| f.by == LinkedBy::Content));
        assert_eq!(up.steps[&1].depth, 3);

        let down = walk(&store, target("/w/a", Some(1)), Direction::Downstream, None).unwrap();
        assert_eq!(ids(&down), vec![2, 3, 4]);

        let shallow = walk(&store, target("/w/d", Some(4)), Direction::Upstream, Some(2)).unwrap();
        assert_eq!(ids(&shallow), vec![2, 3, 4]);
        assert!(shallow.truncated());
        assert_eq!(shallow.cut.len(), 2, "both reads of /w/a");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn path_links_only_when_no_writer_of_the_content_is_known() {
        use Access::*;
        let (store, dir) = store_with(
            "fallback",
            &[
                // Two writers of the same content: the newer one before the reader wins.
                (10, &[(Write, "/w/p", Some(7))]),
                (20, &[(Write, "/w/p", Some(7))]),
                (30, &[(Read, "/w/p", Some(7)), (Write, "/w/q", Some(8))]),
                // /w/p changed behind prov's back: its reader links by path.
                (40, &[(Read, "/w/p", Some(9)), (Write, "/w/r", Some(10))]),
                // A writer after the reader never counts.
                (50, &[(Write, "/w/p", Some(9))]),
            ],
        );
        let q = walk(&store, target("/w/q", Some(8)), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&q), vec![2, 3]);
        assert_eq!(q.flows[0].by, LinkedBy::Content);
        let r = walk(&store, target("/w/r", Some(10)), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&r), vec![2, 4]);
        assert_eq!(r.flows[0].by, LinkedBy::Path);
        // A deleted target (no content known) is found by its path.
        let gone = walk(&store, target("/w/q", None), Direction::Upstream, None).unwrap();
        assert_eq!(gone.start.len(), 1);
        let _ = std::fs::remove_dir_all(dir);
    }
}
