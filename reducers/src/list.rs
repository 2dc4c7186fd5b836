//! [`List`]: a list whose clones share their items, for long append-shaped fields.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Index;
use std::sync::{Arc, OnceLock};

use serde::{de::DeserializeOwned, Deserialize, Deserializer, Serialize, Serializer};

/// Items in the first chunks: 8, 16, 32; every later chunk holds [`MAX_CHUNK`].
const FIRST_CHUNK: usize = 8;
const MAX_CHUNK: usize = 64;
/// Index of the first item of chunk 3, the first full-size chunk.
const SMALL_ITEMS: usize = 8 + 16 + 32;

/// One chunk of `capacity(k)` positions: the items it was made with, then slots that later
/// appends write once each (so a chunk shared by clones takes an append without a lock or a
/// copy, while a chunk built in one go costs no synchronisation per item).
struct Chunk<T> {
    /// Positions `0..sealed.len()`.
    sealed: Vec<T>,
    /// Positions `sealed.len()..capacity`.
    open: Box<[OnceLock<T>]>,
}

impl<T> Chunk<T> {
    /// Chunk `k` made with (at most its capacity of) `items`.
    fn new(k: usize, items: impl IntoIterator<Item = T>) -> Arc<Self> {
        let cap = capacity(k);
        let mut sealed = Vec::with_capacity(cap);
        sealed.extend(items.into_iter().take(cap));
        let open = (sealed.len()..cap).map(|_| OnceLock::new()).collect();
        Arc::new(Chunk { sealed, open })
    }

    fn get(&self, off: usize) -> Option<&T> {
        match self.sealed.get(off) {
            Some(item) => Some(item),
            None => self.open.get(off - self.sealed.len())?.get(),
        }
    }

    fn get_mut(&mut self, off: usize) -> Option<&mut T> {
        let n = self.sealed.len();
        if off < n {
            self.sealed.get_mut(off)
        } else {
            self.open.get_mut(off - n)?.get_mut()
        }
    }

    /// Write position `off` if no one has: `Err(item)` if it is taken.
    fn set(&self, off: usize, item: T) -> Result<(), T> {
        match off
            .checked_sub(self.sealed.len())
            .and_then(|j| self.open.get(j))
        {
            Some(slot) => slot.set(item),
            None => Err(item),
        }
    }

    /// Write position `off` of a chunk this list alone holds (whatever was there).
    fn put(&mut self, off: usize, item: T) {
        let n = self.sealed.len();
        if let Some(place) = self.sealed.get_mut(off) {
            *place = item;
        } else if let Some(slot) = self.open.get_mut(off - n) {
            slot.take();
            let _ = slot.set(item);
        }
    }

    /// Move out the first `take` items of a chunk this list alone holds.
    fn drain_into(&mut self, take: usize, out: &mut Vec<T>) {
        let n = self.sealed.len().min(take);
        out.extend(self.sealed.drain(..n));
        let rest = take - n;
        out.extend(self.open.iter_mut().take(rest).flat_map(OnceLock::take));
    }

    /// Clone the first `take` items.
    fn clone_first(&self, take: usize, out: &mut Vec<T>)
    where
        T: Clone,
    {
        out.extend((0..take).flat_map(|off| self.get(off).cloned()));
    }
}

/// Chunk index and offset of item `i`.
fn locate(i: usize) -> (usize, usize) {
    if i < 8 {
        (0, i)
    } else if i < 24 {
        (1, i - 8)
    } else if i < SMALL_ITEMS {
        (2, i - 24)
    } else {
        let j = i - SMALL_ITEMS;
        (3 + j / MAX_CHUNK, j % MAX_CHUNK)
    }
}

/// Slots in chunk `k`.
fn capacity(k: usize) -> usize {
    (FIRST_CHUNK << k.min(3)).min(MAX_CHUNK)
}

/// Index of the first item of chunk `k`.
fn chunk_start(k: usize) -> usize {
    match k {
        0 => 0,
        1 => 8,
        2 => 24,
        k => SMALL_ITEMS + (k - 3) * MAX_CHUNK,
    }
}

/// Chunks needed to hold `len` items.
fn chunks_for(len: usize) -> usize {
    match len {
        0 => 0,
        n => locate(n - 1).0 + 1,
    }
}

