//! A command's processes: stored once per program image, and the link from
//! each file event to the image that closed it (see the processes table).

use std::collections::HashMap;

use prov_model::ProcessRecord;
use rusqlite::params;

use crate::error::{Context, Result};
use crate::write::Writer;
use crate::{FileRow, Store};

/// A stored process image of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    pub id: i64,
    pub command_id: i64,
    pub record: ProcessRecord,
}

impl Store {
    pub fn add_processes(&mut self, id: i64, processes: &[ProcessRecord]) -> Result<()> {
        self.write_tx(|w| w.add_processes(id, processes))
    }

    /// A command's processes in the order they were seen.
    pub fn processes_of(&self, command_id: i64) -> Result<Vec<ProcessRow>> {
        self.conn
            .prepare_cached(
                "SELECT p.id, command_id, pid, ppid, exe, args, cwd, args_unknown, start_ns, end_ns, first_event,
                        exe_size, exe_mtime_ns, exe_hash, h.chunk_size, h.chunks
                 FROM processes p LEFT JOIN hash_params h ON h.id = p.exe_hash_params_id
                 WHERE command_id = ?1 ORDER BY first_event, p.id",
            )
            .and_then(|mut s| s.query_map([command_id], process_row)?.collect::<rusqlite::Result<Vec<_>>>())
            .ctx(&self.path, "querying a command's processes")
    }

