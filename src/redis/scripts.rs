//! The Lua scripts (`scripts/*.lua`) and their Rust side: each script's text after the shared
//! prelude, what an algorithm's script is and how a check calls it ([`Spec`]), the scripts'
//! integer parameters ([`Params`]) and the one reply shape every script's check returns
//! ([`CheckReply`]).

mod params;
mod reply;

use std::sync::LazyLock;

use super::connection::client::{LuaScript, ScriptClient};
use super::connection::failure::Failure;

pub(crate) use params::{clamp_i64, Params, MAX_SPAN_US};
pub(crate) use reply::CheckReply;

/// A script's text: the shared prelude, then `scripts/<part>` for each part.
macro_rules! script {
    ($($part:literal),+) => {
        concat!(include_str!("scripts/prelude.lua"), $(include_str!(concat!("scripts/", $part))),+)
    };
}

/// The scripts of the algorithms, each after the shared prelude (and `exact.lua`, the exact
/// product comparisons, where the script needs them: GCRA's after its hot path, which returns
/// before building them; `window.lua`, the window scripts' arguments and block stamps, for the
/// windows). GCRA's check on a plain key is decided in `gcra_fast.lua`, before the prelude, so
/// that it builds none of the prelude's closures (each an allocation on the server).
pub(crate) const GCRA: &str = concat!(
    include_str!("scripts/gcra_fast.lua"),
    script!("gcra.lua", "exact.lua", "gcra_general.lua")
);
pub(crate) const FIXED_WINDOW: &str = script!("window.lua", "fixed_window.lua");
pub(crate) const SLIDING_LOG: &str = script!("window.lua", "sliding_log.lua");
pub(crate) const SLIDING_WINDOW: &str = script!("window.lua", "sliding_window.lua");
pub(crate) const WEIGHTED: &str = script!("exact.lua", "window.lua", "weighted.lua");

/// The parts of an algorithm (not nameable outside the crate, which seals the trait).
pub struct Spec {
    pub(crate) script: LazyLock<LuaScript>,
    /// GCRA waits by reservation; the windows by deciding again after `retry_after`.
    pub(crate) reserves: bool,
    /// The script has a `batch` op (several checks at one instant): it can coalesce.
    pub(crate) batches: bool,
    /// A check's reply as the script sent it, with the check's (clamped) `n`, to the check
    /// reply every script's caller reads ([`CheckReply`]); GCRA sends less and this fills in
    /// the rest.
    pub(crate) expand: fn(Vec<i64>, i64, Params) -> Vec<i64>,
    /// The script has the ops `block`, `penalize` and `reward` (`rate/adjust.rs`), each replying
    /// in full (the [`CheckReply`] shape, never through `expand`).
    pub(crate) adjusts: bool,
}

impl Spec {
    /// Whether the script has the `group` op (several keys' checks in one call): GCRA's.
    pub(crate) fn groups(&self) -> bool {
        self.script.body == GCRA
    }

    /// Runs the script's check of `n` permits on `state`: the reply in [`CheckReply`]'s shape.
    pub(crate) async fn check(
        &'static self,
        client: &ScriptClient,
        state: &str,
        n: u64,
        p: Params,
    ) -> Result<Vec<i64>, Failure> {
        let (args, len) = p.check_args(n);
        let reply = client
            .eval(&self.script, state, "check", &args[..len])
            .await?;
        Ok((self.expand)(reply, p.clamp(n), p))
    }
}

/// The `expand` of the scripts that reply a check in full.
pub(crate) fn as_is(reply: Vec<i64>, _n: i64, _p: Params) -> Vec<i64> {
    reply
}

/// `fn spec()` of a [`RedisAlgorithm`](super::RedisAlgorithm) implementation whose script is
/// `$body` (one of this module's script texts); `$reserves`: it waits by reservation (GCRA);
/// `$batches`: it has the `batch` op; `$adjusts`: it has the `block`, `penalize` and `reward`
/// ops ([`Spec::adjusts`]); `$expand`: its check reply to the full one ([`Spec::expand`],
/// [`as_is`] unless given).
macro_rules! script_spec {
    (@expand) => { $crate::redis::scripts::as_is };
    (@expand $expand:expr_2021) => { $expand };
    ($body:expr_2021, reserves: $reserves:literal, batches: $batches:literal, adjusts: $adjusts:literal $(, expand: $expand:expr_2021)?) => {
        fn spec() -> &'static $crate::redis::scripts::Spec {
            static SPEC: $crate::redis::scripts::Spec = $crate::redis::scripts::Spec {
                script: ::std::sync::LazyLock::new(|| $crate::redis::connection::client::LuaScript::new($body)),
                reserves: $reserves,
                batches: $batches,
                expand: $crate::redis::scripts::script_spec!(@expand $($expand)?),
                adjusts: $adjusts,
            };
            &SPEC
        }
    };
}

pub(crate) use script_spec;
