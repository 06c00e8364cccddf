//! The configuration read from files: round trips, the builder's refusals, hostile input.

use proptest::prelude::*;

use super::*;
use crate::http::{Backend, Enforcement};
use crate::{
    Algorithm, FixedWindow, Gcra, KeyedRateLimiter, QuotaError, SlidingLog, SlidingWindow,
    WeightedWindow,
};

const FULL: &str = r#"
policy_name = "per-client"
default = { count = 100, per = "minute" }

[key]
source = "client_ip"
trust = { proxies = ["10.0.0.0/8", "fd00::/8"] }
header = "forwarded"
ipv6_prefix = 56

[[routes]]
name = "login"
pattern = "POST /login"
quota = { count = 5, per = "minute", burst = 2 }
access = { deny_networks = ["192.0.2.0/24"] }

[limiters]
max_keys = 50000
sweep_interval_ms = 10000
when_full = "allow_untracked"

[access]
allow_networks = ["127.0.0.1/32"]

[shadow]
policies = ["login"]
headers = true

[responses]
headers = "x_rate_limit"
shape_max_delay_ms = 500
on_key_error = { status = 401 }
never_status = 413
grpc = false
"#;

fn parse(text: &str) -> Result<LayerConfig, toml::de::Error> {
    toml::from_str(text)
}

#[test]
fn a_full_configuration_builds_and_round_trips() {
    let config = parse(FULL).unwrap();
    let layer = config.build().unwrap();
    let names: Vec<&str> = layer.policies().map(|(n, _)| n).collect();
    assert_eq!(names, ["login", "per-client"]);
    assert_eq!(layer.enforcement("login"), Some(Enforcement::Shadow));
    assert_eq!(layer.enforcement("per-client"), Some(Enforcement::Enforce));
    let login = layer.limiter("login").unwrap().quota();
    assert_eq!((login.count(), login.burst()), (5, 2));
    let text = toml::to_string(&config).unwrap();
    assert_eq!(parse(&text).unwrap(), config);
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(serde_json::from_str::<LayerConfig>(&json).unwrap(), config);
}

#[test]
fn an_empty_file_is_a_layer_without_limits() {
    let config = parse("").unwrap();
    assert_eq!(config, LayerConfig::default());
    assert_eq!(config.build().unwrap().policies().count(), 0);
}

#[test]
fn bad_quotas_are_the_builders_quota_errors() {
    let zero = parse("default = { count = 0, per = 'second' }").unwrap();
    assert_eq!(
        zero.build().unwrap_err(),
        BuildError::Quota(QuotaError::ZeroCount)
    );
    let burst = parse("routes = [{ name = 'a', pattern = '/a', quota = { count = 1, per = 'second', burst = 0 } }]")
        .unwrap();
    assert!(matches!(burst.build(), Err(BuildError::Quota(_))));
}

#[test]
fn bad_routes_and_names_are_the_builders_errors() {
    let route = parse(
        "routes = [{ name = 'a', pattern = 'login', quota = { count = 1, per = 'second' } }]",
    )
    .unwrap();
    assert!(matches!(route.build(), Err(BuildError::Route(_))));
    let name = parse(
        "routes = [{ name = 'a\"b', pattern = '/a', quota = { count = 1, per = 'second' } }]",
    )
    .unwrap();
    assert!(matches!(name.build(), Err(BuildError::PolicyName(_))));
}

#[test]
fn settings_that_name_no_policy_are_refused() {
    let shadow =
        parse("default = { count = 1, per = 'second' }\nshadow = { policies = ['logn'] }").unwrap();
    assert_eq!(
        shadow.build().unwrap_err(),
        BuildError::UnknownPolicy("logn".into())
    );
    // Networks need a client address: a header key has none.
    let lists = parse(
        "key = { source = 'header', name = 'x-api-key' }\naccess = { deny_networks = ['192.0.2.0/24'] }",
    )
    .unwrap();
    assert_eq!(lists.build().unwrap_err(), BuildError::NoClientAddr);
    let all =
        parse("key = { source = 'peer_ip' }\naccess = { allow_networks = ['0.0.0.0/0'] }").unwrap();
    assert!(matches!(
        all.build(),
        Err(BuildError::AllowsEveryAddress(_))
    ));
}

