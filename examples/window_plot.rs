//! Renders the README's picture: the same bursty stream of requests through each algorithm,
//! admitted and refused requests over time, and how many were admitted in the trailing window
//! `W`. Deterministic (a manual clock and a fixed stream), so the committed SVG is reproducible:
//!
//! ```sh
//! cargo run --example window_plot    # writes examples/algorithms.svg
//! ```
//!
//! The SVG is written by hand (a few rectangles, lines and labels): a plotting crate would add a
//! dependency tree to every `cargo test` build of this crate for one picture.

use std::fmt::Write as _;
use std::time::Duration;

use tollgate::{
    Algorithm, Clock, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingLog,
    SlidingWindow, WeightedWindow,
};

const MS: u64 = 1_000_000;
/// The quota: L = 10 per W = 1 s.
const L: u64 = 10;
const W: u64 = 1_000 * MS;
/// The stream lasts this long.
const SPAN: u64 = 6_000 * MS;

/// The request times: bursts straddling window boundaries, a steady stream above the rate, a
/// quiet stretch, and a burst inside a window.
fn stream() -> Vec<u64> {
    let mut t = Vec::new();
    // 20 requests in the last 100 ms of window 0 and 20 in the first 100 ms of window 1.
    t.extend((0..40).map(|i| 900 * MS + i * 5 * MS));
    // 20 per second for 1.5 s: twice the rate.
    t.extend((0..30).map(|i| 1_600 * MS + i * 50 * MS));
    // A burst at the 4 s boundary, then one in the middle of window 5.
    t.extend((0..30).map(|i| 3_925 * MS + i * 5 * MS));
    t.extend((0..25).map(|i| 5_300 * MS + i * 8 * MS));
    t.sort_unstable();
    t
}

/// Which requests of `stream` an algorithm admits.
fn admitted<A: Algorithm>(alg: A, stream: &[u64]) -> Vec<bool> {
    let clock = ManualClock::new();
    let quota = Quota::new(L, Duration::from_nanos(W)).unwrap();
    let limiter = RateLimiter::builder(quota)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    stream
        .iter()
        .map(|&t| {
            clock.set(t);
            debug_assert_eq!(clock.now(), t);
            limiter.try_acquire()
        })
        .collect()
}

/// The most requests admitted in any window `(t - W, t]`.
fn max_in_window(times: &[u64]) -> usize {
    times
        .iter()
        .map(|&t| times.iter().filter(|&&s| s <= t && s + W > t).count())
        .max()
        .unwrap_or(0)
}

fn main() {
    let stream = stream();
    let rows: Vec<(&str, Vec<bool>)> = vec![
        ("GCRA (= leaky / token bucket)", admitted(Gcra, &stream)),
        ("Fixed window", admitted(FixedWindow::new(), &stream)),
        (
            "Sliding window, 4 sub-windows",
            admitted(SlidingWindow::new(4), &stream),
        ),
        (
            "Sliding window counter (weighted)",
            admitted(WeightedWindow, &stream),
        ),
        ("Sliding log (exact)", admitted(SlidingLog, &stream)),
    ];

    let (left, width, row_h, top) = (250.0, 720.0, 70.0, 40.0);
    let x = |t: u64| left + width * t as f64 / SPAN as f64;
    let height = top + row_h * rows.len() as f64 + 40.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{left}" y="20" font-size="14">{n} requests, limit {L} per 1 s: admitted (green), refused (grey); line: admitted in the trailing 1 s</text>
"##,
        w = left + width + 30.0,
        n = stream.len(),
    );
    for s in 0..=SPAN / W {
        let xs = x(s * W);
        let _ = writeln!(
            svg,
            r##"<line x1="{xs}" y1="{top}" x2="{xs}" y2="{y2}" stroke="#ccc" stroke-dasharray="3,3"/><text x="{xs}" y="{ty}" text-anchor="middle">{s} s</text>"##,
            y2 = top + row_h * rows.len() as f64,
            ty = top + row_h * rows.len() as f64 + 16.0,
        );
    }
    for (i, (name, ok)) in rows.iter().enumerate() {
        let y0 = top + row_h * i as f64;
        let granted: Vec<u64> = stream
            .iter()
            .zip(ok)
            .filter(|p| *p.1)
            .map(|p| *p.0)
            .collect();
        let peak = max_in_window(&granted);
        let _ = writeln!(
            svg,
            r##"<text x="10" y="{ty}">{name}</text><text x="10" y="{ty2}" fill="#555">{g} admitted; at most {peak} in any 1 s</text>"##,
            ty = y0 + 28.0,
            ty2 = y0 + 44.0,
            g = granted.len(),
        );
        // One tick per request: admitted ones tall and green, refused ones short and grey.
        for (&t, &a) in stream.iter().zip(ok) {
            let (y, h, colour) = if a {
                (y0 + 48.0, 16.0, "#2a9d3a")
            } else {
                (y0 + 58.0, 6.0, "#bbb")
            };
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{y}" width="1.2" height="{h}" fill="{colour}"/>"##,
                x(t)
            );
        }
        // Admitted in the trailing window, above the ticks (2L at the top); the L level dashed.
        let scale = |c: usize| y0 + 44.0 - 20.0 * c as f64 / L as f64;
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{y}" x2="{x2}" y2="{y}" stroke="#e07a00" stroke-width="0.6" stroke-dasharray="4,2"/>"##,
            y = scale(L as usize),
            x2 = left + width,
        );
        let mut points = String::new();
        for step in 0..=600u64 {
            let t = step * SPAN / 600;
            let c = granted.iter().filter(|&&s| s <= t && s + W > t).count();
            let _ = write!(points, "{:.1},{:.1} ", x(t), scale(c));
        }
        let _ = writeln!(
            svg,
            r##"<polyline points="{points}" fill="none" stroke="#e07a00" stroke-width="1.2"/>"##
        );
        println!(
            "{name:<36} admitted {:>3}, at most {peak:>2} in any 1 s",
            granted.len()
        );
    }
    svg.push_str("</svg>\n");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/algorithms.svg");
    std::fs::write(path, svg).expect("write the SVG");
    println!("wrote {path}");
}
