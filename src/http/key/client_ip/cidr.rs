//! [`IpNet`]: an IP network in CIDR notation, and the address arithmetic the client-IP keys
//! share (masking to a prefix, IPv4-mapped IPv6 as IPv4).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or a single address
/// (`192.0.2.7`, meaning /32 or /128).
///
/// ```
/// use tollgate::http::IpNet;
///
/// let net: IpNet = "10.0.0.0/8".parse().unwrap();
/// assert!(net.contains("10.1.2.3".parse().unwrap()));
/// assert!(!net.contains("11.0.0.1".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<IpNet>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why a string is not an [`IpNet`].
///
/// ```
/// let e = "10.0.0.0/40".parse::<tollgate::http::IpNet>().unwrap_err();
/// assert!(e.to_string().contains("prefix"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpNetError(&'static str);

impl fmt::Display for IpNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for IpNetError {}

impl IpNet {
    /// The network of `addr` with `prefix` leading bits (host bits are cleared). A network
    /// inside `::ffff:0:0/96` (IPv4-mapped IPv6) is the IPv4 network it maps, as addresses are
    /// compared in IPv4 form when they are mapped.
    ///
    /// # Errors
    /// A prefix longer than the address (32 for IPv4, 128 for IPv6).
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    /// let net = tollgate::http::IpNet::new(Ipv4Addr::new(192, 168, 7, 9).into(), 16).unwrap();
    /// assert_eq!(net.to_string(), "192.168.0.0/16");
    /// ```
    pub fn new(addr: IpAddr, prefix: u8) -> Result<IpNet, IpNetError> {
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix > max {
            return Err(IpNetError("prefix longer than the address"));
        }
        // Addresses are compared in IPv4 form when they are IPv4-mapped (`canonical`), so a
        // network inside `::ffff:0:0/96` is the IPv4 network it maps.
        Ok(IpNet::within(addr, prefix))
    }

    /// [`new`](Self::new) for a prefix known to fit the address.
    fn within(addr: IpAddr, prefix: u8) -> IpNet {
        // Addresses are compared in IPv4 form when they are IPv4-mapped (`canonical`), so a
        // network inside `::ffff:0:0/96` is the IPv4 network it maps.
        if let IpAddr::V6(v6) = addr {
            match v6.to_ipv4_mapped() {
                Some(v4) if prefix >= 96 => return IpNet::within(IpAddr::V4(v4), prefix - 96),
                _ => {}
            }
        }
        IpNet {
            addr: mask(addr, prefix),
            prefix,
        }
    }

    /// The network's address (host bits cleared).
    pub(crate) fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub(crate) fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is in this network (IPv4-mapped IPv6 addresses count as IPv4).
    ///
    /// ```
    /// let net: tollgate::http::IpNet = "2001:db8::/32".parse().unwrap();
    /// assert!(net.contains("2001:db8:1::5".parse().unwrap()));
    /// ```
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        same_family(ip, self.addr) && mask(ip, self.prefix) == self.addr
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(s: &str) -> Result<IpNet, IpNetError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| IpNetError("not an IP address"))?;
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .map_err(|_| IpNetError("prefix is not a number from 0 to 128"))?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        IpNet::new(addr, prefix)
    }
}

/// From the `ipnet` crate's network (feature `ipnet`), with the same canonical form as
/// [`IpNet::new`] (a network written as IPv4-mapped IPv6 is its IPv4 network).
///
/// ```
/// # #[cfg(feature = "ipnet")] {
/// use tollgate::http::{ClientIp, IpNet};
///
/// // As a configuration crate or serde would give them.
/// let proxies: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "::ffff:192.0.2.0/120".parse().unwrap()];
/// let nets: Vec<IpNet> = proxies.iter().copied().map(IpNet::from).collect();
/// assert_eq!(nets[1].to_string(), "192.0.2.0/24");
/// let _client = ClientIp::trusted_proxies(nets);
/// # }
/// ```
#[cfg(feature = "ipnet")]
impl From<ipnet::IpNet> for IpNet {
    fn from(net: ipnet::IpNet) -> IpNet {
        IpNet::within(net.addr(), net.prefix_len())
    }
}

/// From the `ipnet` crate's IPv4 network (feature `ipnet`).
///
/// ```
/// # #[cfg(feature = "ipnet")] {
/// let net: ipnet::Ipv4Net = "10.1.0.0/16".parse().unwrap();
/// assert_eq!(tollgate::http::IpNet::from(net).to_string(), "10.1.0.0/16");
/// # }
/// ```
#[cfg(feature = "ipnet")]
impl From<ipnet::Ipv4Net> for IpNet {
    fn from(net: ipnet::Ipv4Net) -> IpNet {
        IpNet::within(IpAddr::V4(net.addr()), net.prefix_len())
    }
}

