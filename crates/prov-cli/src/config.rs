//! `prov config`: which configuration file applies, and the documented
//! defaults (`--default`).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::Result;
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
    let state = if path.exists() { "valid" } else { "absent: the defaults apply (prov config --default)" };
    println!("{}: {state}", escape(path.as_os_str().as_bytes()));
    Ok(ExitCode::SUCCESS)
}
