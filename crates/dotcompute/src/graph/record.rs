//! Recording into a graph: code written for a queue (a library operation, a user's
//! sequence of launches) runs once against a [`Recorder`], and what it enqueued becomes
//! nodes of the graph, replayed by [`ExecGraph::launch`].
//!
//! The recorder is an [`AsStream`]: `#[kernel]` launches, fills and copies given to it are
//! recorded, not run. Buffers reach the recording two ways, and no other:
//!
//! * **lent** by the caller ([`Graph::record`]'s `buffers`): borrowed by the graph for its
//!   life, like [`Graph::buffer_mut`], and handed back as graph handles;
//! * **made** by the body with [`AsStream::scratch`] / [`AsStream::scratch_from`]: when
//!   the body drops one, its memory goes to the graph (not back to the pool) and lives as
//!   long as the graph does.
//!
//! A launch naming any other buffer fails the recording. While the body runs, lent and
//! made buffers refuse every use outside the recorder (a host read or write, a launch on
//! a real stream), and the recorder refuses host reads: anything the body did to them
//! at record time would not be repeated by a replay, and would be silently wrong. A
//! recording that fails adds nothing to the graph.

use super::*;
use crate::buffer::{Arg, ArgKind};
use std::any::Any;
use std::cell::RefCell;
use std::sync::Mutex;

/// A buffer's memory, handed to a graph by a dropped recorder buffer.
pub(crate) struct Kept {
    device: Device,
    raw: Option<RawBuffer>,
    uses: Uses,
}

impl Kept {
    pub(crate) fn new(device: Device, raw: RawBuffer, uses: Uses) -> Kept {
        Kept {
            device,
            raw: Some(raw),
            uses,
        }
    }

    fn raw(&self) -> &RawBuffer {
        self.raw.as_ref().expect("kept until dropped")
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.device.backend().free(raw, self.uses.users());
        }
    }
}

/// Where the buffers a recorder made go when they are dropped. Each is boxed: graph
/// registrations refer into it (its `RawBuffer` and `Uses`), so it must not move when
/// the list grows or moves into the graph.
#[allow(clippy::vec_box)]
pub(crate) struct Keeper(Mutex<Vec<Box<Kept>>>);

impl Keeper {
    pub(crate) fn keep(&self, kept: Kept) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(kept));
    }

    #[allow(clippy::vec_box)]
    fn take(&self) -> Vec<Box<Kept>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Which memory a backend buffer is: the address of the backend's object, which stays
/// where it is while the `Box` holding it moves (with its `Buffer`, or into the graph).
fn memory_key(raw: &RawBuffer) -> usize {
    let object: &(dyn Any + Send + Sync) = &**raw;
    object as *const (dyn Any + Send + Sync) as *const u8 as usize
}

/// Elements `offset..offset + len` (of type `elem`) of the memory `key`.
#[derive(Clone, Copy, PartialEq)]
struct Range {
    key: usize,
    offset: usize,
    len: usize,
    elem: Type,
}

enum PendingArg {
    Buffer(Range),
    Scalar(Literal),
}

enum Pending {
    Launch {
        program: Arc<Program>,
        launch: Launch,
        args: Vec<PendingArg>,
    },
    Copy {
        src: Range,
        dst: Range,
    },
    Fill {
        dst: Range,
        pattern: Vec<u8>,
    },
}

#[derive(Default)]
struct Recording {
    nodes: Vec<Pending>,
    /// Keys of the buffers the recorder made (`scratch`, `scratch_from`).
    made: Vec<usize>,
    /// Keys of the buffers made by `scratch_from`: constants, read-only for the nodes.
    constants: Vec<usize>,
}

/// The queue a [`Graph::record`] body is given: work enqueued on it is recorded as nodes
/// of the graph, in order (each after the one before), instead of run.
pub struct Recorder {
    device: Device,
    /// Keys of the lent buffers.
    lent: Vec<usize>,
    keeper: Arc<Keeper>,
    recording: RefCell<Recording>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Recorder on {} ({} nodes so far)",
            self.device.label(),
            self.recording.borrow().nodes.len()
        )
    }
}