/// A list whose clones share their items: cloning is O(1) in the length, and a clone that
/// appends does not copy the items before it.
///
/// Use it instead of `Vec<T>` for a long append-shaped field (a conversation, a log): every
/// snapshot of a thread's history, every state a caller keeps across runs and every step that
/// writes while a snapshot is held then costs what the step appended, not the whole list. The
/// [`Append`](crate::Append) and [`AddMessages`](crate::AddMessages) reducers take it as their
/// value, and it is stored exactly like a `Vec<T>` (a JSON array), so a field can change from one
/// to the other without touching stored checkpoints.
///
/// Items live in chunks of up to 64 positions shared between clones: the items a chunk was
/// made with, then slots that later appends write once each. A clone that appends after a
/// sibling already appended at the same place copies only the items of that one chunk. Changing an item in place ([`List::get_mut`]) copies its chunk if another
/// clone shares it.
///
/// ```
/// use stategraph_reducers::List;
///
/// let mut chat: List<String> = ["hi".to_string()].into_iter().collect();
/// let before = chat.clone(); // shares "hi"
/// chat.push("hello".to_string());
/// assert_eq!(chat, ["hi", "hello"]);
/// assert_eq!(before, ["hi"]);
/// assert_eq!(chat.last().map(String::as_str), Some("hello"));
/// assert_eq!(serde_json::to_string(&chat)?, r#"["hi","hello"]"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub struct List<T> {
    /// `chunks_for(len)` chunks; slots at and past `len` belong to no one yet, or to a clone.
    chunks: Arc<Vec<Arc<Chunk<T>>>>,
    len: usize,
}

impl<T> List<T> {
    /// An empty list.
    pub fn new() -> Self {
        List {
            chunks: Arc::new(Vec::new()),
            len: 0,
        }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no item.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The item at `index`, if the list is that long.
    pub fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        let (k, off) = locate(index);
        self.chunks.get(k)?.get(off)
    }

    /// The first item.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }

    /// The last item.
    pub fn last(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The items, first to last.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            list: self,
            front: 0,
            back: self.len,
        }
    }

    /// Append `item`. Amortized O(1); never copies items unless a clone of this list already
    /// appended at the same place (then it copies that one chunk's items).
    pub fn push(&mut self, item: T)
    where
        T: Clone,
    {
        let (k, off) = locate(self.len);
        if off == 0 {
            Arc::make_mut(&mut self.chunks).push(Chunk::new(k, [item]));
            self.len += 1;
            return;
        }
        let item = match self.chunks.get(k) {
            Some(chunk) => match chunk.set(off, item) {
                Ok(()) => {
                    self.len += 1;
                    return;
                }
                Err(item) => item,
            },
            None => item,
        };
        // The position was taken by a clone (or the chunk is missing, which the invariant
        // rules out): this list gets its own copy of the chunk.
        if let Some(chunk) = Arc::get_mut(self.own_chunk(k)) {
            chunk.put(off, item);
            self.len += 1;
        }
    }

    /// A mutable reference to the item at `index`, copying its chunk first if a clone shares
    /// it.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T>
    where
        T: Clone,
    {
        if index >= self.len {
            return None;
        }
        let (k, off) = locate(index);
        Arc::get_mut(self.own_chunk(k))?.get_mut(off)
    }

    /// Shorten the list to `len` items (no effect if it is not longer).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.len = len;
        let keep = chunks_for(len);
        if keep == 0 {
            self.chunks = Arc::new(Vec::new());
            return;
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        chunks.truncate(keep);
        // Drop the appended items past the end now if no clone can see them (the items the
        // chunk was made with stay until it is dropped or overwritten).
        let from = len - chunk_start(keep - 1);
        if let Some(last) = chunks.last_mut().and_then(Arc::get_mut) {
            let skip = from.saturating_sub(last.sealed.len());
            for slot in last.open.iter_mut().skip(skip) {
                slot.take();
            }
        }
    }

    /// Remove every item.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keep only the items for which `keep` is true, in order. O(n): the kept items are
    /// cloned into a new list.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool)
    where
        T: Clone,
    {
        *self = self.iter().filter(|item| keep(item)).cloned().collect();
    }

    /// The items as a `Vec`, cloned.
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.iter().cloned().collect()
    }

    /// The items as a `Vec`: moved out of chunks no clone shares, cloned from the others.
    pub fn into_vec(self) -> Vec<T>
    where
        T: Clone,
    {
        let mut out = Vec::with_capacity(self.len);
        let chunks = Arc::try_unwrap(self.chunks).unwrap_or_else(|shared| (*shared).clone());
        for (k, mut chunk) in chunks.into_iter().enumerate() {
            let take = capacity(k).min(self.len.saturating_sub(chunk_start(k)));
            match Arc::get_mut(&mut chunk) {
                Some(alone) => alone.drain_into(take, &mut out),
                None => chunk.clone_first(take, &mut out),
            }
        }
        out
    }

    /// Whether `self` and `other` share their storage (one is a clone of the other, or of a
    /// common ancestor, with no copy since).
    pub fn shares_storage_with(&self, other: &List<T>) -> bool {
        Arc::ptr_eq(&self.chunks, &other.chunks)
            || matches!(
                (self.chunks.first(), other.chunks.first()),
                (Some(a), Some(b)) if Arc::ptr_eq(a, b)
            )
    }

    /// Chunk `k`, owned by this list alone: the chunk list and the chunk are copied if shared
    /// (only this list's items of the chunk).
    fn own_chunk(&mut self, k: usize) -> &mut Arc<Chunk<T>>
    where
        T: Clone,
    {
        let keep = capacity(k).min(self.len.saturating_sub(chunk_start(k)));
        let chunks = Arc::make_mut(&mut self.chunks);
        if k >= chunks.len() {
            chunks.resize_with(k + 1, || Chunk::new(k, std::iter::empty()));
        }
        let chunk = &mut chunks[k];
        if Arc::get_mut(chunk).is_none() {
            let mut items = Vec::with_capacity(keep);
            chunk.clone_first(keep, &mut items);
            *chunk = Chunk::new(k, items);
        }
        chunk
    }
}