    /// For each of `files` (events of command `command_id`), the index in
    /// `processes` (that command's `processes_of`) of the image that closed
    /// it, if known.
    pub fn process_of_events(
        &self,
        command_id: i64,
        files: &[FileRow],
        processes: &[ProcessRow],
    ) -> Result<Vec<Option<usize>>> {
        // An event's index among its command's events, from the runs.
        let runs: Vec<(i64, i64)> = self
            .conn
            .prepare_cached("SELECT first_id, last_id FROM event_runs WHERE command_id = ?1 ORDER BY first_id")
            .and_then(|mut s| s.query_map([command_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .ctx(&self.path, "reading a command's event runs")?;
        let mut before = Vec::with_capacity(runs.len());
        let mut n = 0u64;
        for &(first, last) in &runs {
            before.push(n);
            n += (last - first + 1) as u64;
        }
        let index_of = |id: i64| -> Option<u64> {
            let i = runs.partition_point(|&(first, _)| first <= id).checked_sub(1)?;
            let (first, last) = runs[i];
            (id <= last).then(|| before[i] + (id - first) as u64)
        };
        let mut by_pid: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
        for (i, p) in processes.iter().enumerate() {
            by_pid.entry(p.record.pid).or_default().push((p.record.first_event, i));
        }
        for images in by_pid.values_mut() {
            images.sort();
        }
        Ok(files
            .iter()
            .map(|f| {
                let images = by_pid.get(&f.pid?)?;
                let index = index_of(f.id)?;
                // The latest image of the pid seen before the event; an
                // event before any (a process seen first by that event's
                // close) belongs to its first.
                let k = images.partition_point(|&(first, _)| first <= index);
                Some(images[k.saturating_sub(1)].1)
            })
            .collect())
    }
}

fn process_row(r: &rusqlite::Row) -> rusqlite::Result<ProcessRow> {
    let unknown: Option<String> = r.get(7)?;
    let args: Option<Vec<u8>> = r.get(5)?;
    Ok(ProcessRow {
        id: r.get(0)?,
        command_id: r.get(1)?,
        record: ProcessRecord {
            pid: r.get(2)?,
            ppid: r.get(3)?,
            exe: r.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
            unknown: match (&args, unknown) {
                (None, None) => Some("not recorded".into()),
                (_, u) => u,
            },
            args: args.unwrap_or_default(),
            cwd: r.get::<_, Option<Vec<u8>>>(6)?.unwrap_or_default(),
            start_ns: r.get(8)?,
            end_ns: r.get(9)?,
            first_event: r.get::<_, i64>(10)? as u64,
            exe_file: crate::environment::exe_file(r, 11)?,
        },
    })
}

impl Writer<'_> {
    pub(crate) fn add_processes(&mut self, id: i64, processes: &[ProcessRecord]) -> Result<()> {
        self.command_must_exist(id)?;
        let mut exe_params = Vec::with_capacity(processes.len());
        for p in processes {
            exe_params.push(match &p.exe_file {
                Some(f) => Some(self.params_id(f.hash_params)?),
                None => None,
            });
        }
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO processes(command_id, pid, ppid, exe, args, cwd, args_unknown, start_ns, end_ns,
                                       first_event, exe_size, exe_mtime_ns, exe_hash, exe_hash_params_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .ctx(self.path, "preparing the process insert")?;
        for (p, exe_params) in processes.iter().zip(exe_params) {
            let exe = p.exe_file.as_ref();
            let bytes = |b: &Vec<u8>| (!b.is_empty()).then_some(b.clone());
            let args = p.unknown.is_none().then(|| p.args.clone());
            insert
                .execute(params![
                    id,
                    p.pid,
                    p.ppid,
                    bytes(&p.exe),
                    args,
                    bytes(&p.cwd),
                    p.unknown,
                    p.start_ns,
                    p.end_ns,
                    i64::try_from(p.first_event).unwrap_or(i64::MAX),
                    exe.map(|f| f.size as i64), // u64 bit pattern
                    exe.map(|f| f.mtime_ns),
                    exe.and_then(|f| f.hash).map(|h| h as i64), // u64 bit pattern
                    exe_params
                ])
                .ctx(self.path, "inserting a process")?;
        }
        // A record pushed before its processes came (its last process
        // outlived the command) is to be pushed again: the central store's
        // push takes its copy back and stores it whole (prov-sync).
        if !processes.is_empty() {
            let unpushed = self
                .conn
                .prepare_cached("DELETE FROM sync_pushed WHERE uuid = (SELECT uuid FROM commands WHERE id = ?1)")
                .and_then(|mut s| s.execute([id]))
                .ctx(self.path, "noting processes for the central store")?;
            if unpushed > 0 {
                crate::sync::lower_push_mark(self.conn, self.path, &[id])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{begin, event, open, TempDir};
    use prov_model::Access;

    fn process(pid: u32, first_event: u64, args: Option<&[u8]>) -> ProcessRecord {
        ProcessRecord {
            pid,
            ppid: Some(1),
            exe: b"/usr/bin/cc".to_vec(),
            args: args.unwrap_or_default().to_vec(),
            cwd: b"/w".to_vec(),
            unknown: args.is_none().then(|| "gone".to_string()),
            start_ns: 5,
            end_ns: None,
            first_event,
            exe_file: None,
        }
    }

    #[test]
    fn each_event_belongs_to_the_image_of_its_pid_current_when_it_was_recorded() {
        let dir = TempDir::new("processes");
        let mut s = open(&dir);
        let a = s.begin_command(&begin("a", 1)).unwrap();
        let b = s.begin_command(&begin("b", 2)).unwrap();
        let with_pid = |path: &[u8], pid| prov_model::FileEvent { pid: Some(pid), ..event(Access::Write, path, 1, 1) };
        // Two commands' batches interleave: a's events are two runs.
        s.add_events(a, &[with_pid(b"/a0", 10), with_pid(b"/a1", 11)]).unwrap();
        s.add_events(b, &[with_pid(b"/b0", 10)]).unwrap();
        s.add_events(a, &[with_pid(b"/a2", 10), with_pid(b"/a3", 12)]).unwrap();
        // Pid 10 ran sh, then (from a's third event on) cc.
        let sh = process(10, 0, Some(b"sh\0-c\0cc x\0"));
        let cc = process(10, 2, Some(b"cc\0x\0"));
        s.add_processes(a, &[sh.clone(), process(11, 1, None), cc.clone()]).unwrap();
        let procs = s.processes_of(a).unwrap();
        assert_eq!(procs.len(), 3);
        assert_eq!(procs[1].record.unknown.as_deref(), Some("gone"));
        assert_eq!(procs[2].record.argv().unwrap(), [b"cc".as_slice(), b"x"]);
        let files = s.files_of(a).unwrap();
        let owners = s.process_of_events(a, &files, &procs).unwrap();
        let owner_of = |path: &[u8]| {
            let i = files.iter().position(|f| f.path == path).unwrap();
            owners[i].map(|o| procs[o].record.args.clone())
        };
        assert_eq!(owner_of(b"/a0"), Some(sh.args));
        assert_eq!(owner_of(b"/a1"), Some(Vec::new()));
        assert_eq!(owner_of(b"/a2"), Some(cc.args));
        assert_eq!(owner_of(b"/a3"), None, "pid 12 has no process");
        // Deleting the command deletes its processes.
        s.delete_commands(&[a]).unwrap();
        assert!(s.processes_of(a).unwrap().is_empty());
        assert!(s.processes_of(b).unwrap().is_empty());
    }
}