impl Recorder {
    /// `key` as a buffer the recording may use (lent, or made by this recorder), checked
    /// now: a buffer from elsewhere may be freed before the recording ends and its memory
    /// given to a later `scratch`, which a check at the end could not tell apart.
    fn known(&self, key: usize, len: usize, elem: Type, what: &str) -> Result<()> {
        if self.lent.contains(&key) || self.recording.borrow().made.contains(&key) {
            return Ok(());
        }
        Err(Error::Graph {
            detail: format!(
                "{what} of {len} {elem} is neither lent to Graph::record nor made by the \
                 recorder (AsStream::scratch): a recording can use only those"
            ),
        })
    }

    /// The recorded range of `b`, after checking it is this device's.
    fn range_of<T: Element>(&self, b: &Buffer<T>, op: &'static str) -> Result<Range> {
        if !b.device().same(&self.device) {
            return Err(Error::ForeignObject {
                op,
                what: format!("a buffer of {} elements", b.len()),
                owner: self.device.labels_against(b.device()).1,
                device: self.device.labels_against(b.device()).0,
            });
        }
        let key = memory_key(b.raw());
        self.known(
            key,
            b.len(),
            T::TYPE,
            &format!("the buffer of a recorded {op}"),
        )?;
        Ok(Range {
            key,
            offset: 0,
            len: b.len(),
            elem: T::TYPE,
        })
    }

    /// Marks a buffer this recorder made: kept by the graph once dropped, and refused
    /// outside the recording meanwhile.
    fn made<T: Element>(&self, mut b: Buffer<T>) -> Buffer<T> {
        self.recording.borrow_mut().made.push(memory_key(b.raw()));
        b.keeper = Some(self.keeper.clone());
        b.uses().set_recording(true);
        b
    }
}

impl AsStream for Recorder {
    fn device(&self) -> &Device {
        &self.device
    }

    /// The default stream's id, for code that asks; nothing is enqueued on it.
    fn stream_id(&self) -> StreamId {
        StreamId::DEFAULT
    }

    fn launch_kernel(&self, kernel: &KernelDef, launch: Launch, args: &[Arg<'_>]) -> Result<()> {
        let program = kernel.program()?.clone();
        let mut pending = Vec::with_capacity(args.len());
        for arg in args {
            pending.push(match &arg.0 {
                ArgKind::Buffer {
                    device,
                    raw,
                    offset,
                    len,
                    elem,
                    ..
                } => {
                    if !device.same(&self.device) {
                        return Err(Error::ForeignObject {
                            op: "Recorder::launch_kernel",
                            what: format!("a buffer argument of `{}`", program.kernel.name),
                            owner: self.device.labels_against(device).1,
                            device: self.device.labels_against(device).0,
                        });
                    }
                    let key = memory_key(raw);
                    self.known(
                        key,
                        *len,
                        *elem,
                        &format!("a buffer argument of `{}`", program.kernel.name),
                    )?;
                    PendingArg::Buffer(Range {
                        key,
                        offset: *offset,
                        len: *len,
                        elem: *elem,
                    })
                }
                ArgKind::Scalar(l) => PendingArg::Scalar(*l),
            });
        }
        self.recording.borrow_mut().nodes.push(Pending::Launch {
            program,
            launch,
            args: pending,
        });
        Ok(())
    }

    fn fill_buffer<T: Element>(&self, dst: &mut Buffer<T>, value: T) -> Result<()> {
        let dst = self.range_of(dst, "fill")?;
        if dst.len > 0 {
            self.recording.borrow_mut().nodes.push(Pending::Fill {
                dst,
                pattern: bytemuck::bytes_of(&value).to_vec(),
            });
        }
        Ok(())
    }

    fn copy_buffer<T: Element>(&self, src: &Buffer<T>, dst: &mut Buffer<T>) -> Result<()> {
        let (src, dst) = (self.range_of(src, "copy")?, self.range_of(dst, "copy")?);
        crate::buffer::same_len("copy", dst.len, src.len)?;
        if dst.len > 0 {
            self.recording
                .borrow_mut()
                .nodes
                .push(Pending::Copy { src, dst });
        }
        Ok(())
    }

    fn read_view<T: Element>(&self, _src: &BufferView<'_, T>) -> Result<Vec<T>> {
        Err(Error::Graph {
            detail: "a graph recording cannot read a buffer to the host: the value would be \
                     the buffer's now, not at each replay (an operation that needs a count \
                     or an offset on the host cannot be recorded)"
                .into(),
        })
    }

    fn scratch<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Ok(self.made(self.device.alloc(len)?))
    }

