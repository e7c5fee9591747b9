//! `prov query env ID`: the environment a command ran in and the programs
//! it ran.

/// `prov query env ID`: the environment command ID ran in (variables, git
/// state) and the programs it ran. JSON: one object, `"type":
/// "environment"`, `command_id`, `environment_id` (commands with the same
/// one ran in the same environment; null: none recorded), `variables`,
/// `variables_hex` (only for bytes that are not UTF-8), `git` (`root`,
/// `commit`, `branch`, `dirty`; null outside a repository) and
/// `executables` (`path`, `size`, `mtime_ns`, `mtime`, `hash`).
pub fn query(command_id: i64, json: bool, reach: crate::journal::Reach) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context;
    use prov_export::environment::{environment_json, executable_json};
    use std::io::Write;

    let Some(store) = crate::journal::open_for(reach)? else {
        eprintln!("prov: no records yet");
        return Ok(std::process::ExitCode::from(1));
    };
    let Some(command) = store.command(command_id)? else {
        eprintln!("prov: no command with id {command_id}");
        return Ok(std::process::ExitCode::from(1));
    };
    let env = store.environment_of(command_id)?;
    let env_id = store.environment_id_of(command_id)?;
    let executables = store.executables_of(command_id)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), "environment".into());
        obj.insert("command_id".into(), command_id.into());
        obj.insert("environment_id".into(), env_id.into());
        let shown = env.as_ref().map(environment_json);
        if let Some(serde_json::Value::Object(fields)) = shown {
            obj.extend(fields);
        } else {
            obj.insert("variables".into(), serde_json::Value::Null);
            obj.insert("git".into(), serde_json::Value::Null);
        }
        obj.insert("executables".into(), executables.iter().map(executable_json).collect());
        crate::output::write_json(&mut out, &obj.into()).context("writing output")?;
    } else {
        let w = &mut out;
        writeln!(w, "{}  {}", command.id, prov_model::escape::escape(&command.text)).context("writing output")?;
        match (&env, env_id) {
            (Some(env), Some(id)) => {
                writeln!(w, "environment {id}").context("writing output")?;
                for (name, value) in env.pairs() {
                    let (name, value) = (prov_model::escape::escape(name), prov_model::escape::escape(value));
                    writeln!(w, "  {name}={value}").context("writing output")?;
                }
                let git = env.git.as_ref().map_or("not in a git repository".into(), |g| g.summary());
                writeln!(w, "git  {git}").context("writing output")?;
            }
            _ => writeln!(w, "environment not recorded (a record of an older prov, or of a shell started before it)")
                .context("writing output")?,
        }
        writeln!(w, "programs").context("writing output")?;
        if executables.is_empty() {
            writeln!(w, "  none recorded").context("writing output")?;
        }
        for e in &executables {
            let path = if e.path.is_empty() { "(not shown)".into() } else { prov_model::escape::escape(&e.path) };
            let file = match &e.file {
                Some(f) => format!(
                    "  {}  modified {}  hash {}",
                    crate::output::human_size(f.size),
                    prov_export::text::local(f.mtime_ns),
                    f.hash.map_or("unreadable".into(), prov_export::text::hash_hex)
                ),
                None => "  (file not recorded)".into(),
            };
            writeln!(w, "  {path}{file}").context("writing output")?;
        }
    }
    out.flush().context("writing output")?;
    Ok(std::process::ExitCode::SUCCESS)
}
