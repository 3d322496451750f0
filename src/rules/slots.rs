//! Redis Cluster's hash slots, as pure rules: a key's slot (CRC16 of its hash tag, or of the
//! whole key), the tagged key a resource gets on a lock with a cluster member (so that its lock
//! key and fence counter share a slot), the checks on prefixes and names that keep that true,
//! and [`SlotMap`]: which shard of one cluster member serves which slot.

/// Slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes
/// keys with; one table lookup per byte.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        let index = usize::from(((crc >> 8) as u8) ^ byte);
        (crc << 8) ^ CRC16_TABLE[index]
    })
}

/// The part of `key` Redis Cluster hashes: between the first `{` and the first `}` after it,
/// if that is not empty; else the whole key.
fn hashed_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else {
        return key;
    };
    let after = key.get(open.saturating_add(1)..).unwrap_or_default();
    match after.iter().position(|&byte| byte == b'}') {
        Some(close) if close > 0 => after.get(..close).unwrap_or(key),
        _ => key,
    }
}

/// The hash slot of `key`, as `CLUSTER KEYSLOT` answers it.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    // 16384 is a power of two: the mask is the `% 16384` Redis takes.
    crc16(hashed_part(key)) & 0x3FFF
}

/// The part of a lock key after the prefix on a lock with a cluster member: the resource inside
/// braces, its hash tag, so that its lock key and fence counter (the same tail under another
/// prefix) share a slot. Injective, as the bare name is.
pub(crate) fn tagged(resource: &[u8]) -> Vec<u8> {
    let mut tail = Vec::with_capacity(resource.len().saturating_add(2));
    tail.push(b'{');
    tail.extend_from_slice(resource);
    tail.push(b'}');
    tail
}

/// Whether a key prefix keeps the resource's tag the key's hash tag: it must not hold a `{`
/// (which would open the tag inside the prefix, putting every key in one slot, or lock key and
/// fence counter in different ones).
pub(crate) fn prefix_keeps_tag(prefix: &[u8]) -> bool {
    !prefix.contains(&b'{')
}

/// Whether a resource's tagged key hashes by its tag: a name starting with `}` would make the
/// tag empty, and Redis would hash the whole key (lock key and fence counter apart).
pub(crate) fn resource_has_tag(resource: &[u8]) -> bool {
    resource.first() != Some(&b'}')
}

/// Which shard of one cluster member serves each slot, by the shard's number in the member's
/// list of known shards; a slot no shard was seen serving has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotMap {
    owners: Box<[Option<u16>]>,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            owners: vec![None; SLOTS].into_boxed_slice(),
        }
    }
}

impl SlotMap {
    /// A map from `(first slot, last slot, shard)` ranges, as `CLUSTER SLOTS` lists them; slots
    /// out of range are ignored, later ranges win.
    pub(crate) fn from_ranges(ranges: impl IntoIterator<Item = (u16, u16, u16)>) -> SlotMap {
        let mut map = SlotMap::default();
        for (first, last, shard) in ranges {
            for slot in first..=last.min(SLOTS as u16 - 1) {
                map.set(slot, shard);
            }
        }
        map
    }

    /// The shard serving `slot`, if known.
    pub(crate) fn owner(&self, slot: u16) -> Option<u16> {
        self.owners.get(usize::from(slot)).copied().flatten()
    }

    /// `slot` is served by `shard` now (a `MOVED` reply said so).
    pub(crate) fn set(&mut self, slot: u16, shard: u16) {
        if let Some(owner) = self.owners.get_mut(usize::from(slot)) {
            *owner = Some(shard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slots_are_the_ones_redis_cluster_computes() {
        // CRC16/XMODEM's check value, and slots from the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    }

    #[test]
    fn an_empty_or_unclosed_tag_hashes_the_whole_key() {
        assert_eq!(hashed_part(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hashed_part(b"foo{bar"), b"foo{bar");
        assert_eq!(hashed_part(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hashed_part(b"foo{bar}{zap}"), b"bar");
    }

    #[test]
    fn a_prefix_with_a_brace_or_a_name_starting_with_one_is_refused() {
        assert!(prefix_keeps_tag(b"quorumlock:"));
        assert!(prefix_keeps_tag(b"a}b:"));
        assert!(!prefix_keeps_tag(b"app{x}:"));
        assert!(resource_has_tag(b"orders"));
        assert!(resource_has_tag(b"{tenant}:orders"));
        assert!(!resource_has_tag(b"}x"));
    }

    #[test]
    fn a_slot_map_reads_its_ranges_and_learns_moves() {
        let mut map = SlotMap::from_ranges([(0, 5460, 0), (5461, 10922, 1), (10923, 16383, 2)]);
        assert_eq!(map.owner(0), Some(0));
        assert_eq!(map.owner(5461), Some(1));
        assert_eq!(map.owner(16383), Some(2));
        map.set(5461, 2);
        assert_eq!(map.owner(5461), Some(2));
        assert_eq!(SlotMap::from_ranges([(0, 10, 0)]).owner(11), None);
        assert_eq!(
            SlotMap::from_ranges([(16000, u16::MAX, 1)]).owner(16383),
            Some(1)
        );
    }

    proptest! {
        /// Whatever the prefixes (without `{`) and the name (not starting with `}`), a
        /// resource's lock key and fence counter share a slot, and names that start with the
        /// same `{tag}` do too.
        #[test]
        fn lock_key_and_fence_counter_share_a_slot(
            key_prefix in proptest::collection::vec(any::<u8>().prop_filter("no {", |b| *b != b'{'), 0..12),
            fence_prefix in proptest::collection::vec(any::<u8>().prop_filter("no {", |b| *b != b'{'), 0..12),
            resource in proptest::collection::vec(any::<u8>(), 1..40),
            tag in "[a-z0-9]{1,8}",
            rest in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            prop_assume!(resource_has_tag(&resource));
            let lock_key = [&key_prefix[..], &tagged(&resource)].concat();
            let fence_key = [&fence_prefix[..], &tagged(&resource)].concat();
            prop_assert_eq!(key_slot(&lock_key), key_slot(&fence_key));

            let first = [format!("{{{tag}}}:a").as_bytes(), &rest].concat();
            let second = [format!("{{{tag}}}:b").as_bytes()].concat();
            prop_assert_eq!(
                key_slot(&[&key_prefix[..], &tagged(&first)].concat()),
                key_slot(&[&key_prefix[..], &tagged(&second)].concat())
            );
        }
    }
}
