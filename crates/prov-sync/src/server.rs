//! The central store's schema. Everything lives in schema `prov`, owned by
//! the role that ran the migrations (the administrator's `prov_owner`, see
//! docs/cluster-store.md). Users (members of role `prov_user`) have no
//! INSERT, UPDATE or DELETE right on any table: they push through the
//! SECURITY DEFINER functions below, which stamp every row with the
//! session's login role, and read through row-level security, which shows a
//! role its own rows and those an administrator granted to one of its
//! groups (`prov.read_grants`: a role and a directory). So privacy holds
//! for any SQL a user writes, not only for prov's.
//!
//! `MIGRATIONS` is append-only, like the journal's. The first client of a
//! new version whose role owns the schema applies them, in one transaction
//! under an advisory lock: concurrent clients wait and then see the new
//! version.

use crate::{Central, Result, SyncError};

/// (version, sql), applied in order.
const MIGRATIONS: &[(i32, &str)] = &[(1, MIGRATION_1), (2, MIGRATION_2), (3, MIGRATION_3), (4, MIGRATION_4)];

/// The newest server schema this build knows.
pub const SERVER_SCHEMA: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// pg_advisory_xact_lock key of migrations ("prov" in ASCII).
const MIGRATION_LOCK: i64 = 0x7072_6f76;

const MIGRATION_1: &str = r#"
-- The group role of prov's users: GRANT prov_user TO alice.
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'prov_user') THEN
        CREATE ROLE prov_user NOLOGIN;
    END IF;
END $$;

-- One row per record (a command), keyed by the uuid the journal gave it:
-- pushing a record twice finds it there. owner is the login role that
-- pushed it (set by push_command, never by the client). inserted is the
-- transaction that stored it: a cache pulls the rows of the transactions
-- that finished since its last pull (see pull.rs), whatever the records'
-- clocks said.
CREATE TABLE prov.commands(
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uuid uuid NOT NULL UNIQUE,
    inserted xid8 NOT NULL DEFAULT pg_current_xact_id(),
    start_ns bigint NOT NULL,
    end_ns bigint,
    seq bigint NOT NULL,
    exit_status integer,
    owner text NOT NULL,
    session text NOT NULL,
    host text NOT NULL,
    user_name text NOT NULL,
    shell text NOT NULL,
    text bytea NOT NULL,
    cwd bytea NOT NULL,
    -- queue_overflows, unreadable, denied, dropped_read_limit,
    -- dropped_write_limit, unobserved_setuid, unmarked_mounts,
    -- nested_namespaces (a record pushed by an older prov has fewer)
    counters bigint[] NOT NULL,
    incomplete text,
    untraced text,
    -- The hash parameters of the record's events, as (chunk_size, chunks)
    -- pairs; an event names its pair by index (nearly always 0).
    hash_params integer[] NOT NULL
);
-- pull: the rows stored since a transaction horizon.
CREATE INDEX commands_inserted ON prov.commands(inserted);
-- a user's history by time, on the server.
CREATE INDEX commands_owner_start ON prov.commands(owner, start_ns);

-- The directories of a record's events, each once per record: an event
-- names its directory by index. Per record rather than shared between
-- users, so that row-level security covers them as it covers events.
CREATE TABLE prov.command_dirs(
    command_id bigint NOT NULL,
    idx integer NOT NULL,
    path bytea NOT NULL,
    PRIMARY KEY (command_id, idx)
);
-- by-path lookups on the server (a hash index: 4 bytes a key, any length).
CREATE INDEX command_dirs_path ON prov.command_dirs USING hash (path);

