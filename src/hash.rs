//! Chained block names ("sequence hashes").
//!
//! A prompt is cut into full blocks of `block` tokens (the tail is dropped). Block *i*'s name is
//! xxh3-64 of block *i*'s tokens (little-endian `u32` bytes) seeded with block *i−1*'s name, and the
//! first block is seeded with [`ROOT_SEED`]. Equal names at position *i* therefore mean the whole
//! prefix up to and including block *i* is equal: the same block content under two different prefixes
//! gets two different names. Hashing only a block's own tokens is the classic mistake this avoids.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the first block's hash (Dynamo's kv-router uses the same constant for its block hashes).
pub const ROOT_SEED: u64 = 1337;

/// The name of one block: a hash of the block's tokens chained with every block before it.
///
/// Serialised as a plain integer.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct BlockHash(pub u64);

/// One name per full block of `tokens`, chained so that a name identifies the whole prefix.
///
/// `block` is the number of tokens per block; a tail shorter than a block gets no name.
///
/// # Panics
/// Panics if `block` is 0 (the CLI and scenario validation reject it before it gets here).
pub fn block_hashes(tokens: &[u32], block: usize) -> Vec<BlockHash> {
    let mut names = Vec::with_capacity(tokens.len() / block.max(1));
    extend_block_hashes(tokens, block, None, &mut names);
    names
}

/// Appends the chained names of `tokens`' full blocks to `out`, continuing the chain after `parent`
/// (`None` starts a new prompt). Reuses `out`'s allocation, for callers on a hot path.
///
/// # Panics
/// Panics if `block` is 0.
pub fn extend_block_hashes(
    tokens: &[u32],
    block: usize,
    parent: Option<BlockHash>,
    out: &mut Vec<BlockHash>,
) {
    assert!(block > 0, "block size must be at least 1 token");
    let mut seed = parent.map_or(ROOT_SEED, |p| p.0);
    // Sized up front, so the loops write through a slice: no capacity check per name and no
    // reload of the vector's length, which keeps registers free for the hash.
    let start = out.len();
    out.resize(start + tokens.len() / block, BlockHash(0));
    let names = &mut out[start..];
    if block == FAST_BLOCK {
        // Same names as the general loop below, through the 64-byte specialisation.
        let base = LenTerm::new();
        for (name, chunk) in names.iter_mut().zip(tokens.chunks_exact(FAST_BLOCK)) {
            seed = hash_16_tokens(chunk.try_into().expect("chunks_exact"), seed, base);
            *name = BlockHash(seed);
        }
    } else {
        for (name, chunk) in names.iter_mut().zip(tokens.chunks_exact(block)) {
            seed = hash_tokens(chunk, seed);
            *name = BlockHash(seed);
        }
    }
}

/// The chained names of `tokens`' full blocks, computed one at a time as the iterator advances:
/// the same names as [`block_hashes`], for callers that may stop early (the router stops hashing
/// at the first block no worker holds when it does not need the rest).
///
/// # Panics
/// Panics if `block` is 0.
pub fn block_names(tokens: &[u32], block: usize) -> BlockNames<'_> {
    assert!(block > 0, "block size must be at least 1 token");
    BlockNames {
        chunks: tokens.chunks_exact(block),
        seed: ROOT_SEED,
        base: LenTerm::new(),
    }
}

/// Iterator over a prompt's chained block names; see [`block_names`].
#[derive(Clone, Debug)]
pub struct BlockNames<'a> {
    chunks: std::slice::ChunksExact<'a, u32>,
    seed: u64,
    base: LenTerm,
}

