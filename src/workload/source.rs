//! A built workload and the requests it makes on demand.
//!
//! A [`Recipe`] is what building a workload leaves: the lab's shuffled order, the synthetic
//! generator's starting state, or a trace's compact [`TraceTable`]. It is cheap to clone (a
//! caller that runs one workload many times builds it once). A [`Source`] made from it produces
//! the requests, block names included, only when the client sends them, so a run holds the
//! requests in flight, not the whole workload.
//!
//! A source is read in one of two ways, as the client paces it:
//! - in id order, every request ([`Source::next_in_order`], closed loop);
//! - first turns in id order ([`Source::next_first_turn`], open loop), each later turn of a
//!   session handed over when the turn before it completes ([`Source::follower_of`]).
//!
//! Ids are in arrival order for every workload, so first turns come out in arrival order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::lab::PrefixRepeat;
use super::synthetic::{Checked, SyntheticParams, SyntheticStream};
use super::table::TraceTable;
use super::RequestSpec;
use crate::hash::block_hashes;
use crate::ids::RequestId;
use crate::rng::SimRng;

/// A built workload: everything needed to make its requests again, cheaply cloned.
#[derive(Clone, Debug)]
pub struct Recipe {
    kind: Kind,
    total: usize,
    first_turns: usize,
    distinct_blocks: u64,
    listed_blocks: u64,
}

#[derive(Clone, Debug)]
enum Kind {
    Lab {
        shape: PrefixRepeat,
        order: Arc<[usize]>,
        block_size: usize,
        interval_ns: u64,
        output_tokens: u32,
    },
    Synthetic {
        params: SyntheticParams,
        block_size: usize,
        rng: SimRng,
    },
    Table(Arc<TraceTable>),
}

impl Recipe {
    /// The lab workload in its shuffled `order` (one prefix number per request), one request
    /// every `interval_ns`.
    pub fn lab(
        shape: PrefixRepeat,
        order: Vec<usize>,
        block_size: usize,
        interval_ns: u64,
        output_tokens: u32,
    ) -> Self {
        let total = order.len();
        let distinct_blocks = shape.distinct_blocks(block_size);
        Recipe {
            distinct_blocks,
            listed_blocks: distinct_blocks,
            kind: Kind::Lab {
                shape,
                order: order.into(),
                block_size,
                interval_ns,
                output_tokens,
            },
            total,
            first_turns: total,
        }
    }

    /// The synthetic workload `params`, drawn from `rng` as it was before the workload's first
    /// draw, as [`SyntheticStream::check`] found it at `block_size`.
    pub fn synthetic(
        params: SyntheticParams,
        block_size: usize,
        rng: SimRng,
        checked: &Checked,
    ) -> Self {
        Recipe {
            total: params.requests,
            first_turns: checked.sessions,
            distinct_blocks: checked.distinct_blocks,
            listed_blocks: checked.listed_blocks,
            kind: Kind::Synthetic {
                params,
                block_size,
                rng,
            },
        }
    }

    /// A trace's table.
    pub fn table(table: TraceTable) -> Self {
        Recipe {
            total: table.len(),
            first_turns: table.first_turns(),
            distinct_blocks: table.blocks(),
            listed_blocks: table.listed_blocks(),
            kind: Kind::Table(Arc::new(table)),
        }
    }

    /// Requests in the workload.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Requests that are not a later turn of a session.
    pub fn first_turns(&self) -> usize {
        self.first_turns
    }

    /// An upper bound on the distinct prompt blocks the workload creates.
    pub fn distinct_blocks(&self) -> u64 {
        self.distinct_blocks
    }

    /// An upper bound on the distinct prompt blocks some request names before its own tail
    /// ([`RequestSpec::unshared_from`](super::RequestSpec::unshared_from)): what a router's index
    /// can hold when own tails go unread.
    pub fn listed_blocks(&self) -> u64 {
        self.listed_blocks
    }

    /// Bytes the recipe itself holds (the lab's order, a trace's table).
    pub fn bytes(&self) -> u64 {
        match &self.kind {
            Kind::Lab { order, .. } => order.len() as u64 * 8,
            Kind::Synthetic { params, .. } => params.groups as u64 * 8,
            Kind::Table(t) => t.bytes(),
        }
    }

    /// A fresh source of the workload's requests.
    pub fn source(&self) -> Source {
        let synthetic = match &self.kind {
            Kind::Synthetic {
                params,
                block_size,
                rng,
            } => Some(SyntheticStream::new(params, *block_size, rng.clone())),
            _ => None,
        };
        Source {
            recipe: self.clone(),
            next: 0,
            synthetic,
            pending: VecDeque::new(),
            followers: HashMap::new(),
        }
    }
}

/// A workload's requests, made when they are asked for.
#[derive(Debug)]
pub struct Source {
    recipe: Recipe,
    /// The next id to make (lab and traces).
    next: usize,
    synthetic: Option<SyntheticStream>,
    /// Turns of the current synthetic session not yet handed out (in id order).
    pending: VecDeque<RequestSpec>,
    /// Later turns of synthetic sessions already made, by the turn they follow (looked up
    /// only, never iterated).
    followers: HashMap<RequestId, RequestSpec>,
}

