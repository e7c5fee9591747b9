#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| prov_fuzz::writer_pipe(data));
