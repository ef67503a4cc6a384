fn main() {
    let a: Vec<String> = std::env::args().collect();
    let o = redline_watch::tune::TuneOptions {
        server: a.get(2).map(|s| s.parse().unwrap()),
        ..Default::default()
    };
    match redline_watch::tune::analyze(std::path::Path::new(&a[1]), &o) {
        Ok(r) => print!("{}", redline_watch::tune::render_text(&r)),
        Err(e) => eprintln!("ERR {e}"),
    }
}