impl Iterator for BlockNames<'_> {
    type Item = BlockHash;

    #[inline(always)]
    fn next(&mut self) -> Option<BlockHash> {
        let chunk = self.chunks.next()?;
        self.seed = match <&[u32; FAST_BLOCK]>::try_from(chunk) {
            Ok(block) => hash_16_tokens(block, self.seed, self.base),
            Err(_) => hash_tokens(chunk, self.seed),
        };
        Some(BlockHash(self.seed))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl ExactSizeIterator for BlockNames<'_> {}

/// The block size with a specialised hash: 16 tokens, 64 bytes (the common block size).
pub(crate) const FAST_BLOCK: usize = 16;

/// Chains externally assigned block ids (a Mooncake trace's `hash_ids`) into block names, so that a
/// trace's ids and dynsim's own names live in one namespace and keep the prefix property.
pub fn chain_ids(ids: &[u64]) -> Vec<BlockHash> {
    chain_ids_from(ids, ROOT_SEED)
}

/// [`chain_ids`] chained from `root` instead of [`ROOT_SEED`]: another namespace of names (a
/// trace replayed again names its blocks apart from the first replay's).
pub fn chain_ids_from(ids: &[u64], root: u64) -> Vec<BlockHash> {
    let mut seed = root;
    ids.iter()
        .map(|id| {
            seed = xxh3_64_with_seed(&id.to_le_bytes(), seed);
            BlockHash(seed)
        })
        .collect()
}

#[cfg(target_endian = "little")]
fn hash_tokens(tokens: &[u32], seed: u64) -> u64 {
    // On a little-endian machine the in-memory bytes already are the little-endian encoding.
    xxh3_64_with_seed(bytemuck::cast_slice(tokens), seed)
}

#[cfg(not(target_endian = "little"))]
fn hash_tokens(tokens: &[u32], seed: u64) -> u64 {
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    xxh3_64_with_seed(&bytes, seed)
}

/// xxh3's default secret (`kSecret`), its first 64 bytes as little-endian words: all that inputs of
/// 17 to 64 bytes use.
const SECRET: [u64; 8] = [
    0xbe4b_a423_396c_feb8,
    0x1cad_21f7_2c81_017c,
    0xdb97_9083_e96d_d4de,
    0x1f67_b3b7_a4a4_4072,
    0x78e5_c0cc_4ee6_79cb,
    0x2172_ffcc_7dd0_5a82,
    0x8e24_43f7_7446_08b8,
    0x4c26_3a81_e690_35e0,
];
/// xxh64's first prime, which xxh3 multiplies the input length with.
const PRIME64_1: u64 = 0x9e37_79b1_85eb_ca87;

/// xxh3's length term for a 64-byte input, `64 * PRIME64_1`, as a value the optimiser cannot see
/// through ([`LenTerm::new`] passes it through `black_box` once per prompt, not per block).
///
/// Why: a block's hash is the next block's seed, so hashing a prompt runs at the latency of one
/// block's hash. Its four 128-bit products issue one per cycle, and the shortest path adds the
/// three earlier ones and the constant while the last is still multiplying, then the last one
/// alone. Seeing a constant, the compiler instead moves it to the end of the sum, two additions
/// after the last product: 2 of about 20 cycles per block.
#[derive(Clone, Copy, Debug)]
struct LenTerm(u64);

impl LenTerm {
    #[inline(always)]
    fn new() -> LenTerm {
        LenTerm(std::hint::black_box(64u64.wrapping_mul(PRIME64_1)))
    }
}

/// `xxh3_64_with_seed` of 16 tokens' little-endian bytes, bit for bit (the test
/// `fast_block_equals_xxh3` compares the two on random blocks and seeds).
///
/// It is xxh3's 17-to-128-byte path unrolled for exactly 64 bytes. Names are chained, so one
/// block's hash is the next block's seed and hashing a prompt is bound by the latency of this
/// function, not its throughput: the four products are summed as a tree rather than one after
/// another, which takes two additions off the critical path, and nothing branches on the length.
#[inline(always)]
fn hash_16_tokens(t: &[u32; FAST_BLOCK], seed: u64, base: LenTerm) -> u64 {
    // Word k of the little-endian byte string, on any host.
    let word = |k: usize| u64::from(t[2 * k]) | (u64::from(t[2 * k + 1]) << 32);
    // xxh3's mix16B: input words (k, k+1) against secret words (s, s+1).
    let mix = |k: usize, s: usize| {
        let lo = word(k) ^ SECRET[s].wrapping_add(seed);
        let hi = word(k + 1) ^ SECRET[s + 1].wrapping_sub(seed);
        let product = u128::from(lo) * u128::from(hi);
        (product as u64) ^ ((product >> 64) as u64)
    };
    // For 33..=64 bytes xxh3 mixes bytes 0, len-16, 16 and len-32 with secret bytes 0, 16, 32, 48.
    // `base` is the constant `64 * PRIME64_1`, passed in opaque (see `LenTerm`) so that the
    // compiler adds it first, with the three earliest products, and the last product alone last.
    let acc = base
        .0
        .wrapping_add(mix(0, 0))
        .wrapping_add(mix(6, 2))
        .wrapping_add(mix(2, 4))
        .wrapping_add(mix(4, 6));
    // xxh3's avalanche.
    let h = acc ^ (acc >> 37);
    let h = h.wrapping_mul(0x1656_6791_9e37_79f9);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_shorter_than_a_block_gets_no_name() {
        assert_eq!(block_hashes(&[1, 2, 3], 4).len(), 0);
        assert_eq!(block_hashes(&(0..9).collect::<Vec<_>>(), 4).len(), 2);
    }

    #[test]
    fn same_block_under_different_prefixes_gets_different_names() {
        // The classic mistake: hashing only a block's own tokens makes these two equal.
        let a = block_hashes(&[1, 1, 1, 1, 7, 7, 7, 7], 4);
        let b = block_hashes(&[2, 2, 2, 2, 7, 7, 7, 7], 4);
        assert_ne!(a[1], b[1]);
    }

    #[test]
    fn equal_prefixes_get_equal_names() {
        let a = block_hashes(&[5, 6, 7, 8, 1, 2, 3, 4], 4);
        let b = block_hashes(&[5, 6, 7, 8, 9, 9, 9, 9], 4);
        assert_eq!(a[0], b[0]);
        assert_ne!(a[1], b[1]);
    }

    #[test]
    fn names_are_stable_across_runs_and_machines() {
        // Pinned values: a change of hash function, seed or byte order fails here.
        let names = block_hashes(&(0..32).collect::<Vec<u32>>(), 16);
        assert_eq!(names, PINNED.map(BlockHash).to_vec());
    }

    // Cross-checked with the Python `xxhash` package: xxh3_64_intdigest(struct.pack("<16I", ...), seed).
    const PINNED: [u64; 2] = [15_310_707_395_893_867_146, 1_260_210_480_290_786_575];

    #[test]
    fn extending_continues_the_chain() {
        let tokens: Vec<u32> = (0..64).collect();
        let whole = block_hashes(&tokens, 16);
        let mut split = block_hashes(&tokens[..32], 16);
        let parent = split.last().copied();
        extend_block_hashes(&tokens[32..], 16, parent, &mut split);
        assert_eq!(whole, split);
    }

    #[test]
    fn fast_block_equals_xxh3() {
        // The 16-token specialisation against the library, on seeded random blocks and seeds.
        let mut x: u64 = 0x0123_4567_89ab_cdef;
        let mut next = || {
            // splitmix64
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for round in 0..10_000 {
            let block: [u32; 16] = std::array::from_fn(|_| match round % 3 {
                0 => next() as u32,
                1 => (next() % 150_000) as u32,
                _ => u32::MAX - (next() % 4) as u32,
            });
            let seed = if round % 7 == 0 { ROOT_SEED } else { next() };
            let bytes: Vec<u8> = block.iter().flat_map(|t| t.to_le_bytes()).collect();
            assert_eq!(
                hash_16_tokens(&block, seed, LenTerm::new()),
                xxh3_64_with_seed(&bytes, seed)
            );
        }
    }

    #[test]
    fn names_iterator_equals_block_hashes() {
        for block in [1, 3, 16, 17] {
            let tokens: Vec<u32> = (0..200).map(|t| t * 7919).collect();
            let names: Vec<BlockHash> = block_names(&tokens, block).collect();
            assert_eq!(names, block_hashes(&tokens, block), "block {block}");
            assert_eq!(block_names(&tokens, block).len(), 200 / block);
        }
    }

    #[test]
    fn chained_ids_keep_the_prefix_property() {
        let a = chain_ids(&[1, 2, 3]);
        let b = chain_ids(&[9, 2, 3]);
        assert_eq!(a[..1], chain_ids(&[1])[..]);
        assert_ne!(a[1], b[1]);
    }
}