/// From the `ipnet` crate's IPv6 network (feature `ipnet`); an IPv4-mapped one is its IPv4
/// network.
///
/// ```
/// # #[cfg(feature = "ipnet")] {
/// let net: ipnet::Ipv6Net = "2001:db8::/32".parse().unwrap();
/// assert_eq!(tollgate::http::IpNet::from(net).to_string(), "2001:db8::/32");
/// # }
/// ```
#[cfg(feature = "ipnet")]
impl From<ipnet::Ipv6Net> for IpNet {
    fn from(net: ipnet::Ipv6Net) -> IpNet {
        IpNet::within(IpAddr::V6(net.addr()), net.prefix_len())
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`: one client, one key, whichever socket family saw it.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The first `prefix` bits of `ip` (prefixes past the width keep every bit).
pub(super) fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let keep = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & keep))
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & keep))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ip_net_parses_and_masks() {
        assert_eq!(
            "10.1.2.3/8".parse::<IpNet>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            "10.1.2.3".parse::<IpNet>().unwrap().to_string(),
            "10.1.2.3/32"
        );
        assert_eq!("::1".parse::<IpNet>().unwrap().to_string(), "::1/128");
        assert_eq!(
            "0.0.0.0/0".parse::<IpNet>().unwrap().to_string(),
            "0.0.0.0/0"
        );
        assert!("0.0.0.0/0"
            .parse::<IpNet>()
            .unwrap()
            .contains(ip("8.8.8.8")));
        assert!(!"0.0.0.0/0".parse::<IpNet>().unwrap().contains(ip("::1")));
        assert!("::/0".parse::<IpNet>().unwrap().contains(ip("2001:db8::1")));
        for bad in [
            "",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "x/8",
            "10.0.0.0/-1",
            "10/8",
        ] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
        // A mapped IPv4 address is in an IPv4 network.
        assert!("127.0.0.0/8"
            .parse::<IpNet>()
            .unwrap()
            .contains(ip("::ffff:127.0.0.1")));
    }

    /// A network written in IPv4-mapped IPv6 form is the IPv4 network it maps (addresses are
    /// compared in that form), so a trusted proxy written either way is trusted.
    #[test]
    fn a_mapped_network_is_its_ipv4_network() {
        let mapped: IpNet = "::ffff:10.0.0.0/104".parse().unwrap();
        assert_eq!(mapped, "10.0.0.0/8".parse().unwrap());
        assert_eq!(mapped.to_string(), "10.0.0.0/8");
        assert!(mapped.contains(ip("10.1.2.3")));
        assert!(mapped.contains(ip("::ffff:10.1.2.3")));
        assert!(!mapped.contains(ip("11.0.0.1")));
        let host: IpNet = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(host.to_string(), "192.0.2.7/32");
        // Shorter than the mapped prefix: an IPv6 network, as written.
        assert_eq!(
            "::ffff:0:0/95".parse::<IpNet>().unwrap().to_string(),
            "::fffe:0:0/95"
        );
    }

    #[cfg(feature = "ipnet")]
    proptest::proptest! {
        /// Any `ipnet` network converts, never panics, and contains exactly the addresses
        /// `ipnet` says it does, except that an IPv4-mapped address counts as the IPv4 address
        /// it maps (as the layer compares client addresses), so only a network inside
        /// `::ffff:0:0/96` holds it.
        #[test]
        fn ipnet_networks_convert_exactly(
            bits in proptest::prelude::any::<u128>(),
            mapped in proptest::prelude::any::<bool>(),
            prefix in 0u8..=128,
            probe in proptest::prelude::any::<u128>(),
            near in proptest::prelude::any::<bool>(),
            probe_mapped in proptest::prelude::any::<bool>(),
        ) {
            let bits = if mapped { 0xffff_0000_0000 | (bits & 0xffff_ffff) } else { bits };
            let v6 = Ipv6Addr::from(bits);
            let theirs = ipnet::Ipv6Net::new(v6, prefix).unwrap();
            let ours = IpNet::from(theirs);
            // A probe inside the network half the time: the network's address with random host bits.
            let host = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            let p = if near { (u128::from(theirs.network()) & !host) | (probe & host) } else { probe };
            let p = if probe_mapped { 0xffff_0000_0000 | (p & 0xffff_ffff) } else { p };
            let p = Ipv6Addr::from(p);
            // `ipnet`'s answer, where a mapped address counts as the IPv4 address it maps
            // (only a network inside `::ffff:0:0/96` holds it).
            let expected = theirs.contains(&p) && (p.to_ipv4_mapped().is_none() || prefix >= 96);
            proptest::prop_assert_eq!(ours.contains(IpAddr::V6(p)), expected, "{} {}", theirs, p);
            let v4 = ipnet::Ipv4Net::new(Ipv4Addr::from(bits as u32), prefix.min(32)).unwrap();
            let p4 = Ipv4Addr::from(probe as u32);
            proptest::prop_assert_eq!(IpNet::from(v4).contains(IpAddr::V4(p4)), v4.contains(&p4));
            proptest::prop_assert_eq!(IpNet::from(ipnet::IpNet::V4(v4)), IpNet::from(v4));
        }
    }

    #[test]
    fn masks_every_prefix_without_overflow() {
        for p in 0..=200u8 {
            let _ = mask(ip("255.255.255.255"), p);
            let _ = mask(ip("ffff::ffff"), p);
        }
        assert_eq!(mask(ip("1.2.3.4"), 0), ip("0.0.0.0"));
        assert_eq!(mask(ip("1.2.3.4"), 24), ip("1.2.3.0"));
        assert_eq!(mask(ip("2001:db8:1:2:3:4:5:6"), 64), ip("2001:db8:1:2::"));
        assert_eq!(
            mask(ip("2001:db8:1:2:3:4:5:6"), 128),
            ip("2001:db8:1:2:3:4:5:6")
        );
    }
}
