//! One line of `prov doctor`'s answer: a status, what was found and what
//! to do about it.

use prov_model::escape::escape_controls;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Worth knowing; nothing is broken.
    Note,
    /// Works, but not as the user probably wants.
    Warn,
    /// Commands are not recorded (or not stored) because of this.
    Fail,
}

/// One line of the doctor's answer.
#[derive(Debug, Clone)]
pub struct Finding {
    pub status: Status,
    pub what: String,
    /// What to do; required for everything but `Ok`.
    pub remedy: Option<String>,
    /// Lines shown below it (a log's last lines).
    pub details: Vec<String>,
}

impl Finding {
    pub fn ok(what: impl Into<String>) -> Finding {
        Finding { status: Status::Ok, what: what.into(), remedy: None, details: Vec::new() }
    }
    pub fn note(what: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding::with(Status::Note, what, remedy)
    }
    pub fn warn(what: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding::with(Status::Warn, what, remedy)
    }
    pub fn fail(what: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding::with(Status::Fail, what, remedy)
    }
    pub(super) fn with(status: Status, what: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding { status, what: what.into(), remedy: Some(remedy.into()), details: Vec::new() }
    }

    pub(super) fn print(&self) {
        let tag = match self.status {
            Status::Ok => "ok   ",
            Status::Note => "note ",
            Status::Warn => "WARN ",
            Status::Fail => "FAIL ",
        };
        println!("{tag} {}", escape_controls(&self.what));
        if let Some(remedy) = &self.remedy {
            println!("      -> {}", escape_controls(remedy));
        }
        for d in &self.details {
            println!("        {d}");
        }
    }
}
