//! The recorder's parts: a seeded generator, the trace of lines, the golden-file comparison,
//! a fixed hasher, and the stable formats of the results.

use std::fmt::{self, Debug, Write as _};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tollgate::{AcquireError, Decision, Quota, Reservation, SweepStats, ThrottleReply};

/// splitmix64: a few lines of integer arithmetic, so every machine and every toolchain draws
/// the same sequence from the same seed (no dependency whose algorithm could change).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 for `n = 0`), by a multiply-shift (no modulo bias worth a thought
    /// at these sizes, and no rejection loop whose length could differ).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }

    /// An index into a collection of `len` items (`len > 0`).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

/// The scale of a scenario's times, fixed when it starts (not read back from the limiter, so
/// that a changed answer changes one line, not every later draw).
#[derive(Clone, Copy)]
pub struct Scale {
    /// The emission interval or the sub-period that matters (ns, at least 1).
    pub interval: u64,
    /// The period or window (ns, at least 1).
    pub period: u64,
    /// The limit or burst.
    pub limit: u64,
}

const SEC: u64 = 1_000_000_000;
const HOUR: u64 = 3600 * SEC;
const DAY: u64 = 24 * HOUR;
const YEAR: u64 = 365 * DAY;

impl Scale {
    pub fn of(q: Quota) -> Scale {
        Scale {
            interval: nanos(q.interval()).max(1),
            period: nanos(q.period()).max(1),
            limit: q.count(),
        }
    }

    /// How far to move the clock: often 0 or a few ns, often about one interval or one
    /// period (either side of the boundary), sometimes hours to a month, rarely years.
    pub fn advance(&self, rng: &mut Rng) -> u64 {
        match rng.below(100) {
            0..=17 => 0,
            18..=31 => rng.range(1, 1000),
            32..=49 => {
                let k = rng.range(1, 3);
                jitter(rng, self.interval.saturating_mul(k))
            }
            50..=63 => jitter(rng, self.period),
            64..=92 => rng.below(self.period.saturating_mul(3)),
            93..=98 => rng.range(HOUR, 30 * DAY),
            _ => rng.range(YEAR / 2, 2 * YEAR),
        }
    }

    /// A timeout, a block's length or a `max_wait`, bounded (a few days at most).
    pub fn wait(&self, rng: &mut Rng) -> Duration {
        Duration::from_nanos(match rng.below(100) {
            0..=14 => 0,
            15..=24 => rng.range(1, 1000),
            25..=49 => {
                let k = rng.range(1, 4);
                jitter(rng, self.interval.saturating_mul(k))
            }
            50..=69 => jitter(rng, self.period),
            70..=94 => rng.below(self.period.saturating_mul(5)),
            _ => rng.range(HOUR, 3 * DAY),
        })
    }

    /// A count for a decision: mostly small, the limit and either side of it, sometimes
    /// much more.
    pub fn n(&self, rng: &mut Rng) -> u64 {
        let l = self.limit.max(1);
        match rng.below(100) {
            0..=7 => 0,
            8..=44 => 1,
            45..=74 => rng.range(2, l.max(2)),
            75..=82 => l,
            83..=88 => l + 1,
            89..=94 => rng.range(l, 4 * l),
            95..=97 => rng.range(100, 100_000),
            _ => rng.pick(&[u64::MAX, 1 << 40, 1 << 62, u64::from(u32::MAX) + 1]),
        }
    }

    /// A count for a blocking acquire: never so large that the wait runs the clock to the end
    /// of time (that is the extreme scenarios' job).
    pub fn n_wait(&self, rng: &mut Rng) -> u64 {
        let l = self.limit.max(1);
        match rng.below(100) {
            0..=5 => 0,
            6..=49 => 1,
            50..=79 => rng.range(2, l.max(2)),
            80..=89 => l,
            90..=95 => l + 1,
            _ => rng.range(l, 3 * l),
        }
    }
}

/// `x` or one of its neighbours (the boundary and either side of it).
fn jitter(rng: &mut Rng, x: u64) -> u64 {
    match rng.below(6) {
        0 => x.saturating_sub(1),
        1 => x.saturating_add(1),
        2 => x.saturating_sub(rng.below(1000)),
        3 => x.saturating_add(rng.below(1000)),
        _ => x,
    }
}

