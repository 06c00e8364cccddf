//! Serde forms of the `http` and CIDR types a file names, parsed by their own `FromStr`
//! (so a bad network, header name or status is refused where it is read, with its reason).

use serde::de::Unexpected;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What was read, refused with what was expected and the parser's reason.
fn refused<E: serde::de::Error>(got: Unexpected<'_>, what: &str, why: impl std::fmt::Display) -> E {
    E::invalid_value(got, &format!("{what} ({why})").as_str())
}

/// Networks as CIDR strings (`"10.0.0.0/8"`).
pub(super) mod nets {
    use super::*;
    use crate::http::IpNet;

    pub(crate) fn serialize<S: Serializer>(nets: &[IpNet], s: S) -> Result<S::Ok, S::Error> {
        let text: Vec<String> = nets.iter().map(ToString::to_string).collect();
        text.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        let text = Vec::<String>::deserialize(d)?;
        text.iter()
            .map(|t| {
                t.parse()
                    .map_err(|e| refused(Unexpected::Str(t), "a network such as 10.0.0.0/8", e))
            })
            .collect()
    }
}

/// A header name as a string.
pub(super) mod header_name {
    use super::*;
    use http::HeaderName;

    pub(crate) fn serialize<S: Serializer>(name: &HeaderName, s: S) -> Result<S::Ok, S::Error> {
        name.as_str().serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HeaderName, D::Error> {
        let text = String::deserialize(d)?;
        HeaderName::from_bytes(text.as_bytes())
            .map_err(|e| refused(Unexpected::Str(&text), "a header name", e))
    }
}

/// A status code as a number (`401`).
pub(super) mod status_code {
    use super::*;
    use http::StatusCode;

    pub(crate) fn serialize<S: Serializer>(status: &StatusCode, s: S) -> Result<S::Ok, S::Error> {
        status.as_u16().serialize(s)
    }

    pub(crate) fn from_u16<E: serde::de::Error>(n: u16) -> Result<StatusCode, E> {
        StatusCode::from_u16(n).map_err(|e| refused(Unexpected::Unsigned(n.into()), "a status", e))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StatusCode, D::Error> {
        let n = u16::deserialize(d)?;
        from_u16(n)
    }
}

/// An optional status code as a number.
pub(super) mod status {
    use super::*;
    use http::StatusCode;

    // serde's `with` hands the field itself, so the signature is `&Option<_>`.
    #[allow(clippy::ref_option)]
    pub(crate) fn serialize<S: Serializer>(
        status: &Option<StatusCode>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        status.map(|c| c.as_u16()).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<StatusCode>, D::Error> {
        Option::<u16>::deserialize(d)?
            .map(super::status_code::from_u16)
            .transpose()
    }
}
