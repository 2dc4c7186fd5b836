//! The memory store's floor: the `store` workload's own put and get loops against a bare map.
//!
//! The same loop as ours (`store_rows::measure`): per op it builds the namespace, formats the
//! key, builds the value (puts), awaits a boxed future and reads the clock, with the same
//! counts and budgets. The store is a `HashMap` from namespace and key to the value behind a
//! `Mutex`, with no index, no order and no TTL; a get clones what an item holds (namespace,
//! key and value). What our memory store costs beyond it is its own work; the floor's rate
//! over LangGraph's is the most any store could show in this loop.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use futures::FutureExt;
use serde_json::Value;
use stategraph::BoxError;
use stategraph_store::Namespace;

use crate::store_rows::{namespace, timed, value, FILL_BATCH, GETS, PUTS};

/// Puts and gets per second of the floor's loops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Floor {
    pub(crate) put: f64,
    pub(crate) get: f64,
}

type Map = Mutex<HashMap<(Namespace, String), Value>>;

/// Fills a bare map with `items` items as ours is filled, then times its puts and gets.
pub(crate) async fn measure(items: usize) -> Result<Floor, BoxError> {
    let map: Map = Mutex::default();
    for start in (0..items).step_by(FILL_BATCH) {
        let mut m = map.lock().unwrap_or_else(PoisonError::into_inner);
        for i in start..items.min(start + FILL_BATCH) {
            m.insert((namespace(i)?, format!("k{i}")), Value::Object(value(i, i)));
        }
    }
    let map = &map;
    let put = timed(PUTS, 3, |j| async move {
        let (ns, key, v) = (namespace(j)?, format!("n{j}"), value(j, j % items));
        async move {
            let mut m = map.lock().unwrap_or_else(PoisonError::into_inner);
            m.insert((ns, key), Value::Object(v));
        }
        .boxed()
        .await;
        Ok(())
    })
    .await?
    .0;
    let get = timed(GETS, 3, |j| async move {
        let key = (j * 7919) % items;
        let wanted = (namespace(key)?, format!("k{key}"));
        let found = async move {
            let m = map.lock().unwrap_or_else(PoisonError::into_inner);
            m.get_key_value(&wanted)
                .map(|((ns, k), v)| (ns.clone(), k.clone(), v.clone()))
        }
        .boxed()
        .await;
        match found {
            Some(_) => Ok(()),
            None => Err(format!("store floor: k{key} is missing").into()),
        }
    })
    .await?
    .0;
    Ok(Floor { put, get })
}