impl<T> Default for List<T> {
    fn default() -> Self {
        List::new()
    }
}

impl<T> Clone for List<T> {
    /// O(1): the clone shares every item.
    fn clone(&self) -> Self {
        List {
            chunks: Arc::clone(&self.chunks),
            len: self.len,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for List<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq<U>, U> PartialEq<List<U>> for List<T> {
    fn eq(&self, other: &List<U>) -> bool {
        self.len == other.len && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl<T: Eq> Eq for List<T> {}

impl<T: PartialEq<U>, U> PartialEq<[U]> for List<T> {
    fn eq(&self, other: &[U]) -> bool {
        self.len == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl<T: PartialEq<U>, U> PartialEq<&[U]> for List<T> {
    fn eq(&self, other: &&[U]) -> bool {
        *self == **other
    }
}

impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for List<T> {
    fn eq(&self, other: &[U; N]) -> bool {
        *self == other[..]
    }
}

impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for List<T> {
    fn eq(&self, other: &Vec<U>) -> bool {
        *self == other[..]
    }
}

impl<T: Hash> Hash for List<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.len.hash(state);
        for item in self {
            item.hash(state);
        }
    }
}

impl<T> Index<usize> for List<T> {
    type Output = T;

    /// # Panics
    /// If `index` is not less than the length, as for a `Vec`.
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(item) => item,
            None => panic!(
                "index out of bounds: the len is {} but the index is {index}",
                self.len
            ),
        }
    }
}

impl<T: Clone> Extend<T> for List<T> {
    /// Fills the last chunk item by item (it may be shared), then adds whole new chunks.
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let mut iter = iter.into_iter().peekable();
        while locate(self.len).1 != 0 {
            match iter.next() {
                Some(item) => self.push(item),
                None => return,
            }
        }
        if iter.peek().is_none() {
            return;
        }
        while iter.peek().is_some() {
            // Length and chunks move together, so a panicking iterator leaves a valid list.
            let k = self.chunks.len();
            let chunk = Chunk::new(k, iter.by_ref().take(capacity(k)));
            self.len += chunk.sealed.len();
            Arc::make_mut(&mut self.chunks).push(chunk);
        }
    }
}

impl<T: Clone> FromIterator<T> for List<T> {
    /// Whole chunks at a time (see [`Extend`]).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut list = List::new();
        list.extend(iter);
        list
    }
}

impl<T: Clone> From<Vec<T>> for List<T> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

impl<T: Clone, const N: usize> From<[T; N]> for List<T> {
    fn from(items: [T; N]) -> Self {
        items.into_iter().collect()
    }
}

impl<T: Clone> From<List<T>> for Vec<T> {
    fn from(list: List<T>) -> Self {
        list.into_vec()
    }
}

impl<'a, T> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: Clone> IntoIterator for List<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    /// The items by value: moved where no clone shares them, cloned otherwise.
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<T: Serialize> Serialize for List<T> {
    /// As a sequence, like a `Vec<T>`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for List<T> {
    /// From a sequence, like a `Vec<T>`.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<T>::deserialize(deserializer).map(List::from)
    }
}

