//! The lineage walk: from a file back through the commands that wrote it and
//! the files they read (upstream), or forward through the commands that read
//! it and the files they wrote (downstream). Uses only the store's public
//! queries.
//!
//! How a file version (what a command read, or the file as it is now) is
//! tied to the write that made it, strongest evidence first ([`MatchKind`]):
//!
//! - `path`: the last write at this very path before the read, whose
//!   content (size and partial hash; without a hash, size and mtime) equals
//!   what was read. A write whose mtime is the one read wins over a newer
//!   write of the path; otherwise the newest write before the read decides,
//!   and when its content differs, something unrecorded changed the file
//!   since and no write at the path explains it.
//! - `moved`: the same file under another name: a write of the same content
//!   with the same size and mtime elsewhere (`mv` keeps the mtime). For the
//!   file as it is now, a write whose old path still holds another file of
//!   that content and mtime was copied with its mtime, not moved: `content`.
//! - `content`: identical content written to another path, a copy or a
//!   coincidence. Never a link unless asked for (`by_content`).
//!
//! A write explains a read only when it came before: an earlier command
//! (by start), or an earlier event of the reading command itself, which
//! keeps that link (`own_reads`) whatever else has the same content.
//! Downstream, a read is followed only when the upstream rule ties it to the
//! write being followed, so both directions draw the same edges. prov's own
//! work (queries, reports: [`CommandRow::is_prov_own_work`]) is left out
//! unless `include_own`. The walk stops at files nobody recorded writing
//! (or reading, downstream), at commands already visited (so cycles end)
//! and at the depth limit.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::os::unix::ffi::OsStrExt;
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

/// How a file version was tied to a write (or a read), strongest first:
/// listings order by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchKind {
    /// This very path, with this content.
    Path,
    /// This content, size and mtime under another name: moved since.
    Moved,
    /// This path, but another version of it (answers about a file only).
    Earlier,
    /// Identical content at another path: a copy or a coincidence.
    Content,
}

impl MatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Path => "path",
            MatchKind::Moved => "moved",
            MatchKind::Earlier => "earlier",
            MatchKind::Content => "content",
        }
    }

    /// Whether it says that this file came from (or went to) the command:
    /// what lineage, readers and exports follow by default.
    pub fn is_same_file(self) -> bool {
        matches!(self, MatchKind::Path | MatchKind::Moved)
    }
}

/// Kept for callers that name the link kind by its old name.
pub type LinkedBy = MatchKind;

/// One version of a file: what a read saw, or what is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime_ns: i64,
    /// Its partial hash under each parameter set known: the event's own,
    /// or, for a file on disk, every set in use in the store.
    pub hashes: Vec<(HashParams, u64)>,
    /// Device and inode of a file on disk (None for a recorded event).
    pub inode: Option<(u64, u64)>,
}

impl Version {
    /// What a recorded event saw.
    pub fn of_event(f: &FileRow) -> Version {
        Version {
            path: f.path.clone(),
            size: f.size,
            mtime_ns: f.mtime_ns,
            hashes: f.hash.map(|h| (f.hash_params, h)).into_iter().collect(),
            inode: None,
        }
    }

    /// The file at `path` as it is now, hashed under `params` (each set in
    /// use); None when it is not a readable regular file.
    pub fn on_disk(path: &[u8], params: &[HashParams]) -> Option<Version> {
        use std::os::unix::fs::MetadataExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        let meta = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
        let mut hashes = Vec::new();
        for &params in params {
            if let Ok((hash, _)) = prov_model::hash::hash_path(p, params) {
                hashes.push((params, hash));
            }
        }
        Some(Version {
            path: path.to_vec(),
            size: meta.len(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
            hashes,
            inode: Some((meta.dev(), meta.ino())),
        })
    }

    fn hash_under(&self, params: HashParams) -> Option<u64> {
        self.hashes.iter().find(|(p, _)| *p == params).map(|&(_, h)| h)
    }

    /// The keys to look this content up by: none for an empty file (every
    /// empty file has that content) or one whose content is unknown.
    pub fn content_keys(&self) -> Vec<(u64, u64, HashParams)> {
        if self.size == 0 {
            return Vec::new();
        }
        self.hashes.iter().map(|&(p, h)| (h, self.size, p)).collect()
    }

    /// `f` has this content: equal size and partial hash (an empty file
    /// equals any empty file). Without a hash to compare, unknown.
    fn same_content(&self, f: &FileRow) -> Option<bool> {
        if self.size != f.size {
            return Some(false);
        }
        if self.size == 0 {
            return Some(true);
        }
        Some(self.hash_under(f.hash_params)? == f.hash?)
    }

    /// `f` is this version: the same content, or, where no hash can be
    /// compared, the same size and mtime.
    fn same_version(&self, f: &FileRow) -> bool {
        self.same_content(f).unwrap_or(self.size == f.size && self.mtime_ns == f.mtime_ns)
    }
}

/// A write tied to a version (or a read tied to a write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub command: i64,
    pub event: i64,
    pub kind: MatchKind,
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
    pub by: MatchKind,
}

