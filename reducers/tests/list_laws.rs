//! Property tests for [`List`]: it behaves as a `Vec` under any sequence of operations, while
//! clones taken along the way keep their own contents; and the list reducers give the same
//! values and stored parts over `List` as over `Vec`.

use proptest::prelude::*;
use stategraph_reducers::{
    AddMessages, Append, List, MessageOp, MessagesUpdate, ReduceCtx, Reducer,
};

#[derive(Debug, Clone)]
enum Op {
    Push(u16),
    /// `Extend` with several items (fills the last chunk, then adds whole chunks).
    Extend(Vec<u16>),
    /// Keep a clone of the current list, to check later that it never changed.
    Snapshot,
    /// Continue from snapshot `i` (mod the number of snapshots): a fork.
    Fork(usize),
    Set(usize, u16),
    Truncate(usize),
    RetainEven,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => any::<u16>().prop_map(Op::Push),
        3 => prop::collection::vec(any::<u16>(), 0..150).prop_map(Op::Extend),
        3 => Just(Op::Snapshot),
        2 => any::<usize>().prop_map(Op::Fork),
        2 => (any::<usize>(), any::<u16>()).prop_map(|(i, v)| Op::Set(i, v)),
        1 => any::<usize>().prop_map(Op::Truncate),
        1 => Just(Op::RetainEven),
    ]
}

mod common;
use common::Msg;

fn message_ops() -> impl Strategy<Value = MessagesUpdate<Msg>> {
    let id = prop::sample::select(vec!["a", "b", "c", "d"]).prop_map(String::from);
    let msg = (prop::option::of(id.clone()), any::<u8>()).prop_map(|(id, text)| Msg { id, text });
    let op = prop_oneof![
        6 => msg.prop_map(MessageOp::Upsert),
        2 => id.prop_map(MessageOp::Remove),
        1 => Just(MessageOp::RemoveAll),
    ];
    prop::collection::vec(op, 0..5).prop_map(MessagesUpdate::from)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_list_is_a_vec_and_its_snapshots_never_change(ops in prop::collection::vec(op(), 0..400)) {
        let mut list: List<u16> = List::new();
        let mut model: Vec<u16> = Vec::new();
        let mut snapshots: Vec<(List<u16>, Vec<u16>)> = Vec::new();
        for op in ops {
            match op {
                Op::Push(v) => {
                    list.push(v);
                    model.push(v);
                }
                Op::Extend(items) => {
                    list.extend(items.iter().copied());
                    model.extend(items);
                }
                Op::Snapshot => snapshots.push((list.clone(), model.clone())),
                Op::Fork(i) if !snapshots.is_empty() => {
                    let (l, m) = &snapshots[i % snapshots.len()];
                    list = l.clone();
                    model = m.clone();
                }
                Op::Fork(_) => {}
                Op::Set(i, v) if !model.is_empty() => {
                    let i = i % model.len();
                    model[i] = v;
                    if let Some(item) = list.get_mut(i) {
                        *item = v;
                    }
                }
                Op::Set(..) => {}
                Op::Truncate(n) => {
                    let n = n % (model.len() + 1);
                    list.truncate(n);
                    model.truncate(n);
                }
                Op::RetainEven => {
                    list.retain(|v| v % 2 == 0);
                    model.retain(|v| v % 2 == 0);
                }
            }
            prop_assert_eq!(&list, &model);
        }
        prop_assert_eq!(list.len(), model.len());
        prop_assert_eq!(list.last(), model.last());
        prop_assert!(list.iter().rev().eq(model.iter().rev()));
        for (l, m) in &snapshots {
            prop_assert_eq!(l, m);
        }
        let collected: List<u16> = model.iter().copied().collect();
        prop_assert_eq!(&collected, &model);
        prop_assert_eq!(list.into_vec(), model);
    }

    #[test]
    fn append_over_a_list_equals_append_over_a_vec(
        init in prop::collection::vec(any::<u8>(), 0..80),
        steps in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), 1..3), 0..8),
    ) {
        let mut v = init.clone();
        let mut l = List::from(init);
        for (step, writes) in steps.into_iter().enumerate() {
            let mut ctx_v = ReduceCtx::new(step as i64);
            let mut ctx_l = ReduceCtx::new(step as i64);
            let cv = Append::<Vec<u8>>::reduce(&mut v, writes.clone(), &mut ctx_v)?;
            let cl = Append::<List<u8>>::reduce(&mut l, writes, &mut ctx_l)?;
            prop_assert_eq!(cv, cl);
            prop_assert_eq!(&l, &v);
            let ev = Append::<Vec<u8>>::encode(&v, cv).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let el = Append::<List<u8>>::encode(&l, cl).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(ev, el);
        }
    }

    #[test]
    fn add_messages_over_a_list_equals_add_messages_over_a_vec(
        steps in prop::collection::vec(prop::collection::vec(message_ops(), 1..3), 0..8),
    ) {
        let mut v: Vec<Msg> = Vec::new();
        let mut l: List<Msg> = List::new();
        for (step, writes) in steps.into_iter().enumerate() {
            // A snapshot is held while the step runs, as the engine's history does.
            let held = l.clone();
            let before = held.to_vec();
            let rv = AddMessages::<Vec<Msg>>::reduce(&mut v, writes.clone(), &mut ReduceCtx::new(step as i64));
            let rl = AddMessages::<List<Msg>>::reduce(&mut l, writes, &mut ReduceCtx::new(step as i64));
            match (rv, rl) {
                (Ok(cv), Ok(cl)) => {
                    prop_assert_eq!(cv, cl);
                    prop_assert_eq!(&l, &v);
                    let ev = AddMessages::<Vec<Msg>>::encode(&v, cv).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let el = AddMessages::<List<Msg>>::encode(&l, cl).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(ev, el);
                }
                (Err(ev), Err(el)) => {
                    prop_assert_eq!(ev.to_string(), el.to_string());
                    // The engine discards a failed step's value.
                    l = held.clone();
                    v = before.clone();
                }
                (rv, rl) => prop_assert!(false, "vec {rv:?} but list {rl:?}"),
            }
            prop_assert_eq!(held, before);
        }
    }
}
