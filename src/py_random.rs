//! CPython's `random.Random`, bit for bit: MT19937 seeded by `init_by_array`, `getrandbits`,
//! `_randbelow` (rejection sampling), `randrange`, `shuffle` and `random`.
//!
//! The lab's reference numbers were produced by Python; this generator lets `dynsim sim` (and
//! scenarios with `rng = "python"`) reproduce them exactly.

const N: usize = 624;
const M: usize = 397;

/// CPython's Mersenne Twister generator (`random.Random(seed)` for a non-negative integer seed).
#[derive(Clone)]
pub struct PyRandom {
    state: [u32; N],
    index: usize,
}

impl PyRandom {
    /// The generator `random.Random(seed)` would be: the key is the seed's 32-bit chunks, least
    /// significant first (`[0]` for seed 0).
    pub fn new(seed: u64) -> Self {
        let lo = seed as u32;
        let hi = (seed >> 32) as u32;
        if hi == 0 {
            Self::from_key(&[lo])
        } else {
            Self::from_key(&[lo, hi])
        }
    }

    /// MT19937's `init_by_array` over `key`.
    pub fn from_key(key: &[u32]) -> Self {
        let mut rng = Self::from_u32(19_650_218);
        let mt = &mut rng.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        rng
    }

    fn from_u32(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1] ^ (state[i - 1] >> 30);
            state[i] = 1_812_433_253u32.wrapping_mul(prev).wrapping_add(i as u32);
        }
        PyRandom { state, index: N }
    }

    /// The next 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn twist(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        let mt = &mut self.state;
        for k in 0..N {
            let y = (mt[k] & UPPER) | (mt[(k + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            mt[k] = mt[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// `getrandbits(k)` for `1 <= k <= 64`: 32-bit words, least significant first, the last one
    /// shifted down to the bits still needed.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32() >> (64 - k));
        (hi << 32) | lo
    }

    /// `_randbelow(n)`: a uniform integer in `0..n` by rejection sampling; `randrange(n)`.
    /// Returns 0 for `n == 0` without drawing (Python would raise).
    pub fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random()`: a float in `[0, 1)` with 53 random bits.
    pub fn random(&mut self) -> f64 {
        let a = u64::from(self.next_u32() >> 5);
        let b = u64::from(self.next_u32() >> 6);
        (a as f64 * 67_108_864.0 + b as f64) / 9_007_199_254_740_992.0
    }

    /// `shuffle(x)`: Fisher–Yates from the end, `j = _randbelow(i + 1)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One seed's expected draws, computed with CPython 3.11 on the development machine:
    /// `r = random.Random(seed); x = list(range(10)); r.shuffle(x)`, then eight `r.randrange(7)`,
    /// three `r.randrange(1000003)` and one `r.random()`.
    struct Vector {
        seed: u64,
        shuffled: [usize; 10],
        below_7: [u64; 8],
        below_1000003: [u64; 3],
        random: f64,
    }

    const VECTORS: [Vector; 4] = [
        Vector {
            seed: 0,
            shuffled: [7, 8, 1, 5, 3, 4, 2, 0, 9, 6],
            below_7: [2, 4, 1, 4, 1, 2, 1, 6],
            below_1000003: [99437, 648406, 838234],
            random: 0.25050634136244054,
        },
        Vector {
            seed: 1,
            shuffled: [6, 8, 9, 7, 5, 3, 0, 4, 1, 2],
            below_7: [6, 1, 0, 3, 0, 6, 3, 3],
            below_1000003: [636944, 799308, 804423],
            random: 0.0021060533511106927,
        },
        Vector {
            seed: (1 << 32) + 5,
            shuffled: [5, 3, 6, 1, 9, 0, 8, 4, 7, 2],
            below_7: [5, 2, 6, 6, 1, 2, 5, 5],
            below_1000003: [876084, 838042, 829689],
            random: 0.8845467543828216,
        },
        Vector {
            seed: (1 << 40) - 1,
            shuffled: [9, 5, 7, 6, 4, 8, 2, 1, 3, 0],
            below_7: [3, 5, 4, 6, 5, 5, 2, 2],
            below_1000003: [479036, 983794, 256623],
            random: 0.07012646444897985,
        },
    ];

    #[test]
    fn matches_cpython_for_pinned_seeds() {
        for v in &VECTORS {
            let mut rng = PyRandom::new(v.seed);
            let mut items: Vec<usize> = (0..10).collect();
            rng.shuffle(&mut items);
            assert_eq!(items, v.shuffled, "shuffle, seed {}", v.seed);
            let below_7: Vec<u64> = (0..8).map(|_| rng.randbelow(7)).collect();
            assert_eq!(below_7, v.below_7, "randrange(7), seed {}", v.seed);
            let big: Vec<u64> = (0..3).map(|_| rng.randbelow(1_000_003)).collect();
            assert_eq!(big, v.below_1000003, "randrange(1000003), seed {}", v.seed);
            assert_eq!(rng.random(), v.random, "random(), seed {}", v.seed);
        }
    }

    #[test]
    fn wide_draws_match_cpython() {
        // random.Random(1): [r.getrandbits(40) for _ in range(2)], then r.randrange(2**33 + 1).
        let mut rng = PyRandom::new(1);
        assert_eq!(
            [rng.getrandbits(40), rng.getrandbits(40)],
            [WIDE[0], WIDE[1]]
        );
        assert_eq!(rng.randbelow((1 << 33) + 1), WIDE[2]);
    }

    const WIDE: [u64; 3] = [623_347_347_957, 884_107_995_871, 3_280_387_012];
}