/// A command of the lineage with all its files.
#[derive(Debug, Clone)]
pub struct Step {
    pub command: CommandRow,
    pub files: Vec<FileRow>,
    /// 1 for the commands that touched the target itself.
    pub depth: usize,
}

/// The file the walk starts from.
#[derive(Debug, Clone)]
pub struct Target {
    /// Absolute path, as the kernel reports paths.
    pub path: Vec<u8>,
    /// The file as it is now; None when it is gone or not a readable file.
    pub now: Option<Version>,
}

impl Target {
    /// The file at `path` now, hashed with every parameter set in use.
    pub fn on_disk(store: &Store, path: &[u8]) -> Result<Target> {
        Ok(Target { path: path.to_vec(), now: Version::on_disk(path, &store.hash_params_in_use()?) })
    }
}

/// What the walk follows besides the same file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkOptions {
    /// At most this many commands deep.
    pub max_depth: Option<usize>,
    /// Also follow identical content at other paths (`MatchKind::Content`).
    pub by_content: bool,
    /// Also prov's own work (queries, reports).
    pub include_own: bool,
}

#[derive(Debug, Clone)]
pub struct Lineage {
    pub target: Target,
    pub direction: Direction,
    /// The commands that touched the target (the target's writer upstream,
    /// its readers downstream) and the event of each that did, with how.
    pub start: Vec<(i64, i64)>,
    /// How each of `start` matched, in the same order: `Earlier` when no
    /// recorded command wrote the file as it is now and the walk is of its
    /// last recorded version.
    pub start_kinds: Vec<MatchKind>,
    /// Every command of the walk, by id.
    pub steps: BTreeMap<i64, Step>,
    pub flows: Vec<Flow>,
    /// Links the depth limit kept the walk from following.
    pub cut: Vec<Flow>,
    /// Reads of a file the same command wrote before (upstream).
    pub own_reads: HashSet<i64>,
}

/// Walks from `target` in `direction`, at most `max_depth` commands deep,
/// following the same file only.
pub fn walk(store: &Store, target: Target, direction: Direction, max_depth: Option<usize>) -> Result<Lineage> {
    walk_with(store, target, direction, &WalkOptions { max_depth, ..WalkOptions::default() })
}