pub fn seed_of(name: &str) -> u64 {
    // FNV-1a of the name: each scenario has its own fixed seed, stable if scenarios are
    // added or reordered.
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// FNV-1a: a hasher with no random seed, so which keys share a shard is the same on every run
/// and machine (the default hasher is seeded per limiter).
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

pub type FixedHasher = BuildHasherDefault<Fnv>;

/// The lines a family has recorded so far, shared with the thread that waits for it (so a
/// family that hangs or panics can still be compared up to where it stopped).
pub type Lines = Arc<Mutex<Vec<String>>>;

/// One family's lines: `<scenario> <step> <op> -> <result>`.
pub struct Trace {
    lines: Lines,
    scenario: String,
    step: u64,
}

impl Trace {
    pub fn new(lines: Lines) -> Trace {
        Trace {
            lines,
            scenario: String::new(),
            step: 0,
        }
    }

    /// Starts a scenario; its first line says how it was built.
    pub fn scenario(&mut self, name: &str, seed: u64, config: impl fmt::Display) {
        assert!(!name.contains(' '), "scenario names have no spaces");
        self.scenario = name.to_owned();
        self.step = 0;
        self.rec(format!("start(seed={seed:#x})"), config);
    }

    pub fn rec(&mut self, op: impl fmt::Display, result: impl fmt::Display) {
        let line = format!("{} {} {op} -> {result}", self.scenario, self.step);
        lock(&self.lines).push(line);
        self.step += 1;
    }
}

fn lock(lines: &Lines) -> std::sync::MutexGuard<'_, Vec<String>> {
    lines.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a family may run. It takes well under a second in a debug build; a family still
/// running after this is in a decision loop that never ends on the manual clock (a blocking
/// acquire that is never granted), which is a failure, not a reason to hang the test run.
const FAMILY_LIMIT: Duration = Duration::from_secs(120);

/// Records one family on its own thread and compares its lines with its golden file (or
/// records them there: [`check_golden`]). A family that hangs or panics fails with the first
/// difference among the lines it recorded before it stopped, if any, and its last line.
pub fn run_family(family: &'static str, record: fn(&mut Trace)) {
    let lines: Lines = Arc::default();
    let (tx, rx) = mpsc::channel();
    let shared = lines.clone();
    std::thread::Builder::new()
        .name(format!("trace-{family}"))
        .spawn(move || {
            record(&mut Trace::new(shared));
            let _ = tx.send(());
        })
        .expect("spawn the trace thread");
    let stopped = match rx.recv_timeout(FAMILY_LIMIT) {
        Ok(()) => None,
        Err(mpsc::RecvTimeoutError::Timeout) => Some(format!(
            "did not finish within {FAMILY_LIMIT:?} (a decision loop that never ends?)"
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Some("panicked (its message is above)".to_owned())
        }
    };
    let recorded = std::mem::take(&mut *lock(&lines));
    match stopped {
        None => check_golden(family, &recorded),
        Some(why) => {
            let last = recorded.last().map_or("<none>", String::as_str);
            let before = match compare(family, &recorded, true) {
                Ok(()) => format!(
                    "its {} lines up to there match the golden file.",
                    recorded.len()
                ),
                Err(diff) => diff,
            };
            panic!(
                "the `{family}` trace {why}, in the step after the last line it recorded:\n    \
                 {last}\n{before}"
            );
        }
    }
}

/// A key as it is written in a line.
#[derive(Clone, Copy)]
pub struct Key(pub u32);

impl Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}", self.0)
    }
}

/// A call as it is written in a line: `name(arg, arg)`.
pub fn call(name: &str, args: &[&dyn Debug]) -> String {
    let mut s = String::with_capacity(32);
    s.push_str(name);
    s.push('(');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{a:?}");
    }
    s.push(')');
    s
}

/// The stable text of a result. `Debug` where the type's `Debug` is its public fields (and
/// `Duration`'s exact format); a short fixed format for the frequent `Decision`.
pub trait Show {
    fn show(&self) -> String;
}

impl Show for Decision {
    fn show(&self) -> String {
        let retry = match self.retry_after {
            Some(d) => format!("{d:?}"),
            None => "-".to_owned(),
        };
        format!(
            "{} lim={} rem={} retry={} reset={:?}{}",
            if self.allowed { "allow" } else { "deny" },
            self.limit,
            self.remaining,
            retry,
            self.reset_after,
            // Only a full key table's refusal says why: every other line reads as before.
            if self.is_key_cap_reached() {
                " by=key_cap"
            } else {
                ""
            }
        )
    }
}

