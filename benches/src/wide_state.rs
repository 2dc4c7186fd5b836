//! The `wide` workload's state: 100 last-value fields `f0`..`f99`, each a `{iter, pad}`
//! record (as `langgraph_bench.py`'s dynamic `TypedDict`), with index-based access so that a
//! node built for field `i` can read and write it.

use serde::{Deserialize, Serialize};
use stategraph::State;

/// One field's value: `{"iter": n, "pad": 100 × "x"}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct WideVal {
    pub(crate) iter: i64,
    pub(crate) pad: String,
}

/// Declares `WideState` with one last-value `WideVal` field per `(index name)` pair, plus
/// `WideState::get(i)` and `WideStateUpdate::set(i, v)`, both `match`es on the index.
macro_rules! wide_state {
    ($(($i:literal $f:ident))*) => {
        /// `fields` last-value fields, `f0` first.
        #[derive(State, Clone, Default, Debug)]
        pub(crate) struct WideState {
            $($f: WideVal,)*
        }

        /// How many fields `WideState` has.
        pub(crate) const WIDE_MAX_FIELDS: usize = [$($i),*].len();

        impl WideState {
            /// Field `i`, if the state has it.
            pub(crate) fn get(&self, i: usize) -> Option<&WideVal> {
                match i {
                    $($i => Some(&self.$f),)*
                    _ => None,
                }
            }
        }

        impl WideStateUpdate {
            /// This update, also writing `v` to field `i` (unchanged if there is no field `i`).
            pub(crate) fn set(self, i: usize, v: WideVal) -> Self {
                match i {
                    $($i => self.$f(v),)*
                    _ => self,
                }
            }
        }
    };
}

wide_state! {
    (0 f0) (1 f1) (2 f2) (3 f3) (4 f4) (5 f5) (6 f6) (7 f7) (8 f8) (9 f9) (10 f10) (11 f11)
    (12 f12) (13 f13) (14 f14) (15 f15) (16 f16) (17 f17) (18 f18) (19 f19) (20 f20) (21 f21)
    (22 f22) (23 f23) (24 f24) (25 f25) (26 f26) (27 f27) (28 f28) (29 f29) (30 f30) (31 f31)
    (32 f32) (33 f33) (34 f34) (35 f35) (36 f36) (37 f37) (38 f38) (39 f39) (40 f40) (41 f41)
    (42 f42) (43 f43) (44 f44) (45 f45) (46 f46) (47 f47) (48 f48) (49 f49) (50 f50) (51 f51)
    (52 f52) (53 f53) (54 f54) (55 f55) (56 f56) (57 f57) (58 f58) (59 f59) (60 f60) (61 f61)
    (62 f62) (63 f63) (64 f64) (65 f65) (66 f66) (67 f67) (68 f68) (69 f69) (70 f70) (71 f71)
    (72 f72) (73 f73) (74 f74) (75 f75) (76 f76) (77 f77) (78 f78) (79 f79) (80 f80) (81 f81)
    (82 f82) (83 f83) (84 f84) (85 f85) (86 f86) (87 f87) (88 f88) (89 f89) (90 f90) (91 f91)
    (92 f92) (93 f93) (94 f94) (95 f95) (96 f96) (97 f97) (98 f98) (99 f99)
}