    fn scratch_from<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let b = self.device.upload(data)?;
        self.recording
            .borrow_mut()
            .constants
            .push(memory_key(b.raw()));
        Ok(self.made(b))
    }

    fn recording(&self) -> bool {
        true
    }
}

/// Buffers lent to [`Graph::record`]: a `&'a Buffer<T>` (read by the recorded work), a
/// `&'a mut Buffer<T>` (read and written), or a tuple of up to four of them. The graph
/// borrows them for its life and hands back a handle for each ([`GraphBuffer`],
/// [`GraphBufferMut`]).
pub trait Lend<'a> {
    /// The graph handles of the lent buffers, in the same shape.
    type Handles;
    #[doc(hidden)]
    fn each_lent(&self, f: &mut dyn FnMut(&RawBuffer, &Uses));
    #[doc(hidden)]
    fn register(self, graph: &mut Graph<'a>) -> Result<Self::Handles>;
}

impl<'a, T: Element> Lend<'a> for &'a Buffer<T> {
    type Handles = GraphBuffer<T>;
    fn each_lent(&self, f: &mut dyn FnMut(&RawBuffer, &Uses)) {
        f(self.raw(), self.uses())
    }
    fn register(self, graph: &mut Graph<'a>) -> Result<GraphBuffer<T>> {
        graph.buffer(self)
    }
}

impl<'a, T: Element> Lend<'a> for &'a mut Buffer<T> {
    type Handles = GraphBufferMut<T>;
    fn each_lent(&self, f: &mut dyn FnMut(&RawBuffer, &Uses)) {
        f(self.raw(), self.uses())
    }
    fn register(self, graph: &mut Graph<'a>) -> Result<GraphBufferMut<T>> {
        graph.buffer_mut(self)
    }
}

macro_rules! lend_tuple {
    ($($name:ident),*) => {
        impl<'a, $($name: Lend<'a>),*> Lend<'a> for ($($name,)*) {
            type Handles = ($($name::Handles,)*);
            #[allow(non_snake_case)]
            fn each_lent(&self, f: &mut dyn FnMut(&RawBuffer, &Uses)) {
                let ($($name,)*) = self;
                $($name.each_lent(f);)*
            }
            #[allow(non_snake_case)]
            fn register(self, graph: &mut Graph<'a>) -> Result<Self::Handles> {
                let ($($name,)*) = self;
                Ok(($($name.register(graph)?,)*))
            }
        }
    };
}
lend_tuple!(A);
lend_tuple!(A, B);
lend_tuple!(A, B, C);
lend_tuple!(A, B, C, D);

/// What [`Graph::record`] gives back.
#[derive(Debug)]
pub struct Recorded<H, R> {
    /// The graph handles of the lent buffers (to read results, write new inputs or
    /// replace buffers between replays, or to use in later nodes).
    pub buffers: H,
    /// The nodes after which the recorded work is done: depend on these. (The `deps`
    /// given when nothing was recorded.)
    pub done: Vec<NodeId>,
    /// What the body returned.
    pub value: R,
}

