//! The command line of the exports: `--format` values over
//! [`prov_export::Format`] (named and described once, there), and where an
//! export goes (`--output`).

use std::io::Write;
use std::path::Path;
use std::sync::LazyLock;

use anyhow::{bail, Result};
use clap::builder::PossibleValue;
use clap::ValueEnum;
use prov_export::{ExportError, ExportOptions, Format, Output};
use prov_store::{CommandRow, FileRow};

use crate::file_args::output_stream;

/// `--format FORMAT` of `prov query`: any export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportFormat(pub Format);

impl ValueEnum for ExportFormat {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: LazyLock<[ExportFormat; Format::ALL.len()]> = LazyLock::new(|| Format::ALL.map(ExportFormat));
        &*ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(possible_value(self.0))
    }
}

/// `format` as a `--format` value, with its help line.
pub fn possible_value(format: Format) -> PossibleValue {
    let value = PossibleValue::new(format.name());
    if format.writes_directory() {
        value.help(format!("{}; needs --output DIR", format.description()))
    } else {
        value.help(format.description())
    }
}

/// A format that writes a directory has no default place: it needs --output.
pub fn require_output(format: Format, output: Option<&Path>) -> Result<()> {
    if format.writes_directory() && output.is_none() {
        bail!("--format {format} writes a directory: give --output DIR");
    }
    Ok(())
}

/// Writes `records` as `format` to `output`: a new file or directory, or
/// standard output. Returns why a rebuild it writes cannot be faithful
/// (see [`prov_export::export`]).
pub fn write(
    store: &prov_store::Reader,
    format: Format,
    records: &[(CommandRow, Vec<FileRow>)],
    opts: &ExportOptions,
    output: Option<&Path>,
) -> Result<Vec<String>> {
    require_output(format, output)?;
    // The formats that describe software and settings get each command's
    // environment and programs.
    let mut with_env;
    let mut opts = opts;
    if format.shows_environments() {
        with_env = opts.clone();
        for (c, _) in records {
            with_env.environments.insert(c.id, store.command_environment(c.id)?);
        }
        opts = &with_env;
    }
    let written = match output {
        Some(dir) if format.writes_directory() => prov_export::export(format, records, opts, Output::Directory(dir)),
        _ => {
            let mut out = output_stream(output)?;
            let written = prov_export::export(format, records, opts, Output::Stream(&mut out)).and_then(|refused| {
                out.flush()?;
                Ok(refused)
            });
            // A refused export leaves no file behind (this run created it):
            // a half-written Makefile must not be taken for the whole.
            if let (Err(_), Some(path)) = (&written, output) {
                drop(out);
                let _ = std::fs::remove_file(path);
            }
            written
        }
    };
    written.map_err(|e| match e {
        ExportError::CrateExists(path) => {
            anyhow::anyhow!("{} already exists; choose another --output directory", path.display())
        }
        e => e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_export_is_a_format_value_of_query() {
        for format in Format::ALL {
            assert_eq!(ExportFormat::from_str(format.name(), false), Ok(ExportFormat(format)));
        }
    }
}
