//! The configuration read from files: round trips, the builder's refusals, hostile input.

use proptest::prelude::*;

use super::*;
use crate::http::Enforcement;
use crate::QuotaError;

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