-- One row per file event, the bulk of the store: fixed-width columns first
-- (no alignment padding), the name last. About 90 bytes a row with its
-- header; benches/README.md has the measured bytes per event.
CREATE TABLE prov.file_events(
    command_id bigint NOT NULL,
    size bigint NOT NULL,
    mtime_ns bigint NOT NULL,
    hash bigint,
    dir_idx integer NOT NULL,
    pid integer,
    params smallint NOT NULL,
    access smallint NOT NULL,   -- 0 read, 1 write
    name bytea NOT NULL
);
-- pull and a record's files (deduplicated by btree: a few bytes an event).
CREATE INDEX file_events_command ON prov.file_events(command_id);
-- by-content lookups (lineage across hosts on the server).
CREATE INDEX file_events_hash ON prov.file_events(hash) WHERE hash IS NOT NULL;

-- Archived script contents, once per owner and content.
CREATE TABLE prov.archive_blobs(
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner text NOT NULL,
    digest bytea NOT NULL,
    size bigint NOT NULL,
    content bytea NOT NULL,
    UNIQUE (owner, digest, size)
);
CREATE TABLE prov.archived_files(
    command_id bigint NOT NULL,
    path bytea NOT NULL,
    mode integer NOT NULL,
    mtime_ns bigint NOT NULL,
    blob_id bigint NOT NULL
);
CREATE INDEX archived_files_command ON prov.archived_files(command_id);
CREATE INDEX archived_files_blob ON prov.archived_files(blob_id);

-- Records their owner deleted (prov delete): caches drop them at their
-- next pull. Only uuids; readable by every user.
CREATE TABLE prov.deleted(
    uuid uuid PRIMARY KEY,
    deleted xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX deleted_at ON prov.deleted(deleted);

-- An administrator's grant: members of grantee may read the records run
-- in prefix or below it (their working directory), e.g. a project's group
-- and /project/X. Absolute, without a trailing slash.
CREATE TABLE prov.read_grants(
    grantee name NOT NULL,
    prefix bytea NOT NULL CHECK (
        substring(prefix FROM 1 FOR 1) = '\x2f'::bytea
        AND length(prefix) > 1
        AND substring(prefix FROM length(prefix)) <> '\x2f'::bytea),
    PRIMARY KEY (grantee, prefix)
);

-- Row-level security: a role reads its own records and the granted ones;
-- everything else of a record follows its command row.
ALTER TABLE prov.commands ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.commands FOR SELECT USING (
    owner = current_user
    OR EXISTS (
        SELECT 1 FROM prov.read_grants g
        WHERE pg_has_role(current_user, g.grantee, 'MEMBER')
          AND (cwd = g.prefix
               OR substring(cwd FROM 1 FOR length(g.prefix) + 1) = g.prefix || '\x2f'::bytea)));
ALTER TABLE prov.command_dirs ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.command_dirs FOR SELECT
    USING (EXISTS (SELECT 1 FROM prov.commands c WHERE c.id = command_id));
ALTER TABLE prov.file_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.file_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM prov.commands c WHERE c.id = command_id));
ALTER TABLE prov.archived_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.archived_files FOR SELECT
    USING (EXISTS (SELECT 1 FROM prov.commands c WHERE c.id = command_id));
ALTER TABLE prov.archive_blobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.archive_blobs FOR SELECT
    USING (owner = current_user OR EXISTS (SELECT 1 FROM prov.archived_files a WHERE a.blob_id = id));

-- Only the transaction that stored a record may add to it: a record pushed
-- again (its uuid known) gets nothing twice, and nobody adds to another's.
CREATE FUNCTION prov.check_new(p_command bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM prov.commands WHERE id = p_command AND owner = session_user
                   AND inserted = pg_current_xact_id()) THEN
        RAISE EXCEPTION 'record % was not stored by this transaction of %', p_command, session_user;
    END IF;
END $$;