impl Source {
    /// Requests in the workload.
    pub fn total(&self) -> usize {
        self.recipe.total
    }

    /// The next request in id order, sessions ignored (closed loop).
    pub fn next_in_order(&mut self) -> Option<RequestSpec> {
        if self.synthetic.is_some() {
            if self.pending.is_empty() {
                let session = self.next_session()?;
                self.pending.extend(session);
            }
            return self.pending.pop_front();
        }
        let id = self.next;
        (id < self.recipe.total).then(|| {
            self.next += 1;
            self.make(id)
        })
    }

    /// The next request that is not a later turn of a session, in id order (open loop). The
    /// later turns it skips come from [`Source::follower_of`].
    pub fn next_first_turn(&mut self) -> Option<RequestSpec> {
        if self.synthetic.is_some() {
            let mut turns = self.next_session()?.into_iter();
            let first = turns.next()?;
            let mut before = first.id;
            for turn in turns {
                let id = turn.id;
                self.followers.insert(before, turn);
                before = id;
            }
            return Some(first);
        }
        if let Kind::Table(t) = &self.recipe.kind {
            while self.next < t.len() && t.is_follower(self.next) {
                self.next += 1;
            }
        }
        self.next_in_order()
    }

    /// The later turn of a session that follows request `id`, if any (open loop: asked once,
    /// when `id` completes).
    pub fn follower_of(&mut self, id: RequestId) -> Option<RequestSpec> {
        match &self.recipe.kind {
            Kind::Lab { .. } => None,
            Kind::Synthetic { .. } => self.followers.remove(&id),
            Kind::Table(t) => t.follower(id.0 as usize).map(|f| t.spec(f.0 as usize)),
        }
    }

    fn next_session(&mut self) -> Option<Vec<RequestSpec>> {
        let stream = self.synthetic.as_mut()?;
        Some(
            stream
                .session(true)?
                .expect("a built workload was checked against the clock"),
        )
    }

    /// Request `id` of a lab or trace workload.
    fn make(&self, id: usize) -> RequestSpec {
        match &self.recipe.kind {
            Kind::Lab {
                shape,
                order,
                block_size,
                interval_ns,
                output_tokens,
            } => {
                let k = order[id];
                let tokens = shape.tokens(id, k);
                let blocks = block_hashes(&tokens, *block_size);
                RequestSpec {
                    id: RequestId(id as u64),
                    arrival_ns: (id as u64).saturating_mul(*interval_ns),
                    input_tokens: tokens.len() as u32,
                    output_tokens: *output_tokens,
                    unshared_from: blocks.len(),
                    blocks,
                    prefix: Some(k as u64),
                    prefix_blocks: shape.prefix_len / block_size,
                    session: None,
                    answer_blocks: Vec::new(),
                }
            }
            Kind::Table(t) => t.spec(id),
            Kind::Synthetic { .. } => unreachable!("synthetic requests come by session"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKind;
    use crate::workload::synthetic::generate;

    fn synthetic(turns: u32) -> (SyntheticParams, Recipe, Vec<RequestSpec>) {
        let p = SyntheticParams {
            requests: 23,
            turns,
            ..SyntheticParams::default()
        };
        let rng = SimRng::new(RngKind::Chacha, 3);
        let checked = SyntheticStream::check(&p, 16, rng.clone()).unwrap();
        let all = generate(&p, 16, &mut rng.clone());
        let recipe = Recipe::synthetic(p.clone(), 16, rng, &checked);
        (p, recipe, all)
    }

    #[test]
    fn in_order_gives_every_request_as_generated() {
        let (_, recipe, all) = synthetic(4);
        let mut source = recipe.source();
        let made: Vec<_> = std::iter::from_fn(|| source.next_in_order()).collect();
        assert_eq!(made, all);
    }

    #[test]
    fn first_turns_and_followers_cover_every_request_once() {
        let (_, recipe, all) = synthetic(4);
        assert_eq!(recipe.first_turns(), 6); // 23 requests in sessions of 4
        let mut source = recipe.source();
        let mut made = Vec::new();
        while let Some(first) = source.next_first_turn() {
            let mut at = first.id;
            made.push(first);
            while let Some(next) = source.follower_of(at) {
                at = next.id;
                made.push(next);
            }
        }
        made.sort_by_key(|r| r.id);
        assert_eq!(made, all);
    }

    #[test]
    fn the_check_leaves_the_generator_where_generation_does() {
        let (p, _, _) = synthetic(3);
        let rng = SimRng::new(RngKind::Python, 8);
        let checked = SyntheticStream::check(&p, 16, rng.clone()).unwrap();
        let mut after = rng;
        generate(&p, 16, &mut after);
        assert_eq!(checked.rng.clone().unit(), after.unit());
    }
}