#[test]
fn unknown_and_misplaced_fields_are_refused_when_read() {
    for text in [
        "defualt = { count = 1, per = 'second' }",
        "default = { count = 1, per = 'second', brust = 3 }",
        "default = { count = 1, per = 'fortnight' }",
        "key = { source = 'peer_ip', trust = { hops = 1 } }", // a client_ip setting
        "key = { source = 'client_ip' }",                     // trusting nobody said
        "key = { source = 'header', name = 'bad header' }",
        "limiters = { max_keys = 0 }",
        "access = { deny_networks = ['10.0.0.0/33'] }",
        "responses = { never_status = 1000 }",
        "responses = { on_key_error = 'sometimes' }",
        "shadow = { policy = ['login'] }",
        "[[routes]]\nname = 'a'\npattern = '/a'\nquota = { count = 1, per = 'second' }\nlimit = 3",
    ] {
        assert!(parse(text).is_err(), "{text}");
    }
    // Values are refused with what was read and why.
    let net = parse("access = { deny_networks = ['10.0.0.0/33'] }").unwrap_err();
    assert!(net.message().contains("10.0.0.0/33"), "{net}");
    let status = parse("responses = { never_status = 1000 }").unwrap_err();
    assert!(status.message().contains("1000"), "{status}");
}

/// What a limiter decided at each step: (allowed, remaining).
type Script = Vec<(bool, u64)>;

/// The sequence of (allowed, remaining) a limiter gives one key for a fixed list of costs,
/// all within the first hour of a per-hour quota (so nothing refills meanwhile).
fn script(check: impl Fn(u64) -> crate::Decision) -> Script {
    [1, 2, 3, 1, 7, 1, 0, 2]
        .into_iter()
        .map(|cost| {
            let d = check(cost);
            (d.allowed, d.remaining)
        })
        .collect()
}

/// What a limiter built in code with `alg` decides for the same script.
fn in_code<A: Algorithm>(alg: A) -> Script {
    let q = Quota::per_hour(6).unwrap();
    let l = KeyedRateLimiter::<ConfigKey>::builder(q)
        .algorithm(alg)
        .unwrap()
        .build();
    script(|cost| l.check_n(&ConfigKey::Global, cost))
}

#[test]
fn each_algorithm_from_a_file_decides_as_the_same_limiter_in_code() {
    let cases: [(&str, AlgorithmConfig, Script); 7] = [
        ("", AlgorithmConfig::Gcra, in_code(Gcra)),
        ("algorithm = 'gcra'", AlgorithmConfig::Gcra, in_code(Gcra)),
        (
            "algorithm = 'fixed_window'",
            AlgorithmConfig::FixedWindow {
                epoch_aligned: false,
            },
            in_code(FixedWindow::new()),
        ),
        (
            "algorithm = { fixed_window = { epoch_aligned = true } }",
            AlgorithmConfig::FixedWindow {
                epoch_aligned: true,
            },
            in_code(FixedWindow::epoch_aligned()),
        ),
        (
            "algorithm = { sliding_window = { sub_windows = 10 } }",
            AlgorithmConfig::SlidingWindow { sub_windows: 10 },
            in_code(SlidingWindow::new(10)),
        ),
        (
            "algorithm = 'sliding_log'",
            AlgorithmConfig::SlidingLog,
            in_code(SlidingLog),
        ),
        (
            "algorithm = 'weighted_window'",
            AlgorithmConfig::WeightedWindow,
            in_code(WeightedWindow),
        ),
    ];
    for (alg, expected, decisions) in cases {
        let text = format!("default = {{ count = 6, per = 'hour', {alg} }}").replace(", }", " }");
        let config = parse(&text).unwrap();
        assert_eq!(config.default.unwrap().algorithm, expected, "{text}");
        let layer = config.build().unwrap();
        let limiter = layer.limiter("default").unwrap();
        assert_eq!(limiter.algorithm(), expected, "{text}");
        assert_eq!(limiter.quota(), Quota::per_hour(6).unwrap());
        // The settings the file gives (or the builder's defaults) apply to every algorithm.
        assert!(limiter.keys_bounded(), "{text}");
        let got = script(|cost| limiter.check_n(&ConfigKey::Global, cost));
        assert_eq!(got, decisions, "{text}");
        assert_eq!(limiter.len(), 1, "{text}");
    }
}

