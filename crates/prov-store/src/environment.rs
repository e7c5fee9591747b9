//! The environments commands ran in: stored once per distinct environment
//! (the environments table), each command naming its own, and read back
//! with the executables its processes ran.

use prov_model::env::{Environment, GitState};
use prov_model::{ExeFile, HashParams};
use rusqlite::{params, OptionalExtension};

use crate::error::{Context, Result};
use crate::write::Writer;
use crate::Reader;

/// One program a command ran, as its processes' executed files show it:
/// each distinct (path, file) once, in the order first run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executable {
    /// The executed file, raw bytes; empty when not shown.
    pub path: Vec<u8>,
    /// Its size, mtime and partial hash when it ran; None: not recorded.
    pub file: Option<ExeFile>,
}

impl Executable {
    /// The executed file as a read of it by command `command_id` (the
    /// version that ran); None when the file was not recorded.
    pub fn as_file_row(&self, command_id: i64) -> Option<crate::FileRow> {
        let f = self.file.filter(|_| !self.path.is_empty())?;
        Some(crate::FileRow {
            id: 0,
            command_id,
            access: prov_model::Access::Read,
            path: self.path.clone(),
            size: f.size,
            mtime_ns: f.mtime_ns,
            hash: f.hash,
            hash_params: f.hash_params,
            pid: None,
        })
    }
}

/// What is known of the environment one command ran in: the stored
/// environment with its id (commands that share one ran in the same), and
/// the programs it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandEnvironment {
    pub env: Option<(i64, Environment)>,
    pub executables: Vec<Executable>,
}

impl Reader {
    /// Command `command_id`'s environment and programs.
    pub fn command_environment(&self, command_id: i64) -> Result<CommandEnvironment> {
        let env = match (self.environment_id_of(command_id)?, self.environment_of(command_id)?) {
            (Some(id), Some(env)) => Some((id, env)),
            _ => None,
        };
        Ok(CommandEnvironment { env, executables: self.executables_of(command_id)? })
    }

    /// The environment command `command_id` ran in; None when none was
    /// recorded (or no such command).
    pub fn environment_of(&self, command_id: i64) -> Result<Option<Environment>> {
        self.conn
            .prepare_cached(
                "SELECT e.vars, e.git_root, e.git_commit, e.git_branch, e.git_dirty
                 FROM commands c JOIN environments e ON e.id = c.env_id WHERE c.id = ?1",
            )
            .and_then(|mut s| s.query_row([command_id], environment_row).optional())
            .ctx(&self.path, "reading a command's environment")
    }

    /// The environment's row id of command `command_id`: commands with the
    /// same id ran in the same environment.
    pub fn environment_id_of(&self, command_id: i64) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT env_id FROM commands WHERE id = ?1")
            .and_then(|mut s| s.query_row([command_id], |r| r.get(0)).optional())
            .map(Option::flatten)
            .ctx(&self.path, "reading a command's environment")
    }

    /// How many distinct environments are stored.
    pub fn environment_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM environments", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .ctx(&self.path, "counting environments")
    }

    /// The executables command `command_id`'s processes ran.
    pub fn executables_of(&self, command_id: i64) -> Result<Vec<Executable>> {
        let mut found: Vec<Executable> = Vec::new();
        for p in self.processes_of(command_id)? {
            let e = Executable { path: p.record.exe, file: p.record.exe_file };
            if !found.contains(&e) {
                found.push(e);
            }
        }
        Ok(found)
    }
}

fn environment_row(r: &rusqlite::Row) -> rusqlite::Result<Environment> {
    let root: Option<Vec<u8>> = r.get(1)?;
    Ok(Environment {
        vars: r.get(0)?,
        git: match root {
            Some(root) => Some(GitState {
                root,
                commit: r.get(2)?,
                branch: r.get(3)?,
                dirty: r.get::<_, Option<i64>>(4)?.map(|d| d != 0),
            }),
            None => None,
        },
    })
}

/// The executed file's columns from `first` on (size, mtime, hash, chunk
/// size, chunks), as processes_of selects them.
pub(crate) fn exe_file(r: &rusqlite::Row, first: usize) -> rusqlite::Result<Option<ExeFile>> {
    let size: Option<i64> = r.get(first)?;
    let mtime_ns: Option<i64> = r.get(first + 1)?;
    let hash: Option<i64> = r.get(first + 2)?;
    let chunk_size: Option<u32> = r.get(first + 3)?;
    let chunks: Option<u32> = r.get(first + 4)?;
    Ok(match (size, mtime_ns, chunk_size, chunks) {
        (Some(size), Some(mtime_ns), Some(chunk_size), Some(chunks)) => Some(ExeFile {
            size: size as u64,
            mtime_ns,
            hash: hash.map(|h| h as u64),
            hash_params: HashParams { chunk_size, chunks },
        }),
        _ => None,
    })
}

impl Writer<'_> {
    /// The id of `env`'s row, stored now if it is new.
    pub(crate) fn environment_id(&mut self, env: &Environment) -> Result<i64> {
        let digest = env.digest().to_vec();
        let found = self
            .conn
            .prepare_cached("SELECT id FROM environments WHERE digest = ?1")
            .and_then(|mut s| s.query_row([&digest], |r| r.get(0)).optional())
            .ctx(self.path, "looking up an environment")?;
        if let Some(id) = found {
            return Ok(id);
        }
        let git = env.git.as_ref();
        self.conn
            .prepare_cached(
                "INSERT INTO environments(digest, vars, git_root, git_commit, git_branch, git_dirty)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.insert(params![
                    digest,
                    env.vars,
                    git.map(|g| &g.root),
                    git.and_then(|g| g.commit.as_deref()),
                    git.and_then(|g| g.branch.as_deref()),
                    git.and_then(|g| g.dirty).map(i64::from)
                ])
            })
            .ctx(self.path, "storing an environment")
    }

    /// Sets command `id`'s environment, unless it has ended.
    pub(crate) fn set_environment(&mut self, id: i64, env: &Environment) -> Result<()> {
        let env_id = self.environment_id(env)?;
        self.conn
            .prepare_cached("UPDATE commands SET env_id = ?2 WHERE id = ?1 AND end_ns IS NULL")
            .and_then(|mut s| s.execute([id, env_id]))
            .ctx(self.path, "setting a command's environment")
            .map(drop)
    }
}