impl Show for AcquireError {
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

impl Show for Duration {
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

impl Show for bool {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for usize {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for u64 {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for u32 {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for () {
    fn show(&self) -> String {
        "()".to_owned()
    }
}

impl Show for f64 {
    fn show(&self) -> String {
        // `{:?}` of an f64 is its shortest exact round-trip form.
        format!("{self:?}")
    }
}

impl Show for Quota {
    fn show(&self) -> String {
        format!("[{self}]")
    }
}

impl Show for ThrottleReply {
    fn show(&self) -> String {
        format!("{:?}", self.to_array())
    }
}

impl Show for SweepStats {
    /// Only the counts: the durations are wall-clock.
    fn show(&self) -> String {
        format!(
            "keys={} sweeps={} evicted={}",
            self.keys, self.sweeps, self.evicted
        )
    }
}

impl Show for Reservation<'_> {
    fn show(&self) -> String {
        format!("ready_at={} delay={:?}", self.ready_at(), self.delay())
    }
}

impl<T: Show, E: Debug> Show for Result<T, E> {
    fn show(&self) -> String {
        match self {
            Ok(t) => format!("Ok({})", t.show()),
            Err(e) => format!("Err({e:?})"),
        }
    }
}

impl<T: Show> Show for Option<T> {
    fn show(&self) -> String {
        match self {
            Some(t) => format!("Some({})", t.show()),
            None => "None".to_owned(),
        }
    }
}

/// Where a family's golden file lives.
fn golden_path(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/trace/golden")
        .join(format!("{family}.txt"))
}

const RECORD_VAR: &str = "TOLLGATE_TRACE_RECORD";

/// Compares a family's lines with its golden file, or (with `TOLLGATE_TRACE_RECORD=1`)
/// writes them there.
pub fn check_golden(family: &str, lines: &[String]) {
    if std::env::var(RECORD_VAR).is_ok_and(|v| v == "1") {
        let path = golden_path(family);
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::create_dir_all(path.parent().expect("a parent folder"))
            .expect("create tests/trace/golden");
        std::fs::write(&path, &text).expect("write the golden file");
        eprintln!("recorded {} lines to {}", lines.len(), path.display());
        return;
    }
    if let Err(diff) = compare(family, lines, false) {
        panic!(
            "{diff}\nDuring a restructuring this is a behaviour change to find, not a trace to \
             re-record. If the change is intended, re-record with \
             `{RECORD_VAR}=1 cargo test --test trace` and say why in the commit."
        );
    }
}

/// The first difference between `lines` and the golden file, with the three lines before it
/// and the two after, and the counts; never the whole file. With `partial`, `lines` is what a
/// family recorded before it stopped, and only those are compared.
fn compare(family: &str, lines: &[String], partial: bool) -> Result<(), String> {
    let path = golden_path(family);
    let golden = match std::fs::read_to_string(&path) {
        Ok(g) => g,
        Err(e) => {
            return Err(format!(
                "no golden trace for `{family}` at {} ({e}).\n\
                 Record it from the current code with:\n    \
                 {RECORD_VAR}=1 cargo test --test trace\n\
                 and commit tests/trace/golden/.",
                path.display()
            ))
        }
    };
    let want: Vec<&str> = golden.lines().collect();
    let got: Vec<&str> = lines.iter().map(String::as_str).collect();
    let common = want.len().min(got.len());
    let first = (0..common).find(|&i| want[i] != got[i]);
    let first = match first {
        Some(i) => i,
        None if partial || want.len() == got.len() => return Ok(()),
        None => common,
    };
    let differing = (0..common).filter(|&i| want[i] != got[i]).count()
        + if partial {
            0
        } else {
            want.len().abs_diff(got.len())
        };
    let mut msg = format!(
        "the `{family}` trace differs from {}: a decision of the public API changed.\n\
         golden: {} lines, now: {} lines{}, {differing} lines differ (by position).\n\
         First difference at line {} (1-based; - golden, + now):\n",
        path.display(),
        want.len(),
        got.len(),
        if partial { " (stopped early)" } else { "" },
        first + 1
    );
    for (i, line) in want
        .iter()
        .enumerate()
        .take(first)
        .skip(first.saturating_sub(3))
    {
        let _ = writeln!(msg, "    {:>7}   {line}", i + 1);
    }
    let _ = writeln!(
        msg,
        "  - {:>7}   {}",
        first + 1,
        want.get(first)
            .copied()
            .unwrap_or("<end of the golden file>")
    );
    let _ = writeln!(
        msg,
        "  + {:>7}   {}",
        first + 1,
        got.get(first).copied().unwrap_or("<end of the trace>")
    );
    for (i, line) in got.iter().enumerate().skip(first + 1).take(2) {
        let _ = writeln!(msg, "  + {:>7}   {line}", i + 1);
    }
    Err(msg)
}
