//! The warm-up ramp of `SmoothRateLimiter`, plotted: writes `examples/smooth_warmup.svg` (the
//! warm-up figure in the README) from the limiter itself.
//!
//! A warming-up limiter (10 permits/s, warm-up 5 s, cold factor 3) and a bursty one (10/s), both
//! on a `ManualClock`, serve a caller that asks for one permit after another for 8 s, pauses for
//! 4 s, then asks again for 6 s. The plot shows the rate each grant was served at (one over
//! the time since the previous grant): the cold limiter starts at a third of the stable rate and
//! reaches it over the warm-up. A pause first refills the permits below the threshold (2.5 s
//! here), which cost the stable interval; only the next 1.5 s cool it past the threshold, so it
//! ramps again from part way. The bursty limiter serves its saved second of permits at once
//! after the pause instead.
//!
//! Run: `cargo run --example smooth_warmup` (it prints the grants too).

use std::fmt::Write as _;
use std::time::Duration;

use tollgate::{Clock, ManualClock, SmoothRateLimiter};

const RATE: f64 = 10.0;
const DEMAND: [(f64, f64); 2] = [(0.0, 8.0), (12.0, 18.0)];

/// Grant instants (seconds) of a caller that acquires one permit after another during each
/// demand window.
fn grants(limiter: &SmoothRateLimiter, clock: &ManualClock) -> Vec<Vec<f64>> {
    let secs = |c: &ManualClock| c.now() as f64 / 1e9;
    DEMAND
        .iter()
        .map(|&(from, to)| {
            clock.set((from * 1e9) as u64);
            let mut at = Vec::new();
            while secs(clock) < to {
                limiter
                    .acquire()
                    .expect("a smooth limiter grants every request");
                at.push(secs(clock));
            }
            at
        })
        .collect()
}

/// (time, rate) steps: between two grants, the rate the second was served at. A grant that did
/// not wait (saved permits) is drawn at the rate cap of the plot.
fn steps(windows: &[Vec<f64>], cap: f64) -> Vec<Vec<(f64, f64)>> {
    windows
        .iter()
        .map(|at| {
            let mut pts = Vec::new();
            for w in at.windows(2) {
                let rate = if w[1] > w[0] {
                    (1.0 / (w[1] - w[0])).min(cap)
                } else {
                    cap
                };
                pts.push((w[0], rate));
                pts.push((w[1], rate));
            }
            pts
        })
        .collect()
}

fn svg(warm: &[Vec<(f64, f64)>], bursty: &[Vec<(f64, f64)>]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 380.0, 60.0, 20.0, 40.0, 50.0);
    let (t_max, r_max) = (19.0, 14.0);
    let x = |t: f64| left + t / t_max * (w - left - right);
    let y = |r: f64| h - bottom - r / r_max * (h - top - bottom);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">SmoothRateLimiter, \
         {RATE}/s: warming up (5 s, cold factor 3) vs bursty, continuous demand with a 4 s \
         pause</text>",
        w / 2.0
    );
    // Axes, grid and ticks.
    for t in 0..=19 {
        let xt = x(f64::from(t));
        let _ = writeln!(
            s,
            "<line x1=\"{xt:.1}\" y1=\"{:.1}\" x2=\"{xt:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\
             <text x=\"{xt:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t}</text>",
            y(0.0),
            y(r_max),
            y(0.0) + 16.0
        );
    }
    for r in (0..=14).step_by(2) {
        let yr = y(f64::from(r));
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" y1=\"{yr:.1}\" x2=\"{:.1}\" y2=\"{yr:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{r}</text>",
            x(0.0),
            x(t_max),
            x(0.0) - 6.0,
            yr + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{2:.1}\" y2=\"{1:.1}\" stroke=\"black\"/>\
         <line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{3:.1}\" stroke=\"black\"/>",
        x(0.0),
        y(0.0),
        x(t_max),
        y(r_max)
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time (s)</text>\
         <text transform=\"translate(18 {:.1}) rotate(-90)\" text-anchor=\"middle\">permits \
         per second served</text>",
        x(t_max / 2.0),
        h - 12.0,
        y(r_max / 2.0)
    );
    // The pause and the stable rate.
    let _ = writeln!(
        s,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f4f4f4\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#888\">idle</text>",
        x(8.0),
        y(r_max),
        x(12.0) - x(8.0),
        y(0.0) - y(r_max),
        x(10.0),
        y(r_max) + 16.0
    );
    let _ = writeln!(
        s,
        "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{2:.1}\" y2=\"{1:.1}\" stroke=\"#999\" \
         stroke-dasharray=\"4 4\"/>",
        x(0.0),
        y(RATE),
        x(t_max)
    );
    for (series, color) in [(bursty, "#e08a1e"), (warm, "#1f5fbf")] {
        for pts in series {
            let coords: Vec<String> = pts
                .iter()
                .map(|&(t, r)| format!("{:.1},{:.1}", x(t), y(r)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
                coords.join(" ")
            );
        }
    }
    for (i, (label, color)) in [
        (
            "warming up: 3.3/s when cold, 10/s after the warm-up",
            "#1f5fbf",
        ),
        (
            "bursty: saved permits at once (drawn at the top), then 10/s",
            "#e08a1e",
        ),
    ]
    .iter()
    .enumerate()
    {
        let ly = y(1.8) + 18.0 * i as f64;
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{ly:.1}\" x2=\"{1:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" \
             stroke-width=\"2\"/><text x=\"{2:.1}\" y=\"{3:.1}\">{label}</text>",
            x(0.4),
            x(1.1),
            x(1.2),
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn main() {
    let warm_clock = ManualClock::new();
    let warming = SmoothRateLimiter::builder(RATE)
        .warmup(Duration::from_secs(5))
        .clock(warm_clock.clone())
        .build()
        .expect("valid limiter");
    let bursty_clock = ManualClock::new();
    let bursty = SmoothRateLimiter::builder(RATE)
        .clock(bursty_clock.clone())
        .build()
        .expect("valid limiter");
    let warm = grants(&warming, &warm_clock);
    let burst = grants(&bursty, &bursty_clock);
    for (name, windows) in [("warming up", &warm), ("bursty", &burst)] {
        for (k, at) in windows.iter().enumerate() {
            let shown: Vec<String> = at.iter().take(12).map(|t| format!("{t:.3}")).collect();
            println!(
                "{name}, demand window {k}: {} grants, first at {} ...",
                at.len(),
                shown.join(" ")
            );
        }
    }
    let cap = 13.5;
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/smooth_warmup.svg");
    std::fs::write(out, svg(&steps(&warm, cap), &steps(&burst, cap))).expect("write the plot");
    println!("wrote {out}");
}