/// Iterator over a [`List`]'s items, from [`List::iter`].
pub struct Iter<'a, T> {
    list: &'a List<T>,
    front: usize,
    back: usize,
}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Iter {
            list: self.list,
            front: self.front,
            back: self.back,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.front >= self.back {
            return None;
        }
        let item = self.list.get(self.front);
        self.front += 1;
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<&'a T> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.list.get(self.back)
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

impl<T> std::iter::FusedIterator for Iter<'_, T> {}

/// A list-shaped field value: what the list reducers ([`Append`](crate::Append),
/// [`AddMessages`](crate::AddMessages)) work on. Implemented for `Vec<T>` and [`List<T>`].
pub trait ListValue:
    Serialize + DeserializeOwned + Clone + Default + Send + Sync + 'static
{
    /// The item type.
    type Item: Serialize + DeserializeOwned + Clone + Send + Sync + 'static;

    /// Number of items.
    fn len(&self) -> usize;

    /// Whether the list has no item.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append one item.
    fn push_item(&mut self, item: Self::Item);

    /// Append `items` in order.
    fn append_items(&mut self, items: Vec<Self::Item>) {
        for item in items {
            self.push_item(item);
        }
    }

    /// The items, first to last.
    fn items(&self) -> impl DoubleEndedIterator<Item = &Self::Item> + ExactSizeIterator;

    /// A mutable reference to the item at `index`.
    fn item_mut(&mut self, index: usize) -> Option<&mut Self::Item>;

    /// The items as a `Vec` (moved where possible).
    fn into_items(self) -> Vec<Self::Item>;

    /// A list of `items`.
    fn from_items(items: Vec<Self::Item>) -> Self;
}

impl<T> ListValue for Vec<T>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    type Item = T;

    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn push_item(&mut self, item: T) {
        self.push(item);
    }

    fn append_items(&mut self, mut items: Vec<T>) {
        self.append(&mut items);
    }

    fn items(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.iter()
    }

    fn item_mut(&mut self, index: usize) -> Option<&mut T> {
        self.get_mut(index)
    }

    fn into_items(self) -> Vec<T> {
        self
    }

    fn from_items(items: Vec<T>) -> Self {
        items
    }
}

