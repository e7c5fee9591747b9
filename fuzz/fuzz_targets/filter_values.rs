#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| prov_fuzz::filter_values(data));
