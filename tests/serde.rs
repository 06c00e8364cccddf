//! `Quota` through serde (feature `serde`): the configuration form, validated on the way in.
#![cfg(feature = "serde")]

use std::time::Duration;

use tollgate::Quota;

#[test]
fn a_quota_round_trips_and_reads_from_configuration() {
    let q = Quota::per_minute(100).unwrap().with_burst(10).unwrap();
    let json = serde_json::to_string(&q).unwrap();
    assert_eq!(
        json,
        r#"{"count":100,"period":{"secs":60,"nanos":0},"burst":10}"#
    );
    assert_eq!(serde_json::from_str::<Quota>(&json).unwrap(), q);
    let read: Quota =
        serde_json::from_str(r#"{"count":5,"period":{"secs":1,"nanos":0},"burst":5}"#).unwrap();
    assert_eq!(read.interval(), Duration::from_millis(200));
}

#[test]
fn invalid_configuration_is_the_quota_error() {
    let e = serde_json::from_str::<Quota>(r#"{"count":0,"period":{"secs":1,"nanos":0},"burst":1}"#)
        .unwrap_err();
    assert!(e.to_string().contains("count must be at least 1"), "{e}");
    let e = serde_json::from_str::<Quota>(r#"{"count":1,"period":{"secs":1,"nanos":0},"burst":0}"#)
        .unwrap_err();
    assert!(e.to_string().contains("burst must be at least 1"), "{e}");
}