/// Deletes the environments no command refers to any more (after a
/// deletion of commands).
pub(crate) fn delete_unreferenced(conn: &rusqlite::Connection, path: &std::path::Path) -> Result<u64> {
    conn.execute("DELETE FROM environments WHERE id NOT IN (SELECT env_id FROM commands WHERE env_id IS NOT NULL)", [])
        .map(|n| n as u64)
        .ctx(path, "deleting environments no command uses")
}

/// The SQL condition (on commands `c`) and its parameter for "variable
/// `name` has `value`": the entry `NAME=VALUE` whole, between NULs.
pub(crate) fn has_variable(name: &[u8], value: &[u8]) -> (&'static str, Vec<u8>) {
    let mut entry = vec![0];
    entry.extend_from_slice(name);
    entry.push(b'=');
    entry.extend_from_slice(value);
    entry.push(0);
    ("c.env_id IN (SELECT e.id FROM environments e WHERE instr(x'00' || e.vars, ?) > 0)", entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{begin, open, TempDir};
    use crate::{CommandFilter, Store};
    use prov_model::CommandBegin;

    fn env(vars: &str) -> Environment {
        Environment { vars: vars.split(' ').flat_map(|e| e.bytes().chain([0])).collect(), git: None }
    }

    #[test]
    fn one_row_per_distinct_environment() {
        let dir = TempDir::new("env-dedup");
        let mut s = open(&dir);
        let slurm = env("PATH=/usr/bin SLURM_JOB_ID=4242");
        let mut ids = Vec::new();
        for i in 0..50 {
            let e = if i % 10 == 9 { env("PATH=/usr/bin SLURM_JOB_ID=7") } else { slurm.clone() };
            ids.push(s.begin_command(&CommandBegin { env: Some(Box::new(e)), ..begin(&format!("u{i}"), i) }).unwrap());
        }
        assert_eq!(s.environment_count().unwrap(), 2);
        assert_eq!(s.environment_of(ids[0]).unwrap(), Some(slurm.clone()));
        assert_eq!(s.environment_of(ids[0]).unwrap().unwrap().get(b"SLURM_JOB_ID"), Some(&b"4242"[..]));
        let filter = |name: &str, value: &str| CommandFilter {
            env: vec![(name.as_bytes().to_vec(), value.as_bytes().to_vec())],
            ..Default::default()
        };
        let sel = crate::Selection { command: filter("SLURM_JOB_ID", "4242"), ..Default::default() };
        assert_eq!(s.select(&sel).unwrap().len(), 45);
        // A value is matched whole, not as a prefix.
        let sel = crate::Selection { command: filter("SLURM_JOB_ID", "424"), ..Default::default() };
        assert!(s.select(&sel).unwrap().is_empty());
        s.delete_commands(&ids[..9]).unwrap();
        assert_eq!(s.environment_count().unwrap(), 2);
        s.delete_commands(&ids[9..]).unwrap();
        assert_eq!(s.environment_count().unwrap(), 0);
    }

    /// Bytes the pages of the database use (dbstat), all tables and indexes.
    fn used_bytes(s: &Store) -> i64 {
        s.conn.query_row("SELECT sum(pgsize - unused) FROM dbstat", [], |r| r.get(0)).unwrap()
    }

    /// What recording the environment costs a history of 1 000 commands
    /// run in one environment (a typical one: PATH, a Conda environment,
    /// locale, a Slurm job): at most 2 bytes per command, its row included.
    #[test]
    fn an_environment_costs_at_most_two_bytes_per_command() {
        const N: i64 = 1000;
        let slurm = env("CONDA_DEFAULT_ENV=analysis CONDA_PREFIX=/home/u/miniconda3/envs/analysis LANG=en_US.UTF-8 \
             LD_LIBRARY_PATH=/opt/cuda/lib64 OMP_NUM_THREADS=8 \
             PATH=/home/u/miniconda3/envs/analysis/bin:/home/u/.local/bin:/usr/local/bin:/usr/bin:/bin \
             SLURM_CPUS_PER_TASK=8 SLURM_JOB_ID=4242 SLURM_JOB_NAME=align SLURM_JOB_NODELIST=node07 \
             SLURM_NTASKS=1 SLURM_SUBMIT_DIR=/home/u/project");
        let fill = |with: Option<&Environment>| {
            let dir = TempDir::new(if with.is_some() { "env-cost-with" } else { "env-cost-without" });
            let mut s = open(&dir);
            for i in 0..N {
                s.begin_command(&CommandBegin { env: with.cloned().map(Box::new), ..begin(&format!("u{i}"), i) })
                    .unwrap();
            }
            (used_bytes(&s), dir)
        };
        let (without, _a) = fill(None);
        let (with, _b) = fill(Some(&slurm));
        // Both pay the column's header byte; a history without the column
        // had not: counted here.
        let per_command = (with - without) as f64 / N as f64 + 1.0;
        eprintln!(
            "environment: {per_command:.2} bytes per command over {N} commands ({} bytes of variables)",
            slurm.vars.len()
        );
        assert!(per_command <= 2.0, "{per_command:.2} bytes per command");
    }
}