/// Walks from `target` in `direction` as `opts` say.
pub fn walk_with(store: &Store, target: Target, direction: Direction, opts: &WalkOptions) -> Result<Lineage> {
    let mut lookup = Lookup::with_options(store, opts);
    let mut lineage = Lineage {
        target,
        direction,
        start: Vec::new(),
        start_kinds: Vec::new(),
        steps: BTreeMap::new(),
        flows: Vec::new(),
        cut: Vec::new(),
        own_reads: HashSet::new(),
    };
    let started: Vec<Link> = match direction {
        // The file as it is now was made by one write.
        // When something unrecorded changed it since, the walk is of its last
        // recorded version, labelled `Earlier`.
        Direction::Upstream => match lookup.writer_of(lineage.target.now.as_ref(), &lineage.target.path, None)? {
            Some(link) => vec![link],
            None => lookup
                .writers_of_file(lineage.target.now.as_ref(), &lineage.target.path)?
                .into_iter()
                .find(|(_, events)| events[0].1 == MatchKind::Earlier)
                .map(|(c, events)| Link { command: c.id, event: events[0].0.id, kind: MatchKind::Earlier })
                .into_iter()
                .collect(),
        },
        // Everyone who read this version of it.
        Direction::Downstream => lookup
            .readers_of_file(lineage.target.now.as_ref(), &lineage.target.path)?
            .into_iter()
            .filter(|l| l.kind.is_same_file() || (opts.by_content && l.kind == MatchKind::Content))
            .collect(),
    };
    lineage.start = started.iter().map(|l| (l.command, l.event)).collect();
    lineage.start_kinds = started.iter().map(|l| l.kind).collect();

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
        let may_expand = !matches!(opts.max_depth, Some(max) if next_depth > max);
        for f in &files {
            let linked: Vec<Flow> = match (direction, f.access) {
                (Direction::Upstream, Access::Read) => {
                    match lookup.writer_of(Some(&Version::of_event(f)), &f.path, Some((&command, f.id)))? {
                        Some(w) if w.command == id => {
                            lineage.own_reads.insert(f.id);
                            Vec::new()
                        }
                        Some(w) => {
                            vec![Flow { writer: w.command, written: w.event, reader: id, read: f.id, by: w.kind }]
                        }
                        None => Vec::new(),
                    }
                }
                (Direction::Downstream, Access::Write) => lookup
                    .readers_of_write(&command, f)?
                    .into_iter()
                    .map(|r| Flow { writer: id, written: f.id, reader: r.command, read: r.event, by: r.kind })
                    .collect(),
                _ => Vec::new(),
            };
            for flow in linked {
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

type Found = Rc<Vec<(CommandRow, Vec<FileRow>)>>;
type LookupKey = (Access, Vec<(u64, u64, HashParams)>, Option<Vec<u8>>);

/// A command and one of its events that matched, with how.
pub type Matched = (CommandRow, Vec<(FileRow, MatchKind)>);

/// The store's event lookups, each asked once per walk: a file read by a
/// hundred commands of the lineage costs one query.
pub struct Lookup<'s> {
    store: &'s Store,
    cache: HashMap<LookupKey, Found>,
    by_content: bool,
    include_own: bool,
}

impl<'s> Lookup<'s> {
    pub fn new(store: &'s Store) -> Lookup<'s> {
        Lookup::with_options(store, &WalkOptions::default())
    }

    pub fn with_options(store: &'s Store, opts: &WalkOptions) -> Lookup<'s> {
        Lookup { store, cache: HashMap::new(), by_content: opts.by_content, include_own: opts.include_own }
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

    /// Every event of `access` at `path` or with `version`'s content, by
    /// commands answers may show; newest command first.
    fn candidates(
        &mut self,
        access: Access,
        version: Option<&Version>,
        path: &[u8],
    ) -> Result<Vec<(CommandRow, FileRow)>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let keys = version.map(Version::content_keys).unwrap_or_default();
        let mut lists = vec![self.find(access, &[], Some(path))?];
        // No content to look up (gone, empty, unreadable): the path alone.
        if !keys.is_empty() {
            lists.push(self.find(access, &keys, None)?);
        }
        for found in &lists {
            for (c, files) in found.iter() {
                if !self.include_own && c.is_prov_own_work() {
                    continue;
                }
                for f in files {
                    if f.access == access && seen.insert(f.id) {
                        out.push((c.clone(), f.clone()));
                    }
                }
            }
        }
        out.sort_by_key(|(c, f)| std::cmp::Reverse((c.start_ns, c.id, f.id)));
        Ok(out)
    }

    /// The write that made `version` of `path` (None: the file is gone),
    /// as `reader` read it (its command and read event) or as it is now
    /// (`reader` None). `Path` or `Moved`; `Content` only when the walk
    /// follows content.
    pub fn writer_of(
        &mut self,
        version: Option<&Version>,
        path: &[u8],
        reader: Option<(&CommandRow, i64)>,
    ) -> Result<Option<Link>> {
        let before = |c: &CommandRow, w: &FileRow| match reader {
            None => true,
            Some((r, read)) if r.id == c.id => w.id < read,
            Some((r, _)) => c.start_ns <= r.start_ns,
        };
        let writes: Vec<(CommandRow, FileRow)> =
            self.candidates(Access::Write, version, path)?.into_iter().filter(|(c, w)| before(c, w)).collect();
        let link = |(c, w): &(CommandRow, FileRow), kind| Link { command: c.id, event: w.id, kind };
        let at_path: Vec<&(CommandRow, FileRow)> = writes.iter().filter(|(_, w)| w.path == path).collect();
        let Some(version) = version else {
            // Gone: its last recorded write.
            return Ok(at_path.first().map(|cw| link(cw, MatchKind::Path)));
        };
        // The write whose mtime is the one read, else the newest before the read.
        let exact = at_path.iter().find(|(_, w)| w.mtime_ns == version.mtime_ns && version.same_version(w));
        if let Some(cw) = exact.or(at_path.first()) {
            if version.same_version(&cw.1) {
                return Ok(Some(link(cw, MatchKind::Path)));
            }
        }
        let moved = writes.iter().find(|(_, w)| {
            w.path != path
                && w.mtime_ns == version.mtime_ns
                && version.same_content(w) == Some(true)
                && !copied_with_mtime(version, w)
        });
        if let Some(cw) = moved {
            return Ok(Some(link(cw, MatchKind::Moved)));
        }
        if self.by_content {
            // Not the reader's own write: a command does not read its input
            // from identical content it wrote elsewhere itself.
            let own = reader.map(|(r, _)| r.id);
            let twin = writes
                .iter()
                .find(|(c, w)| Some(c.id) != own && version.size > 0 && version.same_content(w) == Some(true));
            return Ok(twin.map(|cw| link(cw, MatchKind::Content)));
        }
        Ok(None)
    }

    /// Every command that wrote `path` or its content, each with its events
    /// that did and how they match the file as it is now (`version`; None:
    /// gone): its writer first, then earlier versions of the path, then
    /// identical content elsewhere; newest first within each.
    pub fn writers_of_file(&mut self, version: Option<&Version>, path: &[u8]) -> Result<Vec<Matched>> {
        let link = self.writer_of(version, path, None)?;
        let writes = self.candidates(Access::Write, version, path)?;
        let kinds = writes.into_iter().filter_map(|(c, w)| {
            let kind = match link {
                Some(l) if l.event == w.id => l.kind,
                _ if w.path == path => MatchKind::Earlier,
                _ if version.is_some_and(|v| v.size > 0 && v.same_content(&w) == Some(true)) => MatchKind::Content,
                _ => return None,
            };
            Some((c, w, kind))
        });
        Ok(group(kinds))
    }

    /// Every command that read `path` or its content, each with its events
    /// that did and how: this version here (`Path`), this version under its
    /// old name (`Moved`), another version here (`Earlier`), identical
    /// content elsewhere (`Content`).
    pub fn readers_of_file(&mut self, version: Option<&Version>, path: &[u8]) -> Result<Vec<Link>> {
        Ok(self
            .classify_readers(version, path)?
            .into_iter()
            .flat_map(|(c, events)| events.into_iter().map(move |(f, kind)| Link { command: c.id, event: f.id, kind }))
            .collect())
    }

    /// [`Lookup::readers_of_file`], grouped by command. A read saw this
    /// version when the upstream rule ties it to the write that made the
    /// file as it is now; without a recorded writer, when it saw the same
    /// content and mtime.
    pub fn classify_readers(&mut self, version: Option<&Version>, path: &[u8]) -> Result<Vec<Matched>> {
        let made_by = match version {
            Some(_) => self.writer_of(version, path, None)?.map(|l| l.event),
            None => None,
        };
        let reads = self.candidates(Access::Read, version, path)?;
        let mut kinds = Vec::with_capacity(reads.len());
        for (c, r) in reads {
            let same_version = match (version, made_by) {
                (None, _) => true,
                (Some(_), Some(w)) => {
                    self.writer_of(Some(&Version::of_event(&r)), &r.path, Some((&c, r.id)))?.map(|l| l.event) == Some(w)
                }
                (Some(v), None) => v.same_version(&r) && v.mtime_ns == r.mtime_ns,
            };
            let kind = match version {
                _ if r.path == path && same_version => MatchKind::Path,
                _ if r.path == path => MatchKind::Earlier,
                None => continue,
                Some(_) if same_version => MatchKind::Moved,
                Some(v) if v.size > 0 && v.same_content(&r) == Some(true) => MatchKind::Content,
                Some(_) => continue,
            };
            kinds.push((c, r, kind));
        }
        Ok(group(kinds.into_iter()))
    }

    /// The reads that `writer`'s event `written` explains: every read the
    /// upstream rule ties to it.
    pub fn readers_of_write(&mut self, writer: &CommandRow, written: &FileRow) -> Result<Vec<Link>> {
        let version = Version::of_event(written);
        let reads = self.candidates(Access::Read, Some(&version), &written.path)?;
        let mut out = Vec::new();
        for (c, r) in reads {
            if c.id == writer.id || c.start_ns < writer.start_ns {
                continue;
            }
            if let Some(w) = self.writer_of(Some(&Version::of_event(&r)), &r.path, Some((&c, r.id)))? {
                if w.event == written.id {
                    out.push(Link { command: c.id, event: r.id, kind: w.kind });
                }
            }
        }
        out.reverse();
        Ok(out)
    }
}

/// For the file on disk now: the write's old path holds another file with
/// this content and mtime, so it was copied keeping the mtime (`cp -p`),
/// not moved.
fn copied_with_mtime(version: &Version, w: &FileRow) -> bool {
    let Some(inode) = version.inode else { return false };
    let Some(old) = Version::on_disk(&w.path, &[w.hash_params]) else { return false };
    old.inode != Some(inode) && old.mtime_ns == w.mtime_ns && old.same_content(w) == Some(true)
}

/// (command, event, kind) triples, newest command first, grouped by
/// command and ordered by each command's strongest kind.
fn group(kinds: impl Iterator<Item = (CommandRow, FileRow, MatchKind)>) -> Vec<Matched> {
    let mut by_command: Vec<Matched> = Vec::new();
    let mut at: HashMap<i64, usize> = HashMap::new();
    for (c, f, kind) in kinds {
        match at.get(&c.id) {
            Some(&i) => by_command[i].1.push((f, kind)),
            None => {
                at.insert(c.id, by_command.len());
                by_command.push((c, vec![(f, kind)]));
            }
        }
    }
    for (_, events) in &mut by_command {
        events.sort_by_key(|(f, kind)| (*kind, f.id));
    }
    // Stable: newest first within a kind, as the candidates came.
    by_command.sort_by_key(|(_, events)| events[0].1);
    by_command
}

impl Lineage {
    /// The walk is of the file's last recorded version: something
    /// unrecorded changed it since.
    pub fn changed_since(&self) -> bool {
        self.start_kinds.first() == Some(&MatchKind::Earlier)
    }

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

    /// The links of the walk for a rebuild (see [`crate::plan`]): every
    /// flow, under the name its reader read; upstream the target under its
    /// name now, downstream every file written that no step read.
    pub fn plan_links(&self) -> Vec<crate::plan::PlanLink> {
        use crate::plan::PlanLink;
        let mut links: Vec<PlanLink> = self
            .flows
            .iter()
            .filter_map(|fl| {
                let (w, r) = (self.file(fl.writer, fl.written)?, self.file(fl.reader, fl.read)?);
                Some(PlanLink {
                    writer: fl.writer,
                    written: w.path.clone(),
                    reader: Some(fl.reader),
                    read: r.path.clone(),
                })
            })
            .collect();
        match self.direction {
            Direction::Upstream => {
                for &(c, f) in &self.start {
                    if let Some(w) = self.file(c, f) {
                        let read = self.target.path.clone();
                        links.push(PlanLink { writer: c, written: w.path.clone(), reader: None, read });
                    }
                }
            }
            Direction::Downstream => {
                for step in self.steps.values() {
                    for f in step.files.iter().filter(|f| f.access == Access::Write) {
                        if !self.flows.iter().any(|fl| fl.written == f.id) {
                            let (written, read) = (f.path.clone(), f.path.clone());
                            links.push(PlanLink { writer: step.command.id, written, reader: None, read });
                        }
                    }
                }
            }
        }
        links
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

    /// (access, path, hash, mtime) of a recorded event; size 1.
    type Event = (Access, &'static str, Option<u64>, i64);

    /// A store in a temporary directory with commands `(start, events)`;
    /// ids are 1, 2, … in order.
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
                env: None,
            };
            let id = store.begin_command(&begin).unwrap();
            let events: Vec<prov_model::FileEvent> = events
                .iter()
                .map(|&(access, path, hash, mtime_ns)| prov_model::FileEvent {
                    access,
                    path: path.as_bytes().to_vec(),
                    size: 1,
                    mtime_ns,
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

    /// The target as a version on disk would be (no inode: never checked
    /// against the file system).
    fn target(path: &str, hash: Option<u64>, mtime_ns: i64) -> Target {
        let now = hash.map(|h| Version {
            path: path.as_bytes().to_vec(),
            size: 1,
            mtime_ns,
            hashes: vec![(HashParams::default(), h)],
            inode: None,
        });
        Target { path: path.as_bytes().to_vec(), now }
    }

    fn ids(l: &Lineage) -> Vec<i64> {
        l.records().iter().map(|(c, _)| c.id).collect()
    }

    fn writers(store: &Store, t: &Target) -> Vec<(i64, &'static str)> {
        let mut lookup = Lookup::new(store);
        lookup
            .writers_of_file(t.now.as_ref(), &t.path)
            .unwrap()
            .iter()
            .map(|(c, events)| (c.id, events[0].1.as_str()))
            .collect()
    }

    #[test]
    fn a_diamond_is_walked_once_each_way_and_the_depth_limit_cuts() {
        use Access::*;
        let (store, dir) = store_with(
            "diamond",
            &[
                (10, &[(Write, "/w/a", Some(1), 10)]),
                (20, &[(Read, "/w/a", Some(1), 10), (Write, "/w/b", Some(2), 20)]),
                (30, &[(Read, "/w/a", Some(1), 10), (Write, "/w/c", Some(3), 30)]),
                (40, &[(Read, "/w/b", Some(2), 20), (Read, "/w/c", Some(3), 30), (Write, "/w/d", Some(4), 40)]),
                (50, &[(Write, "/w/unrelated", Some(4), 50)]),
            ],
        );
        let up = walk(&store, target("/w/d", Some(4), 40), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&up), vec![1, 2, 3, 4]);
        assert_eq!(up.flows.len(), 4, "a->b, a->c, b->d, c->d");
        assert!(up.flows.iter().all(|f| f.by == MatchKind::Path));
        assert_eq!(up.steps[&1].depth, 3);

        let down = walk(&store, target("/w/a", Some(1), 10), Direction::Downstream, None).unwrap();
        assert_eq!(ids(&down), vec![2, 3, 4]);

        let shallow = walk(&store, target("/w/d", Some(4), 40), Direction::Upstream, Some(2)).unwrap();
        assert_eq!(ids(&shallow), vec![2, 3, 4]);
        assert!(shallow.truncated());
        assert_eq!(shallow.cut.len(), 2, "both reads of /w/a");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn each_file_is_its_own_writers_and_twins_are_labelled() {
        use Access::*;
        let (store, dir) = store_with(
            "twins",
            &[
                // Two commands write the same content to two dirs.
                (10, &[(Write, "/A/count", Some(7), 10)]),
                (20, &[(Write, "/B/count", Some(7), 20)]),
                // A copy: reads A's, writes the same content elsewhere.
                (30, &[(Read, "/A/count", Some(7), 10), (Write, "/C/copy", Some(7), 30)]),
            ],
        );
        assert_eq!(
            writers(&store, &target("/A/count", Some(7), 10)),
            vec![(1, "path"), (3, "content"), (2, "content")]
        );
        assert_eq!(writers(&store, &target("/B/count", Some(7), 20))[0], (2, "path"));
        // Moved outside prov: same content and mtime elsewhere.
        assert_eq!(writers(&store, &target("/B/moved", Some(7), 20))[0], (2, "moved"));
        // An untraced twin: no writer, only content twins.
        let untraced = writers(&store, &target("/D/untraced", Some(7), 99));
        assert!(untraced.iter().all(|(_, k)| *k == "content"), "{untraced:?}");
        // The copy's lineage is the copy and A's writer, never B's.
        let up = walk(&store, target("/C/copy", Some(7), 30), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&up), vec![1, 3]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_pipeline_run_twice_reads_its_own_run() {
        use Access::*;
        let (store, dir) = store_with(
            "rerun",
            &[
                (10, &[(Write, "/p/raw", Some(1), 10)]),
                (20, &[(Read, "/p/raw", Some(1), 10), (Write, "/p/mid", Some(2), 20)]),
                (30, &[(Write, "/p/raw", Some(1), 30)]),
                (40, &[(Read, "/p/raw", Some(1), 30), (Write, "/p/mid", Some(2), 40)]),
                // A copy of the raw data, read elsewhere: identical content only.
                (50, &[(Read, "/q/raw", Some(1), 50)]),
            ],
        );
        let down = walk(&store, target("/p/raw", Some(1), 30), Direction::Downstream, None).unwrap();
        assert_eq!(ids(&down), vec![4]);
        let up = walk(&store, target("/p/mid", Some(2), 40), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&up), vec![3, 4]);
        let mut lookup = Lookup::new(&store);
        let readers: Vec<(i64, &str)> = lookup
            .classify_readers(target("/p/raw", Some(1), 30).now.as_ref(), b"/p/raw")
            .unwrap()
            .iter()
            .map(|(c, e)| (c.id, e[0].1.as_str()))
            .collect();
        assert_eq!(readers, vec![(4, "path"), (2, "earlier"), (5, "content")]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_last_write_before_the_read_decides() {
        use Access::*;
        let (store, dir) = store_with(
            "order",
            &[
                // The same content twice to one path: the second made it.
                (10, &[(Write, "/w/p", Some(7), 10)]),
                (20, &[(Write, "/w/p", Some(7), 20)]),
                (30, &[(Read, "/w/p", Some(7), 20), (Write, "/w/q", Some(8), 30)]),
                // /w/p rewritten by something unrecorded: no recorded write explains it.
                (40, &[(Read, "/w/p", Some(9), 35), (Write, "/w/r", Some(10), 40)]),
                // A writer after the reader never counts.
                (50, &[(Write, "/w/p", Some(9), 50)]),
                // Reads its own temp file, while step 1 wrote that content elsewhere.
                (60, &[(Write, "/t/tmp", Some(7), 60), (Read, "/t/tmp", Some(7), 60), (Write, "/t/out", Some(11), 60)]),
            ],
        );
        let q = walk(&store, target("/w/q", Some(8), 30), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&q), vec![2, 3]);
        let r = walk(&store, target("/w/r", Some(10), 40), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&r), vec![4]);
        assert_eq!(
            writers(&store, &target("/w/p", Some(7), 20)),
            vec![(2, "path"), (5, "earlier"), (1, "earlier"), (6, "content")]
        );
        let own = walk(&store, target("/t/out", Some(11), 60), Direction::Upstream, None).unwrap();
        assert_eq!(ids(&own), vec![6]);
        assert_eq!(own.own_reads.len(), 1);
        // Downstream of the first write of /w/p: nobody read that version.
        let mut lookup = Lookup::new(&store);
        let first = store.files_of(1).unwrap().remove(0);
        assert!(lookup.readers_of_write(&store.command(1).unwrap().unwrap(), &first).unwrap().is_empty());
        // A deleted target (no content known) is found by its path.
        let gone = walk(&store, Target { path: b"/w/q".to_vec(), now: None }, Direction::Upstream, None).unwrap();
        assert_eq!(gone.start.len(), 1);
        // With content links asked for, a twin is followed and labelled.
        let opts = WalkOptions { by_content: true, ..WalkOptions::default() };
        let twin = walk_with(&store, target("/x/twin", Some(11), 1), Direction::Upstream, &opts).unwrap();
        assert_eq!(twin.start_kinds, vec![MatchKind::Content]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