impl<T> ListValue for List<T>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    type Item = T;

    fn len(&self) -> usize {
        self.len
    }

    fn push_item(&mut self, item: T) {
        self.push(item);
    }

    fn append_items(&mut self, items: Vec<T>) {
        self.extend(items);
    }

    fn items(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.iter()
    }

    fn item_mut(&mut self, index: usize) -> Option<&mut T> {
        self.get_mut(index)
    }

    fn into_items(self) -> Vec<T> {
        self.into_vec()
    }

    fn from_items(items: Vec<T>) -> Self {
        List::from(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An item that counts its clones.
    #[derive(Debug)]
    struct Counted(u32, Arc<AtomicUsize>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.1.fetch_add(1, Ordering::SeqCst);
            Counted(self.0, self.1.clone())
        }
    }

    #[test]
    fn chunk_layout_covers_every_index_once() {
        let mut expected = (0, 0);
        for i in 0..1000 {
            assert_eq!(locate(i), expected, "index {i}");
            assert_eq!(chunk_start(expected.0) + expected.1, i);
            expected.1 += 1;
            if expected.1 == capacity(expected.0) {
                expected = (expected.0 + 1, 0);
            }
        }
    }

    #[test]
    fn a_history_of_clones_that_each_append_copies_no_item() {
        let clones = Arc::new(AtomicUsize::new(0));
        let mut history: Vec<List<Counted>> = vec![List::new()];
        for i in 0..500 {
            let mut next = history[history.len() - 1].clone();
            next.push(Counted(i, clones.clone()));
            history.push(next);
        }
        assert_eq!(clones.load(Ordering::SeqCst), 0);
        for (n, list) in history.iter().enumerate() {
            assert_eq!(list.len(), n);
            assert!(list.iter().map(|c| c.0).eq(0..n as u32));
        }
    }

    #[test]
    fn two_clones_appending_at_the_same_place_keep_their_own_items() {
        let base: List<u32> = (0..10).collect();
        let mut a = base.clone();
        let mut b = base.clone();
        a.push(100);
        b.push(200);
        b.push(201);
        a.push(101);
        assert!(base.iter().copied().eq(0..10));
        assert_eq!(a.iter().skip(10).copied().collect::<Vec<_>>(), [100, 101]);
        assert_eq!(b.iter().skip(10).copied().collect::<Vec<_>>(), [200, 201]);
        assert!(a.shares_storage_with(&base));
    }

    #[test]
    fn a_forked_append_copies_only_one_chunk() {
        let clones = Arc::new(AtomicUsize::new(0));
        let base: List<Counted> = (0..300).map(|i| Counted(i, clones.clone())).collect();
        let mut a = base.clone();
        a.push(Counted(1000, clones.clone()));
        let mut b = base.clone();
        b.push(Counted(2000, clones.clone()));
        // 300 items: chunks of 8+16+32 then 64s; index 300 sits at offset 52 of chunk 6.
        assert_eq!(clones.load(Ordering::SeqCst), locate(300).1);
        assert_eq!(a.get(300).map(|c| c.0), Some(1000));
        assert_eq!(b.get(300).map(|c| c.0), Some(2000));
    }

    #[test]
    fn get_mut_changes_only_this_list() {
        let base: List<u32> = (0..100).collect();
        let mut edited = base.clone();
        if let Some(item) = edited.get_mut(70) {
            *item = 7000;
        }
        assert_eq!(base[70], 70);
        assert_eq!(edited[70], 7000);
        assert_eq!(edited.len(), 100);
        assert!(edited
            .iter()
            .enumerate()
            .all(|(i, &v)| i == 70 || v == i as u32));
        assert_eq!(edited.get_mut(100), None);
    }

    #[test]
    fn truncate_then_push_does_not_disturb_a_longer_clone() {
        let long: List<u32> = (0..40).collect();
        let mut short = long.clone();
        short.truncate(20);
        short.push(999);
        assert_eq!(short.len(), 21);
        assert_eq!(short[20], 999);
        assert_eq!(long[20], 20);
        assert_eq!(long.len(), 40);
        short.clear();
        assert!(short.is_empty());
        short.push(1);
        assert_eq!(short, [1]);
    }

    #[test]
    fn retain_into_vec_and_iteration_agree_with_vec() {
        let v: Vec<u32> = (0..150).collect();
        let mut list = List::from(v.clone());
        assert_eq!(list, v);
        assert!(list.iter().rev().copied().eq(v.iter().rev().copied()));
        assert_eq!(list.iter().nth(149), Some(&149));
        assert_eq!(list.iter().len(), 150);
        list.retain(|x| x % 3 == 0);
        let kept: Vec<u32> = v.iter().copied().filter(|x| x % 3 == 0).collect();
        assert_eq!(list, kept);
        let shared = list.clone();
        assert_eq!(shared.into_vec(), kept);
        assert_eq!(Vec::from(list), kept);
    }

    #[test]
    fn a_panic_while_extending_leaves_a_valid_list() {
        let mut list: List<u32> = (0..8).collect();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            list.extend((100..).map(|i| if i == 124 { panic!("stop") } else { i }));
        }));
        assert!(result.is_err());
        let n = list.len();
        assert!(list.iter().take(8).copied().eq(0..8));
        list.push(999);
        assert_eq!(list.len(), n + 1);
        assert_eq!(list.get(n), Some(&999));
        assert_eq!(list.iter().count(), n + 1);
    }

    #[test]
    fn serializes_like_a_vec() -> Result<(), serde_json::Error> {
        let list: List<u32> = (0..70).collect();
        let v: Vec<u32> = (0..70).collect();
        assert_eq!(serde_json::to_string(&list)?, serde_json::to_string(&v)?);
        let back: List<u32> = serde_json::from_str(&serde_json::to_string(&v)?)?;
        assert_eq!(back, v);
        Ok(())
    }

    #[test]
    fn clones_are_shared_across_threads() {
        let base: List<u32> = (0..65).collect();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let mut mine = base.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        mine.push(t * 1000 + i);
                    }
                    mine
                })
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            let Ok(list) = h.join() else {
                panic!("thread {t} panicked");
            };
            assert!(list.iter().take(65).copied().eq(0..65));
            assert!(list
                .iter()
                .skip(65)
                .copied()
                .eq((0..100).map(|i| t as u32 * 1000 + i)));
        }
    }
}
