//! One row of the reliability table: what a scenario ran and what the
//! journal says about it afterwards.

use serde_json::Value;

/// Counts for one scenario, printed as a Markdown table row so the guide's
/// table can be refreshed from `./tests/run -p prov-e2e --test faults -- --nocapture`.
#[derive(Debug, Default)]
pub struct Tally {
    pub scenario: &'static str,
    /// Commands started.
    pub run: usize,
    /// Records found for them.
    pub found: usize,
    /// Records that say they are not complete (or untraced), with a reason.
    pub marked_incomplete: usize,
    /// Records whose exit status is the one the command had (or says unknown when it cannot be known).
    pub status_right: usize,
}

impl Tally {
    pub fn new(scenario: &'static str) -> Tally {
        Tally { scenario, ..Tally::default() }
    }

    /// Prints the row; call it before asserting, so a failing run still shows its counts.
    pub fn print_row(&self) {
        println!(
            "FAULT-TABLE | {} | {} | {} | {} | {} |",
            self.scenario, self.run, self.found, self.marked_incomplete, self.status_right
        );
    }
}

/// The record of `prov query history --json` whose text is `text`, if any.
pub fn record_with_text<'a>(records: &'a [Value], text: &str) -> Option<&'a Value> {
    records.iter().find(|r| r["text"].as_str() == Some(text))
}
