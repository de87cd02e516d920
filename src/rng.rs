//! The one random-number abstraction of dynsim: every draw of a run comes from a [`SimRng`]
//! seeded by the scenario seed.
//!
//! `chacha` (the default) is rand_chacha's ChaCha8; `python` is CPython's `random.Random`
//! ([`crate::py_random`]), used where the lab's Python numbers must be reproduced exactly.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::py_random::PyRandom;

/// Which generator a run draws from.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RngKind {
    /// rand_chacha's ChaCha8, seeded with `seed_from_u64`.
    #[default]
    Chacha,
    /// CPython's `random.Random(seed)`, bit for bit.
    Python,
}

impl RngKind {
    /// Every kind's name, as scenarios and flags spell it.
    pub const NAMES: &'static [&'static str] = &["chacha", "python"];
}

impl std::str::FromStr for RngKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "chacha" => Ok(RngKind::Chacha),
            "python" => Ok(RngKind::Python),
            _ => Err(format!("{s:?} is not a generator (chacha, python)")),
        }
    }
}

/// A seeded generator of either kind, with the few draws the simulator needs.
#[derive(Clone)]
pub enum SimRng {
    /// See [`RngKind::Chacha`].
    Chacha(Box<ChaCha8Rng>),
    /// See [`RngKind::Python`].
    Python(Box<PyRandom>),
}

impl std::fmt::Debug for SimRng {
    /// The kind only: a generator's state is not for reading.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimRng::Chacha(_) => f.write_str("SimRng::Chacha"),
            SimRng::Python(_) => f.write_str("SimRng::Python"),
        }
    }
}

impl SimRng {
    /// A generator of `kind` seeded with `seed`.
    pub fn new(kind: RngKind, seed: u64) -> Self {
        match kind {
            RngKind::Chacha => SimRng::Chacha(Box::new(ChaCha8Rng::seed_from_u64(seed))),
            RngKind::Python => SimRng::Python(Box::new(PyRandom::new(seed))),
        }
    }

    /// An independent generator for one component, derived from the run seed and a stream number,
    /// so that adding draws in one component never shifts another's.
    pub fn stream(kind: RngKind, seed: u64, stream: u64) -> Self {
        match kind {
            RngKind::Chacha => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(stream);
                SimRng::Chacha(Box::new(rng))
            }
            RngKind::Python => {
                let lo = seed as u32;
                let hi = (seed >> 32) as u32;
                SimRng::Python(Box::new(PyRandom::from_key(&[
                    lo,
                    hi,
                    stream as u32,
                    0x5eed,
                ])))
            }
        }
    }

    /// A uniform integer in `0..n` (`randrange(n)` for the Python generator); 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        match self {
            SimRng::Chacha(rng) if n > 0 => rng.gen_range(0..n),
            SimRng::Chacha(_) => 0,
            SimRng::Python(rng) => rng.randbelow(n as u64) as usize,
        }
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        match self {
            SimRng::Chacha(rng) => rng.gen::<f64>(),
            SimRng::Python(rng) => rng.random(),
        }
    }

    /// Shuffles `items` in place (Python's `shuffle` for the Python generator; the same
    /// Fisher–Yates from the end with [`SimRng::below`] for ChaCha).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}
