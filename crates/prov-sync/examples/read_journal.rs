//! How long reading a journal's records back takes, as the push does it
//! (benches/README.md, central store: where the ingest time goes).
//!
//!     cargo run --release -p prov-sync --example read_journal -- PATH

fn main() {
    let path = std::env::args().nth(1).expect("usage: read_journal PATH");
    let store = prov_store::Reader::open(std::path::Path::new(&path)).expect("open");
    let t = std::time::Instant::now();
    let ids: Vec<i64> = store.history(None).expect("history").iter().map(|c| c.id).collect();
    let mut events = 0;
    for id in &ids {
        let _ = store.command(*id).expect("command");
        events += store.files_of(*id).expect("files").len();
        let _ = store.archived_of(*id).expect("archived");
    }
    let s = t.elapsed().as_secs_f64();
    println!("{} records, {events} events read in {s:.2} s: {:.0} events/s", ids.len(), events as f64 / s);
}
