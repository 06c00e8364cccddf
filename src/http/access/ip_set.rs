//! [`IpSet`]: a set of [`IpNet`]s for the allow and deny lists, as sorted disjoint address
//! ranges per family (a binary search per lookup, however long the list), which also tell
//! whether the set covers a whole family (an allow list that would disable every limit).
//!
//! Membership is [`IpNet::contains`]'s: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a
//! dual-stack socket reports an IPv4 peer) is matched as its IPv4 address, and IPv4 and IPv6
//! networks stay apart (`::/0` holds no IPv4 client). One addition: an entry written in the
//! mapped range (`::ffff:10.0.0.0/104`) is taken as the IPv4 network it names
//! (`10.0.0.0/8`); otherwise it could never match, since addresses are matched as IPv4.

use std::net::IpAddr;

use super::super::key::client_ip::{canonical, IpNet};

/// The IPv4-mapped range `::ffff:0:0/96`, as a 128-bit range.
const MAPPED: (u128, u128) = (0xffff << 32, (0xffff << 32) | 0xffff_ffff);

/// Networks as merged inclusive ranges, sorted, per family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IpSet {
    v4: Vec<(u128, u128)>,
    v6: Vec<(u128, u128)>,
}

impl IpSet {
    pub(crate) fn new(nets: impl IntoIterator<Item = IpNet>) -> IpSet {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for net in nets {
            let (addr, prefix) = (net.addr(), net.prefix());
            match addr {
                IpAddr::V4(a) => v4.push(range(u128::from(u32::from(a)), 32, prefix)),
                IpAddr::V6(a) => {
                    let bits = u128::from(a);
                    if prefix >= 96 && bits >> 32 == 0xffff {
                        v4.push(range(bits & 0xffff_ffff, 32, prefix - 96));
                    } else {
                        v6.push(range(bits, 128, prefix));
                    }
                }
            }
        }
        IpSet {
            v4: merge(v4),
            v6: merge(v6),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Whether `ip` (IPv4-mapped IPv6 as IPv4) is in one of the networks.
    #[inline]
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match canonical(ip) {
            IpAddr::V4(a) => find(&self.v4, u128::from(u32::from(a))),
            IpAddr::V6(a) => find(&self.v6, u128::from(a)),
        }
    }

    /// Whether the set holds every IPv4 address, or every IPv6 address (the mapped range
    /// aside, whose addresses are matched as IPv4): as an allow list, every client of that
    /// family would bypass every limit.
    pub(crate) fn covers_a_family(&self) -> bool {
        let mut v6 = self.v6.clone();
        v6.push(MAPPED);
        self.v4 == [(0, u128::from(u32::MAX))] || merge(v6) == [(0, u128::MAX)]
    }
}

/// The inclusive range of a `width`-bit network with `prefix` bits (`addr` already masked).
fn range(addr: u128, width: u32, prefix: u8) -> (u128, u128) {
    let host = match u32::from(prefix) {
        p if p >= width => 0,
        p => (u128::MAX >> (128 - width)) >> p,
    };
    (addr & !host, addr | host)
}

/// Sorts and merges overlapping and adjacent ranges.
fn merge(mut ranges: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    ranges.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            // Overlapping or adjacent (`end + 1 == start`; an end at the top absorbs all).
            Some(last) if last.1.checked_add(1).is_none_or(|next| start <= next) => {
                last.1 = last.1.max(end);
            }
            _ => out.push((start, end)),
        }
    }
    out
}