impl<'a> Graph<'a> {
    /// Runs `body` once with a [`Recorder`] and records what it enqueues there as nodes
    /// of this graph, each after the one before, the first after `deps`: library
    /// operations written for any queue (those of `dotcompute-ops`, or a user's own
    /// sequence of launches) become replayable nodes.
    ///
    /// The body reaches `buffers` through its second argument; the graph borrows them
    /// for its life and returns their handles. Temporaries the body makes with
    /// [`AsStream::scratch`] are kept by the graph. The body cannot read buffers to the
    /// host or use them outside the recorder (such a use is an `Error::Graph`), nor name
    /// a buffer that is neither lent nor made by the recorder. On an error nothing is
    /// added to the graph.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Graph;
    /// #[kernel]
    /// fn twice(x: &mut [u32]) {
    ///     let i = global_id().x;
    ///     if i < x.len() { x[i] *= 2; }
    /// }
    /// let device = Device::cpu();
    /// let mut x = device.upload(&[1u32, 2, 3])?;
    /// let mut graph = Graph::new(&device);
    /// let recorded = graph.record(&mut x, &[], |queue, x| {
    ///     let mut t = queue.scratch::<u32>(3)?; // kept by the graph
    ///     queue.copy_buffer(x, &mut t)?;
    ///     twice::launch(queue, Launch::threads(3), &mut t)?;
    ///     queue.copy_buffer(&t, x)
    /// })?;
    /// let gx = recorded.buffers;
    /// let mut exec = graph.instantiate()?;
    /// exec.launch(&device)?;
    /// exec.launch(&device)?;
    /// assert_eq!(exec.read(gx)?, [4, 8, 12]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn record<B: Lend<'a>, R>(
        &mut self,
        mut buffers: B,
        deps: &[NodeId],
        body: impl FnOnce(&Recorder, &mut B) -> Result<R>,
    ) -> Result<Recorded<B::Handles, R>> {
        for &d in deps {
            self.node_index(d)?;
        }
        let mut lent = Vec::new();
        buffers.each_lent(&mut |raw, uses| {
            lent.push(memory_key(raw));
            uses.set_recording(true);
        });
        let recorder = Recorder {
            device: self.device.clone(),
            lent,
            keeper: Arc::new(Keeper(Mutex::new(Vec::new()))),
            recording: RefCell::new(Recording::default()),
        };
        // The lent buffers are usable again however the body ends.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            body(&recorder, &mut buffers)
        }));
        buffers.each_lent(&mut |_, uses| uses.set_recording(false));
        let value = match ran {
            Ok(value) => value?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let Recorder {
            lent,
            keeper,
            recording,
            ..
        } = recorder;
        let kept = keeper.take();
        for k in &kept {
            k.uses.set_recording(false);
        }
        let recording = recording.into_inner();
        let before = (self.nodes.len(), self.edges.len(), self.buffers.len());
        match self.add_recording(buffers, &lent, &kept, recording, deps) {
            Ok((handles, done)) => {
                self.kept.extend(kept);
                Ok(Recorded {
                    buffers: handles,
                    done,
                    value,
                })
            }
            Err(e) => {
                // Nothing of a failed recording stays (its kept buffers are freed).
                self.nodes.truncate(before.0);
                self.edges.truncate(before.1);
                self.buffers.truncate(before.2);
                Err(e)
            }
        }
    }

    /// Registers the lent buffers and the ranges the recorded nodes use, and adds the
    /// nodes in a chain after `deps`.
    fn add_recording<B: Lend<'a>>(
        &mut self,
        buffers: B,
        lent: &[usize],
        kept: &[Box<Kept>],
        recording: Recording,
        deps: &[NodeId],
    ) -> Result<(B::Handles, Vec<NodeId>)> {
        let first_lent = self.buffers.len();
        let handles = buffers.register(self)?;
        // Registrations made here for ranges the nodes use, by range.
        let mut ranges: Vec<(Range, usize)> = Vec::new();
        let mut done = deps.to_vec();
        for node in recording.nodes {
            let mut index_of = |r: Range, graph: &mut Graph<'a>| -> Result<usize> {
                graph.recorded_range(r, first_lent, lent, kept, &recording.constants, &mut ranges)
            };
            let id = match node {
                Pending::Launch {
                    program,
                    launch,
                    args,
                } => {
                    let mut graph_args = Vec::with_capacity(args.len());
                    for a in args {
                        graph_args.push(match a {
                            PendingArg::Buffer(r) => GraphArg(GraphArgKind::Buffer {
                                graph: self.id,
                                index: index_of(r, self)?,
                            }),
                            PendingArg::Scalar(l) => GraphArg(GraphArgKind::Scalar(l)),
                        });
                    }
                    self.launch_program(program, launch, &graph_args, &done)?
                }
                Pending::Copy { src, dst } => {
                    let (s, d) = (index_of(src, self)?, index_of(dst, self)?);
                    self.writable_for(d, "copy")?;
                    self.push_copy(s, d, dst.len * dst.elem.size_bytes(), &done)?
                }
                Pending::Fill { dst, pattern } => {
                    let d = index_of(dst, self)?;
                    self.writable_for(d, "fill")?;
                    self.push("fill".into(), NodeKind::Fill { dst: d, pattern }, &done)?
                }
            };
            done = vec![id];
        }
        Ok((handles, done))
    }

    /// `Error::Graph` unless registered buffer `b` may be written.
    fn writable_for(&self, b: usize, op: &str) -> Result<()> {
        if self.buffers[b].writable {
            return Ok(());
        }
        Err(Error::Graph {
            detail: format!(
                "a recorded {op} writes {}, which is read-only (lent as `&Buffer`, or made \
                 by `scratch_from`)",
                self.buffers[b].describe(b)
            ),
        })
    }

    /// The registration of range `r` a recorded node uses: the lent buffer itself when
    /// `r` is all of it, else a registration of the range (made once).
    fn recorded_range(
        &mut self,
        r: Range,
        first_lent: usize,
        lent: &[usize],
        kept: &[Box<Kept>],
        constants: &[usize],
        ranges: &mut Vec<(Range, usize)>,
    ) -> Result<usize> {
        if let Some(&(_, i)) = ranges.iter().find(|(known, _)| *known == r) {
            return Ok(i);
        }
        let (raw, uses, writable, base) = if let Some(k) = lent.iter().position(|&l| l == r.key) {
            let whole = &self.buffers[first_lent + k];
            if r.offset == 0 && r.len == whole.len && r.elem == whole.elem {
                return Ok(first_lent + k);
            }
            (whole.raw, whole.uses, whole.writable, whole.offset)
        } else if let Some(k) = kept.iter().find(|k| memory_key(k.raw()) == r.key) {
            // SAFETY: `k` is boxed and moves into `self.kept` (or is dropped with the
            // registrations truncated, if the recording fails): it stays where it is, and
            // is neither changed nor dropped, until the graph and its executable are
            // dropped, which ends every use of the registration. Nothing hands these
            // references out of the graph.
            let (raw, uses): (&'a RawBuffer, &'a Uses) =
                unsafe { (&*(k.raw() as *const RawBuffer), &*(&k.uses as *const Uses)) };
            (raw, uses, !constants.contains(&r.key), 0)
        } else {
            return Err(Error::Graph {
                detail: format!(
                    "a recorded node uses a buffer of {} {} that the recorder made and \
                     that was still alive when the recording ended (the graph keeps only \
                     the buffers the body dropped)",
                    r.len, r.elem
                ),
            });
        };
        self.buffers.push(Registered {
            raw,
            uses,
            offset: base + r.offset * r.elem.size_bytes(),
            len: r.len,
            elem: r.elem,
            writable,
            unordered: false,
        });
        let i = self.buffers.len() - 1;
        ranges.push((r, i));
        Ok(i)
    }
}