#[test]
fn algorithms_round_trip_through_toml_and_json() {
    let text = r#"
        default = { count = 100, per = "minute", algorithm = "sliding_log" }
        [[routes]]
        name = "a"
        pattern = "/a"
        quota = { count = 10, per = "second", algorithm = { sliding_window = { sub_windows = 10 } } }
        [[routes]]
        name = "b"
        pattern = "/b"
        quota = { count = 10, per = "day", algorithm = { fixed_window = { epoch_aligned = true } } }
        [[routes]]
        name = "c"
        pattern = "/c"
        quota = { count = 10, per = "day", algorithm = "fixed_window" }
        [[routes]]
        name = "d"
        pattern = "/d"
        quota = { count = 10, per = "day", algorithm = "weighted_window" }
        [[routes]]
        name = "e"
        pattern = "/e"
        quota = { count = 10, per = "day", burst = 3 }
    "#;
    let config = parse(text).unwrap();
    config.build().unwrap();
    let again = toml::to_string(&config).unwrap();
    assert_eq!(parse(&again).unwrap(), config, "{again}");
    // GCRA, the default, is left out when written.
    assert!(!again.contains("gcra"), "{again}");
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(serde_json::from_str::<LayerConfig>(&json).unwrap(), config);
    // YAML's flow style is JSON's: the same data model, as a YAML file writes it.
    let yaml_like = r#"{"default": {"count": 5, "per": "minute", "algorithm": {"sliding_window": {"sub_windows": 6}}}}"#;
    let read: LayerConfig = serde_json::from_str(yaml_like).unwrap();
    assert_eq!(
        read.default.unwrap().algorithm,
        AlgorithmConfig::SlidingWindow { sub_windows: 6 }
    );
}

#[test]
fn unknown_algorithms_and_fields_are_refused_with_the_names_expected() {
    for (text, says) in [
        (
            "algorithm = 'token_bucket'",
            "unknown variant `token_bucket`",
        ),
        (
            "algorithm = { slidng_log = {} }",
            "unknown variant `slidng_log`",
        ),
        (
            "algorithm = { sliding_window = { sub_window = 10 } }",
            "sub_window",
        ),
        (
            "algorithm = { fixed_window = { epoch = true } }",
            "unknown field `epoch`",
        ),
        (
            "algorithm = { sliding_log = { sub_windows = 2 } }",
            "unknown field `sub_windows`",
        ),
        ("algorithm = 'sliding_window'", "sub_windows"),
        (
            "algorithm = { sliding_window = {} }",
            "missing field `sub_windows`",
        ),
        (
            "algorithm = { sliding_window = { sub_windows = -1 } }",
            "-1",
        ),
        (
            "algorithm = { gcra = {}, sliding_log = {} }",
            "one algorithm",
        ),
        ("algorithm = {}", "one algorithm"),
        ("algorithm = 3", "an algorithm"),
    ] {
        let text = format!("default = {{ count = 6, per = 'hour', {text} }}");
        let err = parse(&text).unwrap_err();
        assert!(err.message().contains(says), "{text}: {err}");
    }
}

#[test]
fn parameters_an_algorithm_refuses_are_the_builders_quota_errors() {
    for alg in [
        "{ sliding_window = { sub_windows = 0 } }",
        "{ sliding_window = { sub_windows = 1 } }",
        "{ sliding_window = { sub_windows = 65 } }",
        "{ sliding_window = { sub_windows = 7 } }", // an hour is not 7 whole-ns sevenths
    ] {
        let config = parse(&format!(
            "routes = [{{ name = 'a', pattern = '/a', quota = {{ count = 6, per = 'hour', algorithm = {alg} }} }}]"
        ))
        .unwrap();
        let err = config.build().unwrap_err();
        assert!(
            matches!(err, BuildError::Quota(QuotaError::Unsupported(_))),
            "{alg}: {err:?}"
        );
    }
    // A burst other than the count: the window algorithms have none of their own.
    let bursty =
        parse("default = { count = 6, per = 'hour', burst = 2, algorithm = 'sliding_log' }")
            .unwrap();
    assert!(matches!(bursty.build(), Err(BuildError::Quota(_))));
}

