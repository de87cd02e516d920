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
    for chunk in tokens.chunks_exact(block) {
        let name = hash_tokens(chunk, seed);
        out.push(BlockHash(name));
        seed = name;
    }
}

/// Chains externally assigned block ids (a Mooncake trace's `hash_ids`) into block names, so that a
/// trace's ids and dynsim's own names live in one namespace and keep the prefix property.
pub fn chain_ids(ids: &[u64]) -> Vec<BlockHash> {
    let mut seed = ROOT_SEED;
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
    fn chained_ids_keep_the_prefix_property() {
        let a = chain_ids(&[1, 2, 3]);
        let b = chain_ids(&[9, 2, 3]);
        assert_eq!(a[..1], chain_ids(&[1])[..]);
        assert_ne!(a[1], b[1]);
    }
}
