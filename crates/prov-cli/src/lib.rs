//! The parts of `prov` that are pure functions of the user's input, as a
//! library so that fuzz/ can reach them without the binary.
#![deny(unsafe_code)]

pub mod values;