#[test]
fn a_quotas_text_names_its_algorithm_unless_gcra() {
    let q = |text: &str| {
        parse(&format!("default = {text}"))
            .unwrap()
            .default
            .unwrap()
    };
    assert_eq!(q("{ count = 5, per = 'minute' }").to_string(), "5/minute");
    assert_eq!(
        q("{ count = 5, per = 'minute', burst = 2 }").to_string(),
        "5/minute (burst 2)"
    );
    assert_eq!(
        q("{ count = 5, per = 'minute', algorithm = 'sliding_log' }").to_string(),
        "5/minute, sliding_log"
    );
    assert_eq!(
        q("{ count = 6, per = 'minute', algorithm = { sliding_window = { sub_windows = 6 } } }")
            .to_string(),
        "6/minute, sliding_window (6 sub-windows)"
    );
    assert_eq!(
        q("{ count = 6, per = 'day', algorithm = { fixed_window = { epoch_aligned = true } } }")
            .to_string(),
        "6/day, fixed_window (epoch aligned)"
    );
}

proptest! {
    #[test]
    fn hostile_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(text) = std::str::from_utf8(&bytes) {
            if let Ok(config) = parse(text) {
                let _ = config.build();
            }
        }
    }

    #[test]
    fn hostile_fragments_parse_or_are_refused(
        parts in proptest::collection::vec(
            prop::sample::select(vec![
                "default = ", "{ count = ", "per = 'second'", "per = 'day'", "burst = ", "}",
                "18446744073709551615", "0", "1", "-1", "1e400", ",", "\n", "[[routes]]",
                "name = 'x'", "pattern = '/x/{*y}'", "pattern = 'GET //'", "quota = ",
                "[key]", "source = 'client_ip'", "trust = { hops = 18446744073709551615 }",
                "ipv6_prefix = 255", "[limiters]", "sweep_interval_ms = 18446744073709551615",
                "max_keys = 18446744073709551615", "[responses]", "shape_max_delay_ms = 18446744073709551615",
                "[shadow]", "all = true", "policies = ['x', 'default']", "\"\u{0}\"", "'\u{feff}'",
                "algorithm = ", "'sliding_log'", "'fixed_window'", "'sliding_window'", "'nope'",
                "{ sliding_window = { sub_windows = ", "{ fixed_window = { epoch_aligned = true } }",
                "{ gcra = {} }", "4294967296", "{ weighted_window = ", "sub_windows = 10",
            ]),
            0..24,
        )
    ) {
        let text = parts.join(" ");
        if let Ok(config) = parse(&text) {
            if let Ok(layer) = config.build() {
                // What built round-trips.
                let again = parse(&toml::to_string(&config).unwrap()).unwrap();
                prop_assert_eq!(&again, &config);
                drop(layer);
            }
        }
    }
}

#[test]
fn an_algorithm_change_names_the_quota_only_where_more_changed() {
    let q = |count, algorithm| QuotaConfig {
        count,
        per: Per::Minute,
        burst: None,
        algorithm,
    };
    let change = |from, to| {
        Change::Algorithm {
            policy: "login".into(),
            from,
            to,
        }
        .to_string()
    };
    assert_eq!(
        change(
            q(3, AlgorithmConfig::Gcra),
            q(3, AlgorithmConfig::SlidingLog)
        ),
        r#"policy "login": algorithm gcra -> sliding_log; its keys start afresh"#
    );
    assert_eq!(
        change(
            q(3, AlgorithmConfig::Gcra),
            q(5, AlgorithmConfig::SlidingLog)
        ),
        r#"policy "login": algorithm gcra -> sliding_log, quota 3/minute -> 5/minute, sliding_log; its keys start afresh"#
    );
}