/// Whether `x` is in one of the sorted disjoint `ranges`.
fn find(ranges: &[(u128, u128)], x: u128) -> bool {
    let i = ranges.partition_point(|&(start, _)| start <= x);
    i > 0 && x <= ranges[i - 1].1
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn set(nets: &[&str]) -> IpSet {
        IpSet::new(nets.iter().map(|n| n.parse::<IpNet>().unwrap()))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn members_and_neighbours() {
        let s = set(&["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"]);
        assert!(s.contains(ip("10.255.255.255")));
        assert!(!s.contains(ip("11.0.0.0")));
        assert!(!s.contains(ip("9.255.255.255")));
        assert!(s.contains(ip("192.0.2.7")));
        assert!(!s.contains(ip("192.0.2.8")));
        assert!(!s.contains(ip("192.0.2.6")));
        assert!(s.contains(ip("2001:db8:ffff::1")));
        assert!(!s.contains(ip("2001:db9::")));
        // Mapped addresses match their IPv4 entries; IPv6 networks hold no IPv4 client.
        assert!(s.contains(ip("::ffff:10.1.2.3")));
        assert!(!set(&["::/0"]).contains(ip("10.1.2.3")));
        assert!(!set(&["::/0"]).contains(ip("::ffff:10.1.2.3")));
        // Entries in the mapped range are their IPv4 networks.
        let m = set(&["::ffff:10.0.0.0/104"]);
        assert_eq!(m, set(&["10.0.0.0/8"]));
        assert!(m.contains(ip("10.9.9.9")) && m.contains(ip("::ffff:10.9.9.9")));
        assert!(IpSet::default().is_empty() && !s.is_empty());
    }

    /// Lists that cover every address of a family, split in different ways: the access
    /// list's tests refuse each as an unconfirmed allow-all too.
    pub(in crate::http::access) const WHOLE_FAMILY: [&[&str]; 6] = [
        &["0.0.0.0/0"],
        &["::/0"],
        &["0.0.0.0/1", "128.0.0.0/1"],
        &["::ffff:0:0/96"],
        &["::/1", "8000::/1"],
        &["::/0", "10.0.0.0/8"],
    ];

    #[test]
    fn a_whole_family_is_seen_however_it_is_split() {
        for all in WHOLE_FAMILY {
            assert!(set(all).covers_a_family(), "{all:?}");
        }
        // Every IPv6 address but the mapped range (the siblings of its 96 leading bits, one
        // network each): every IPv6 client.
        let outside_mapped: Vec<IpNet> = (0..96u8)
            .map(|i| {
                let flipped = MAPPED.0 ^ (1u128 << (127 - u32::from(i)));
                IpNet::new(IpAddr::V6(Ipv6Addr::from(flipped)), i + 1).unwrap()
            })
            .collect();
        let s = IpSet::new(outside_mapped.iter().copied());
        assert!(s.covers_a_family());
        assert!(!s.contains(ip("::ffff:1.2.3.4")) && s.contains(ip("::1")));
        assert!(!IpSet::new(outside_mapped[1..].iter().copied()).covers_a_family());
        for not_all in [
            &["0.0.0.0/1"][..],
            &["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"],
            &["::/1"],
            &["10.0.0.0/8", "2001:db8::/32"],
            &[],
        ] {
            assert!(!set(not_all).covers_a_family(), "{not_all:?}");
        }
    }

    /// The plain rule: an address is in an entry when both are IPv4 (an IPv4-mapped address
    /// or entry counted as IPv4) or both IPv6, and their first `prefix` bits agree, read one
    /// by one.
    fn model(entries: &[(IpAddr, u8)], ip: IpAddr) -> bool {
        fn as_v4(a: IpAddr, prefix: u8) -> (bool, Vec<bool>, u8) {
            let bits = |v: u128, width: u32| (0..width).rev().map(|i| v >> i & 1 == 1).collect();
            match a {
                IpAddr::V4(v4) => (true, bits(u128::from(u32::from(v4)), 32), prefix),
                IpAddr::V6(v6) => {
                    let v = u128::from(v6);
                    if v >> 32 == 0xffff && prefix >= 96 {
                        (true, bits(v & 0xffff_ffff, 32), prefix - 96)
                    } else {
                        (false, bits(v, 128), prefix)
                    }
                }
            }
        }
        let (ip_v4, ip_bits, _) = as_v4(ip, 128);
        entries.iter().any(|&(net, prefix)| {
            let (net_v4, net_bits, p) = as_v4(net, prefix);
            net_v4 == ip_v4 && (0..usize::from(p)).all(|i| net_bits[i] == ip_bits[i])
        })
    }

    fn any_addr() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from(v))),
            any::<u32>().prop_map(|v| IpAddr::V6(Ipv4Addr::from(v).to_ipv6_mapped())),
            // Near 10.0.0.0 and 2001:db8::, where the entries below cluster.
            (0u32..512).prop_map(|v| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 - 256 + v))),
            (0u128..512)
                .prop_map(|v| IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) - 256 + v))),
        ]
    }

    fn any_entry() -> impl Strategy<Value = (IpAddr, u8)> {
        any_addr().prop_flat_map(|a| {
            let width: u8 = if a.is_ipv4() { 32 } else { 128 };
            (Just(a), 0..=width)
        })
    }

    proptest! {
        #[test]
        fn membership_is_the_plain_rule(
            entries in proptest::collection::vec(any_entry(), 0..8),
            probes in proptest::collection::vec(any_addr(), 1..32),
        ) {
            let nets: Vec<IpNet> = entries.iter().map(|&(a, p)| IpNet::new(a, p).unwrap()).collect();
            let s = IpSet::new(nets.iter().copied());
            for ip in probes {
                prop_assert_eq!(s.contains(ip), model(&entries, ip), "{:?} {:?}", nets, ip);
            }
            // Each entry's own address, and the addresses just outside it.
            for &(a, _) in &entries {
                prop_assert_eq!(s.contains(a), model(&entries, a));
            }
        }

        /// A whole family is reported exactly when no probe of it falls outside the set.
        #[test]
        fn a_covered_family_has_no_address_outside(
            entries in proptest::collection::vec(any_entry(), 0..6),
            probes in proptest::collection::vec(any_addr(), 1..64),
        ) {
            let s = IpSet::new(entries.iter().map(|&(a, p)| IpNet::new(a, p).unwrap()));
            if s.covers_a_family() {
                let v4_all = probes.iter().filter(|ip| canonical(**ip).is_ipv4()).all(|ip| s.contains(*ip));
                let v6_all = probes.iter().filter(|ip| canonical(**ip).is_ipv6()).all(|ip| s.contains(*ip));
                prop_assert!(v4_all || v6_all);
            }
        }
    }
}