-- Stores a record's command row and directories; returns its id, or NULL
-- when a record of this uuid is already stored (then nothing is changed).
CREATE FUNCTION prov.push_command(
    p_uuid uuid, p_session text, p_seq bigint, p_text bytea, p_cwd bytea, p_host text,
    p_user text, p_shell text, p_start bigint, p_end bigint, p_exit integer,
    p_counters bigint[], p_incomplete text, p_untraced text, p_hash_params integer[],
    p_dirs bytea[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    new_id bigint;
BEGIN
    INSERT INTO prov.commands(uuid, owner, session, seq, text, cwd, host, user_name, shell,
                              start_ns, end_ns, exit_status, counters, incomplete, untraced,
                              hash_params)
    VALUES (p_uuid, session_user, p_session, p_seq, p_text, p_cwd, p_host, p_user, p_shell,
            p_start, p_end, p_exit, p_counters, p_incomplete, p_untraced, p_hash_params)
    ON CONFLICT (uuid) DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NOT NULL THEN
        INSERT INTO prov.command_dirs(command_id, idx, path)
        SELECT new_id, (t.i - 1)::integer, t.d FROM unnest(p_dirs) WITH ORDINALITY AS t(d, i);
    END IF;
    RETURN new_id;
END $$;

-- A batch of a new record's events, as parallel arrays (one round trip and
-- one INSERT for thousands of rows).
CREATE FUNCTION prov.push_events(
    p_command bigint, p_dir integer[], p_name bytea[], p_access smallint[], p_size bigint[],
    p_mtime bigint[], p_hash bigint[], p_params smallint[], p_pid integer[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM prov.check_new(p_command);
    INSERT INTO prov.file_events(command_id, size, mtime_ns, hash, dir_idx, pid, params, access, name)
    SELECT p_command, s, m, h, d, p, pa, a, n
    FROM unnest(p_size, p_mtime, p_hash, p_dir, p_pid, p_params, p_access, p_name)
        AS t(s, m, h, d, p, pa, a, n);
END $$;

-- One archived file of a new record; its content is stored once per owner.
CREATE FUNCTION prov.push_archived(
    p_command bigint, p_path bytea, p_mode integer, p_mtime bigint, p_digest bytea,
    p_content bytea) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    blob bigint;
BEGIN
    PERFORM prov.check_new(p_command);
    INSERT INTO prov.archive_blobs(owner, digest, size, content)
    VALUES (session_user, p_digest, length(p_content), p_content)
    ON CONFLICT (owner, digest, size) DO NOTHING
    RETURNING id INTO blob;
    IF blob IS NULL THEN
        SELECT id INTO blob FROM prov.archive_blobs
        WHERE owner = session_user AND digest = p_digest AND size = length(p_content);
    END IF;
    INSERT INTO prov.archived_files(command_id, path, mode, mtime_ns, blob_id)
    VALUES (p_command, p_path, p_mode, p_mtime, blob);
END $$;

-- Removes records by id with everything of them, leaving a tombstone for
-- the caches; then the archived contents nothing refers to any more.
CREATE FUNCTION prov.remove(p_ids bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    WITH gone AS (
        DELETE FROM prov.commands WHERE id = ANY(p_ids) RETURNING id, uuid
    ), t AS (
        INSERT INTO prov.deleted(uuid) SELECT uuid FROM gone ON CONFLICT DO NOTHING
    ), e AS (
        DELETE FROM prov.file_events WHERE command_id IN (SELECT id FROM gone)
    ), d AS (
        DELETE FROM prov.command_dirs WHERE command_id IN (SELECT id FROM gone)
    ), a AS (
        DELETE FROM prov.archived_files WHERE command_id IN (SELECT id FROM gone)
    )
    SELECT count(*) INTO n FROM gone;
    DELETE FROM prov.archive_blobs b
        WHERE NOT EXISTS (SELECT 1 FROM prov.archived_files a WHERE a.blob_id = b.id);
    RETURN n;
END $$;

-- prov delete: removes the caller's own records of these uuids (others'
-- are left alone); returns how many.
CREATE FUNCTION prov.delete_commands(p_uuids uuid[]) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT prov.remove(array(SELECT id FROM prov.commands WHERE uuid = ANY(p_uuids) AND owner = session_user));
$$;

-- The administrator's retention (the owner's only: users cannot run it):
-- every user's records that started before p_before_ns.
CREATE FUNCTION prov.expire(p_before_ns bigint) RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT prov.remove(array(SELECT id FROM prov.commands WHERE start_ns < p_before_ns));
$$;

REVOKE ALL ON SCHEMA prov FROM PUBLIC;
GRANT USAGE ON SCHEMA prov TO prov_user;
GRANT SELECT ON ALL TABLES IN SCHEMA prov TO prov_user;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA prov FROM PUBLIC;
GRANT EXECUTE ON FUNCTION prov.push_command, prov.push_events, prov.push_archived,
    prov.delete_commands TO prov_user;
"#;

/// The process table of a record (the journal's migration 4).
const MIGRATION_2: &str = r#"
-- One row per program image that ran in a record, as in the journal: idx
-- is its place in the journal's order, first_event how many of the
-- record's events came before it was seen (in the journal's order).
CREATE TABLE prov.processes(
    command_id bigint NOT NULL,
    first_event bigint NOT NULL,
    start_ns bigint NOT NULL,
    end_ns bigint,
    idx integer NOT NULL,
    pid integer NOT NULL,
    ppid integer,
    exe bytea,
    args bytea,      -- NUL-terminated arguments; NULL: unknown (args_unknown says why)
    cwd bytea,
    args_unknown text,
    PRIMARY KEY (command_id, idx)
);
ALTER TABLE prov.processes ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.processes FOR SELECT
    USING (EXISTS (SELECT 1 FROM prov.commands c WHERE c.id = command_id));
GRANT SELECT ON prov.processes TO prov_user;

-- The server keeps no order of a record's events, so an event names its
-- process itself: in file_events.params, the hash parameters' index is the
-- low 8 bits, and the high bits are which image of the event's pid closed
-- it (0 the first, in first_event order). No byte more per event; a pid
-- with more than 127 images gives the rest to its 128th.
COMMENT ON COLUMN prov.file_events.params IS
    'low 8 bits: index in the record''s hash_params pairs; high bits: the image of pid that closed it (0: first)';

-- A new record's processes, as parallel arrays in the journal's order.
CREATE FUNCTION prov.push_processes(
    p_command bigint, p_pid integer[], p_ppid integer[], p_exe bytea[], p_args bytea[], p_cwd bytea[],
    p_unknown text[], p_start bigint[], p_end bigint[], p_first bigint[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM prov.check_new(p_command);
    INSERT INTO prov.processes(command_id, idx, first_event, start_ns, end_ns, pid, ppid, exe, args, cwd,
                               args_unknown)
    SELECT p_command, (t.i - 1)::integer, f, s, e, p, pp, x, a, c, u
    FROM unnest(p_pid, p_ppid, p_exe, p_args, p_cwd, p_unknown, p_start, p_end, p_first)
        WITH ORDINALITY AS t(p, pp, x, a, c, u, s, e, f, i);
END $$;

-- prov.remove as before, and the records' processes with them.
CREATE OR REPLACE FUNCTION prov.remove(p_ids bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    WITH gone AS (
        DELETE FROM prov.commands WHERE id = ANY(p_ids) RETURNING id, uuid
    ), t AS (
        INSERT INTO prov.deleted(uuid) SELECT uuid FROM gone ON CONFLICT DO NOTHING
    ), e AS (
        DELETE FROM prov.file_events WHERE command_id IN (SELECT id FROM gone)
    ), d AS (
        DELETE FROM prov.command_dirs WHERE command_id IN (SELECT id FROM gone)
    ), a AS (
        DELETE FROM prov.archived_files WHERE command_id IN (SELECT id FROM gone)
    ), p AS (
        DELETE FROM prov.processes WHERE command_id IN (SELECT id FROM gone)
    )
    SELECT count(*) INTO n FROM gone;
    DELETE FROM prov.archive_blobs b
        WHERE NOT EXISTS (SELECT 1 FROM prov.archived_files a WHERE a.blob_id = b.id);
    RETURN n;
END $$;

-- Many small records in one call (one round trip and four set-based
-- INSERTs for a whole transaction's worth, instead of two calls a record):
-- the records' columns as parallel arrays (counters seven a record,
-- hash_params pairs from p_params_from for p_params_len values), their
-- directories and events each with the record's place (1-based) in the
-- arrays. Returns each record's new id, NULL where its uuid was stored
-- already (then nothing of it is added); processes and archived files
-- follow through push_processes and push_archived.
CREATE FUNCTION prov.push_records(
    p_uuid uuid[], p_session text[], p_seq bigint[], p_text bytea[], p_cwd bytea[], p_host text[],
    p_user text[], p_shell text[], p_start bigint[], p_end bigint[], p_exit integer[],
    p_counters bigint[], p_incomplete text[], p_untraced text[], p_hash_params integer[],
    p_params_from integer[], p_params_len integer[],
    p_dir_rec integer[], p_dir_idx integer[], p_dir bytea[],
    p_ev_rec integer[], p_ev_dir integer[], p_name bytea[], p_access smallint[], p_size bigint[],
    p_mtime bigint[], p_hash bigint[], p_params smallint[], p_pid integer[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ids bigint[];
BEGIN
    WITH input AS (
        SELECT * FROM unnest(p_uuid, p_session, p_seq, p_text, p_cwd, p_host, p_user, p_shell, p_start,
                             p_end, p_exit, p_incomplete, p_untraced, p_params_from, p_params_len)
            WITH ORDINALITY AS t(uuid, session, seq, text, cwd, host, user_name, shell, start_ns, end_ns,
                                 exit_status, incomplete, untraced, params_from, params_len, rec)
    ), stored AS (
        INSERT INTO prov.commands(uuid, owner, session, seq, text, cwd, host, user_name, shell, start_ns,
                                  end_ns, exit_status, counters, incomplete, untraced, hash_params)
        SELECT uuid, session_user, session, seq, text, cwd, host, user_name, shell, start_ns, end_ns,
               exit_status, p_counters[(rec - 1) * 7 + 1 : rec * 7], incomplete, untraced,
               coalesce(p_hash_params[params_from : params_from + params_len - 1], '{}')
        FROM input ORDER BY rec
        ON CONFLICT (uuid) DO NOTHING
        RETURNING id, uuid
    )
    SELECT array_agg(stored.id ORDER BY input.rec) INTO ids
    FROM input LEFT JOIN stored ON stored.uuid = input.uuid;
    INSERT INTO prov.command_dirs(command_id, idx, path)
    SELECT ids[r], i, d FROM unnest(p_dir_rec, p_dir_idx, p_dir) AS t(r, i, d) WHERE ids[r] IS NOT NULL;
    INSERT INTO prov.file_events(command_id, size, mtime_ns, hash, dir_idx, pid, params, access, name)
    SELECT ids[r], s, m, h, d, p, pa, a, n
    FROM unnest(p_ev_rec, p_size, p_mtime, p_hash, p_ev_dir, p_pid, p_params, p_access, p_name)
        AS t(r, s, m, h, d, p, pa, a, n)
    WHERE ids[r] IS NOT NULL;
    RETURN ids;
END $$;

REVOKE EXECUTE ON FUNCTION prov.push_processes, prov.push_records FROM PUBLIC;
GRANT EXECUTE ON FUNCTION prov.push_processes, prov.push_records TO prov_user;
"#;

/// Reads the server's schema version; migrates an older one when `migrate`
/// is set (or when this role may: the first client of a new version).
pub(crate) fn ensure_schema(central: &mut Central, migrate: bool) -> Result<()> {
    let found = version(central)?;
    if found > SERVER_SCHEMA {
        return Err(SyncError::NewerServer { server: central.server.clone(), found, known: SERVER_SCHEMA });
    }
    if found == SERVER_SCHEMA {
        return Ok(());
    }
    match apply_migrations(central) {
        Ok(()) => Ok(()),
        Err(SyncError::Refused { why, .. }) if !migrate => {
            Err(SyncError::OlderServer { server: central.server.clone(), found, known: SERVER_SCHEMA, why })
        }
        Err(e) => Err(e),
    }
}

fn version(central: &mut Central) -> Result<i32> {
    let fail = |e| crate::error::classify(&central.server, "reading its schema version", e);
    let exists: bool =
        central.client.query_one("SELECT to_regclass('prov.schema_version') IS NOT NULL", &[]).map_err(fail)?.get(0);
    if !exists {
        return Ok(0);
    }
    let row = central.client.query_one("SELECT coalesce(max(version), 0) FROM prov.schema_version", &[]);
    Ok(row.map_err(fail)?.get(0))
}

fn apply_migrations(central: &mut Central) -> Result<()> {
    let server = central.server.clone();
    let fail = |e| crate::error::classify(&server, "a schema migration", e);
    let mut tx = central.client.transaction().map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(fail)?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS prov;
         CREATE TABLE IF NOT EXISTS prov.schema_version(
             version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())",
    )
    .map_err(fail)?;
    let found: i32 =
        tx.query_one("SELECT coalesce(max(version), 0) FROM prov.schema_version", &[]).map_err(fail)?.get(0);
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.batch_execute(sql).map_err(fail)?;
        tx.execute("INSERT INTO prov.schema_version(version) VALUES ($1)", &[&version]).map_err(fail)?;
    }
    tx.batch_execute("GRANT SELECT ON prov.schema_version TO prov_user").map_err(fail)?;
    tx.commit().map_err(fail)
}

/// Processes stored after their record was pushed.
const MIGRATION_3: &str = r#"
-- A record pushed before the journal had its processes (its last process
-- outlived the command; the collector stores the process table, and the
-- events that came late, when that process ends): the next push takes the
-- record back and stores it again whole, in one transaction. Only the
-- caller's own record, and only while it has no processes here, so a
-- record pushed again for another reason is left as it is. No tombstone:
-- a cache replaces its copy when it pulls the new one (pull.rs).
CREATE FUNCTION prov.take_back(p_uuid uuid) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old bigint;
BEGIN
    SELECT c.id INTO old FROM prov.commands c
    WHERE c.uuid = p_uuid AND c.owner = session_user
      AND NOT EXISTS (SELECT 1 FROM prov.processes p WHERE p.command_id = c.id)
    FOR UPDATE;
    IF old IS NULL THEN
        RETURN false;
    END IF;
    DELETE FROM prov.file_events WHERE command_id = old;
    DELETE FROM prov.command_dirs WHERE command_id = old;
    DELETE FROM prov.archived_files WHERE command_id = old;
    DELETE FROM prov.commands WHERE id = old;
    RETURN true;
END $$;
REVOKE EXECUTE ON FUNCTION prov.take_back FROM PUBLIC;
GRANT EXECUTE ON FUNCTION prov.take_back TO prov_user;
"#;

/// The environment each record ran in and the executed file of each
/// process (the journal's migration 7).
const MIGRATION_4: &str = r#"
-- One row per owner and distinct environment, as archived contents are:
-- the variables (NAME=VALUE entries each ending in a NUL, redacted where
-- they were recorded) and the working directory's git state. digest is
-- the journal's (xxh3-128 of every part): the same environment pushed by
-- a thousand records is one row. A record names its own by env_id.
CREATE TABLE prov.environments(
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner text NOT NULL,
    digest bytea NOT NULL,
    vars bytea NOT NULL,
    git_root bytea,
    git_commit text,
    git_branch text,
    git_dirty boolean,
    UNIQUE (owner, digest)
);
ALTER TABLE prov.commands ADD COLUMN env_id bigint;
-- The row-level check below and removals find an environment's records
-- (deduplicated by btree: a few bytes a record).
CREATE INDEX commands_env ON prov.commands(env_id) WHERE env_id IS NOT NULL;
-- Readable with a record that names it, as the record's other rows are
-- (environments.id: a bare id would be the record's own).
ALTER TABLE prov.environments ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON prov.environments FOR SELECT
    USING (EXISTS (SELECT 1 FROM prov.commands c WHERE c.env_id = environments.id));
GRANT SELECT ON prov.environments TO prov_user;

-- The executed file of each process as it was when it ran: its size,
-- mtime and partial hash with the hash's (chunk size, chunks). NULL: not
-- known.
ALTER TABLE prov.processes ADD COLUMN exe_size bigint, ADD COLUMN exe_mtime_ns bigint,
    ADD COLUMN exe_hash bigint, ADD COLUMN exe_chunk_size integer, ADD COLUMN exe_chunks integer;

-- A new record's environment: stored once per owner and digest.
CREATE FUNCTION prov.push_environment(
    p_command bigint, p_digest bytea, p_vars bytea, p_git_root bytea, p_git_commit text,
    p_git_branch text, p_git_dirty boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    env bigint;
BEGIN
    PERFORM prov.check_new(p_command);
    INSERT INTO prov.environments(owner, digest, vars, git_root, git_commit, git_branch, git_dirty)
    VALUES (session_user, p_digest, p_vars, p_git_root, p_git_commit, p_git_branch, p_git_dirty)
    ON CONFLICT (owner, digest) DO NOTHING
    RETURNING id INTO env;
    IF env IS NULL THEN
        SELECT id INTO env FROM prov.environments WHERE owner = session_user AND digest = p_digest;
    END IF;
    UPDATE prov.commands SET env_id = env WHERE id = p_command;
END $$;

-- A new record's executed files, one per process in push_processes'
-- order (idx), NULL where not known.
CREATE FUNCTION prov.push_executables(
    p_command bigint, p_size bigint[], p_mtime bigint[], p_hash bigint[], p_chunk_size integer[],
    p_chunks integer[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM prov.check_new(p_command);
    UPDATE prov.processes p
    SET exe_size = t.s, exe_mtime_ns = t.m, exe_hash = t.h, exe_chunk_size = t.cs, exe_chunks = t.n
    FROM unnest(p_size, p_mtime, p_hash, p_chunk_size, p_chunks) WITH ORDINALITY AS t(s, m, h, cs, n, i)
    WHERE p.command_id = p_command AND p.idx = (t.i - 1)::integer;
END $$;

-- prov.remove as before, and the environments no record names any more.
CREATE OR REPLACE FUNCTION prov.remove(p_ids bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    WITH gone AS (
        DELETE FROM prov.commands WHERE id = ANY(p_ids) RETURNING id, uuid
    ), t AS (
        INSERT INTO prov.deleted(uuid) SELECT uuid FROM gone ON CONFLICT DO NOTHING
    ), e AS (
        DELETE FROM prov.file_events WHERE command_id IN (SELECT id FROM gone)
    ), d AS (
        DELETE FROM prov.command_dirs WHERE command_id IN (SELECT id FROM gone)
    ), a AS (
        DELETE FROM prov.archived_files WHERE command_id IN (SELECT id FROM gone)
    ), p AS (
        DELETE FROM prov.processes WHERE command_id IN (SELECT id FROM gone)
    )
    SELECT count(*) INTO n FROM gone;
    DELETE FROM prov.archive_blobs b
        WHERE NOT EXISTS (SELECT 1 FROM prov.archived_files a WHERE a.blob_id = b.id);
    DELETE FROM prov.environments v
        WHERE NOT EXISTS (SELECT 1 FROM prov.commands c WHERE c.env_id = v.id);
    RETURN n;
END $$;

REVOKE EXECUTE ON FUNCTION prov.push_environment, prov.push_executables FROM PUBLIC;
GRANT EXECUTE ON FUNCTION prov.push_environment, prov.push_executables TO prov_user;
"#;
