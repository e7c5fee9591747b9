//! The fault-injection suite (issue 11): commands run as the ordinary user
//! through the real setuid helper while parts of prov are killed, stopped,
//! starved or handed broken files. Each scenario counts the commands it ran
//! against the records it finds and prints one row of the reliability table
//! in docs/guide.md ("Reliability under faults").

#[path = "faults/tally.rs"]
mod tally;

#[path = "faults/ending.rs"]
mod ending;
#[path = "faults/inputs.rs"]
mod inputs;
#[path = "faults/lifecycle.rs"]
mod lifecycle;
#[path = "faults/membership.rs"]
mod membership;
#[path = "faults/network.rs"]
mod network;
#[path = "faults/storage.rs"]
mod storage;
