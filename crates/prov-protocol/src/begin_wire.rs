//! How `Begin`'s `CommandStart` travels: the flags the shim writes
//! (`confirm`, `ack`, `reuse`, `end_when_idle`), read into the states the
//! Rust side works with and written back from them. A message with both
//! `confirm` and `ack` is refused when it is read.

use serde::{Deserialize, Serialize};

use crate::control::CommandStart;

/// What a caller waits for, after `Begin`, before it starts the command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BeginAnswer {
    /// Nothing: the shell's prompt must not wait.
    #[default]
    Nothing,
    /// `Watching`: the collector has the settings and the record and
    /// resolves events as they come (`prov run`, which keeps the record's
    /// start itself). On the wire: `ack`.
    Watching,
    /// `Begun`: the record's start is stored (`prov run` without a start
    /// file of its own: a batch step killed with everything around it at
    /// once still leaves its record). On the wire: `confirm`.
    Begun,
}

/// When a caller sends `End`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EndSent {
    /// As soon as the command's own process has ended (`prov run`).
    #[default]
    AtExit,
    /// Only once the caller waits anyway (the shell, at its next read of
    /// the terminal, after the prompt is drawn), having closed its tracker
    /// before. Until `End`, the collector keeps the command's end of the
    /// tracker open itself, so that the hang-up does not wake it while the
    /// shell prints its prompt (see `Observation::command_end`). On the
    /// wire: `end_when_idle`.
    WhenIdle,
}

/// `CommandStart` as JSON carries it.
#[derive(Serialize, Deserialize)]
pub(crate) struct StartOnTheWire {
    seq: u64,
    #[serde(with = "prov_model::record::bytes_as_hex")]
    text: Vec<u8>,
    #[serde(with = "prov_model::record::bytes_as_hex")]
    cwd: Vec<u8>,
    start_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text_in_fd: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    confirm: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    ack: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    reuse: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    end_when_idle: bool,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "prov_model::record::opt_bytes_as_hex")]
    env: Option<Vec<u8>>,
}

impl TryFrom<StartOnTheWire> for CommandStart {
    type Error = &'static str;

    fn try_from(w: StartOnTheWire) -> Result<CommandStart, Self::Error> {
        let awaits = match (w.confirm, w.ack) {
            (false, false) => BeginAnswer::Nothing,
            (false, true) => BeginAnswer::Watching,
            (true, false) => BeginAnswer::Begun,
            (true, true) => return Err("a Begin cannot wait for both Begun (confirm) and Watching (ack)"),
        };
        Ok(CommandStart {
            seq: w.seq,
            text: w.text,
            cwd: w.cwd,
            start_ns: w.start_ns,
            text_in_fd: w.text_in_fd,
            awaits,
            reuse: w.reuse,
            end: if w.end_when_idle { EndSent::WhenIdle } else { EndSent::AtExit },
            env: w.env,
        })
    }
}

impl From<CommandStart> for StartOnTheWire {
    fn from(s: CommandStart) -> StartOnTheWire {
        StartOnTheWire {
            seq: s.seq,
            text: s.text,
            cwd: s.cwd,
            start_ns: s.start_ns,
            text_in_fd: s.text_in_fd,
            confirm: s.awaits == BeginAnswer::Begun,
            ack: s.awaits == BeginAnswer::Watching,
            reuse: s.reuse,
            end_when_idle: s.end == EndSent::WhenIdle,
            env: s.env,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(awaits: BeginAnswer, reuse: bool, end: EndSent) -> CommandStart {
        CommandStart {
            seq: 1,
            text: b"make".to_vec(),
            cwd: b"/".to_vec(),
            start_ns: 5,
            text_in_fd: None,
            awaits,
            reuse,
            end,
            env: Some(b"HOME=/h/u\0".to_vec()),
        }
    }

    #[test]
    fn every_state_travels_as_its_flags_and_back() {
        for awaits in [BeginAnswer::Nothing, BeginAnswer::Watching, BeginAnswer::Begun] {
            for reuse in [false, true] {
                for end in [EndSent::AtExit, EndSent::WhenIdle] {
                    let s = start(awaits, reuse, end);
                    let json = serde_json::to_string(&s).unwrap();
                    assert_eq!(serde_json::from_str::<CommandStart>(&json).unwrap(), s, "{json}");
                }
            }
        }
        let json = serde_json::to_string(&start(BeginAnswer::Begun, true, EndSent::WhenIdle)).unwrap();
        assert!(json.contains(r#""confirm":true"#) && json.contains(r#""end_when_idle":true"#), "{json}");
        assert!(!json.contains("ack"), "{json}");
    }

    #[test]
    fn waiting_for_both_answers_is_refused() {
        let json = r#"{"seq":1,"text":"","cwd":"","start_ns":0,"confirm":true,"ack":true}"#;
        let err = serde_json::from_str::<CommandStart>(json).unwrap_err();
        assert!(err.to_string().contains("both"), "{err}");
    }
}
