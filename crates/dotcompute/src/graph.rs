//! Compute graphs: launches, copies and fills with explicit dependencies, instantiated
//! once per device and replayed on any stream of it.
//!
//! ```
//! use dotcompute::prelude::*;
//! use dotcompute::{Graph, GraphArg};
//! #[kernel]
//! fn axpb(x: &mut [f32], a: f32, b: f32) {
//!     let i = global_id().x;
//!     if i < x.len() { x[i] = x[i] * a + b; }
//! }
//! let device = Device::cpu();
//! let mut x = device.upload(&[1.0f32, 2.0, 3.0])?;
//! let mut graph = Graph::new(&device);
//! let gx = graph.buffer_mut(&mut x)?;
//! let first = graph.launch(&axpb::KERNEL, Launch::threads(3),
//!     &[gx.arg(), GraphArg::scalar(2.0f32), GraphArg::scalar(1.0f32)], &[])?;
//! graph.launch(&axpb::KERNEL, Launch::threads(3),
//!     &[gx.arg(), GraphArg::scalar(10.0f32), GraphArg::scalar(0.0f32)], &[first])?;
//! let mut exec = graph.instantiate()?;
//! exec.launch(&device)?;
//! assert_eq!(exec.read(gx)?, vec![30.0, 50.0, 70.0]);
//! exec.set_scalar(first, 1, 0.0f32)?; // replay with new scalars, no re-instantiation
//! exec.launch(&device)?;
//! assert_eq!(exec.read(gx)?, vec![10.0, 10.0, 10.0]);
//! # Ok::<(), dotcompute::Error>(())
//! ```
//!
//! * **CUDA**: the nodes are captured into a CUDA graph at `instantiate` (independent
//!   nodes of a level on forked capture streams, so they are parallel branches of the
//!   CUDA graph), and replayed by one `cuGraphLaunch`. A replay after `set_scalar` / `set_buffer` captures again and
//!   updates the executable in place (`cuGraphExecUpdate`) where the driver allows it.
//! * **CPU**: nodes run in dependency order; independent nodes of one level run in
//!   parallel.
//! * **wgpu**: nodes are submitted in dependency order to the device's one queue.
//!
//! A graph borrows its buffers for its whole life (`&mut` for written ones), so none can
//! be freed or touched by the host while it exists; read results with
//! [`ExecGraph::read`]. Buffer uses are ordered against other streams like any launch.

use crate::args::{check_arg, check_count, check_geometry, check_program, ArgView};
use crate::buffer::{Buffer, BufferView, BufferViewMut, Element, ScalarArg};
use crate::device::Device;
use crate::stream::AsStream;
use crate::tracking::Uses;
use crate::RawKernel;
use dotcompute_hal::{
    BoundArg, Error, GraphExec, KernelDef, Launch, LaunchRequest, Program, RawBuffer,
    ResolvedLaunch, Result, StreamId,
};
use dotcompute_ir::{Access, Literal, Param, Type};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod exec;
mod record;
pub use exec::ExecGraph;
pub(crate) use record::{Keeper, Kept};
pub use record::{Lend, Recorded, Recorder};

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// A buffer registered with a graph.
struct Registered<'a> {
    raw: &'a RawBuffer,
    uses: &'a Uses,
    /// The first element's byte offset in `raw` (a view's; 0 for a whole buffer).
    offset: usize,
    len: usize,
    elem: Type,
    writable: bool,
    /// Nodes no dependency orders may use it ([`Graph::allow_unordered`]).
    unordered: bool,
}

impl Registered<'_> {
    /// How errors name the buffer: `buffer #2 (1000 f32, writable)`.
    fn describe(&self, index: usize) -> String {
        format!(
            "buffer #{index} ({} {}, {})",
            self.len,
            self.elem,
            if self.writable {
                "writable"
            } else {
                "read-only"
            }
        )
    }
}

/// A read-only buffer of a graph ([`Graph::buffer`]).
pub struct GraphBuffer<T> {
    graph: u64,
    index: usize,
    _t: PhantomData<fn() -> T>,
}
/// A writable buffer of a graph ([`Graph::buffer_mut`]).
pub struct GraphBufferMut<T> {
    graph: u64,
    index: usize,
    _t: PhantomData<fn() -> T>,
}
impl<T> std::fmt::Debug for GraphBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphBuffer #{} of graph {}", self.index, self.graph)
    }
}
impl<T> std::fmt::Debug for GraphBufferMut<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphBufferMut #{} of graph {}", self.index, self.graph)
    }
}
impl<T> Clone for GraphBuffer<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GraphBuffer<T> {}
impl<T> Clone for GraphBufferMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GraphBufferMut<T> {}

impl<T: Element> GraphBuffer<T> {
    /// The buffer as a launch argument.
    pub fn arg(self) -> GraphArg {
        GraphArg(GraphArgKind::Buffer {
            graph: self.graph,
            index: self.index,
        })
    }
}
impl<T: Element> GraphBufferMut<T> {
    /// The buffer as a launch argument (bound writable where the kernel writes).
    pub fn arg(self) -> GraphArg {
        GraphArg(GraphArgKind::Buffer {
            graph: self.graph,
            index: self.index,
        })
    }
    /// The same buffer, read-only (a copy's source, say).
    pub fn read_only(self) -> GraphBuffer<T> {
        GraphBuffer {
            graph: self.graph,
            index: self.index,
            _t: PhantomData,
        }
    }
}

/// One argument of a graph launch node: made only by [`GraphBuffer::arg`],
/// [`GraphBufferMut::arg`] and [`GraphArg::scalar`] (opaque, like [`Arg`](crate::Arg), so
/// that no argument exists which the graph's checks did not see).
#[derive(Clone, Copy, Debug)]
pub struct GraphArg(GraphArgKind);

#[derive(Clone, Copy, Debug)]
enum GraphArgKind {
    Buffer { graph: u64, index: usize },
    Scalar(Literal),
}

impl GraphArg {
    pub fn scalar<T: ScalarArg>(v: T) -> GraphArg {
        GraphArg(GraphArgKind::Scalar(v.literal()))
    }
}

/// A node of a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId {
    graph: u64,
    index: usize,
}

#[derive(Clone, Copy, Debug)]
enum NodeArg {
    Buffer(usize),
    Scalar(Literal),
}

enum NodeKind {
    Launch {
        program: Arc<Program>,
        geometry: ResolvedLaunch,
        args: Vec<NodeArg>,
    },
    Copy {
        src: usize,
        dst: usize,
        bytes: usize,
    },
    Fill {
        dst: usize,
        pattern: Vec<u8>,
    },
}

struct Node {
    label: String,
    kind: NodeKind,
}

impl Node {
    /// The registered buffers the node uses, each with whether it writes it.
    fn accesses(&self) -> Vec<(usize, bool)> {
        match &self.kind {
            NodeKind::Launch { program, args, .. } => args
                .iter()
                .zip(&program.kernel.params)
                .filter_map(|(a, p)| match a {
                    NodeArg::Buffer(b) => Some((*b, writes(p))),
                    NodeArg::Scalar(_) => None,
                })
                .collect(),
            NodeKind::Copy { src, dst, .. } => vec![(*src, false), (*dst, true)],
            NodeKind::Fill { dst, .. } => vec![(*dst, true)],
        }
    }
}

/// Whether a kernel may write through parameter `p` (a `&mut [T]`).
fn writes(p: &Param) -> bool {
    matches!(
        p,
        Param::Buffer {
            access: Access::ReadWrite,
            ..
        }
    )
}

/// A graph being built: nodes and their dependencies, on one device.
pub struct Graph<'a> {
    id: u64,
    device: Device,
    buffers: Vec<Registered<'a>>,
    nodes: Vec<Node>,
    /// `(before, after)`: `after` starts once `before` is done.
    edges: Vec<(usize, usize)>,
    /// The memory of temporaries made by recordings ([`Graph::record`]), which
    /// registrations of `buffers` refer to: declared last, so dropped after them; boxed,
    /// so that they stay where the registrations point.
    #[allow(clippy::vec_box)]
    kept: Vec<Box<Kept>>,
}

impl<'a> Graph<'a> {
    pub fn new(device: &Device) -> Graph<'a> {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            buffers: Vec::new(),
            nodes: Vec::new(),
            edges: Vec::new(),
            kept: Vec::new(),
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    fn register<T: Element>(&mut self, b: &'a Buffer<T>, writable: bool) -> Result<usize> {
        self.register_range(b, 0, b.len(), writable)
    }

    /// Registers elements `offset..offset + len` of `b` (a view's range, checked when the
    /// view was made).
    fn register_range<T: Element>(
        &mut self,
        b: &'a Buffer<T>,
        offset: usize,
        len: usize,
        writable: bool,
    ) -> Result<usize> {
        if !b.device().same(&self.device) {
            return Err(Error::ForeignObject {
                op: "Graph::buffer",
                what: format!("a buffer of {} elements", b.len()),
                owner: self.device.labels_against(b.device()).1,
                device: self.device.labels_against(b.device()).0,
            });
        }
        self.buffers.push(Registered {
            raw: b.raw(),
            uses: b.uses(),
            offset: offset * std::mem::size_of::<T>(),
            len,
            elem: T::TYPE,
            writable,
            unordered: false,
        });
        Ok(self.buffers.len() - 1)
    }

    /// Registers a read-only view (a range of a buffer) as a graph buffer: nodes see its
    /// elements from index 0, as a launch with the view does.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Graph;
    ///
    /// let device = Device::cpu();
    /// let src = device.upload(&[1u32, 2, 3, 4, 5])?;
    /// let mut dst = device.alloc_filled(5, 0u32)?;
    /// let mut graph = Graph::new(&device);
    /// let middle = graph.view(src.slice(1..4)?)?;
    /// let tail = graph.view_mut(dst.slice_mut(2..5)?)?;
    /// graph.copy(middle, tail, &[])?;
    /// let mut exec = graph.instantiate()?;
    /// exec.launch(&device)?;
    /// assert_eq!(exec.read(tail)?, [2, 3, 4]);
    /// drop(exec);
    /// assert_eq!(dst.to_vec()?, [0, 0, 2, 3, 4]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn view<T: Element>(&mut self, v: BufferView<'a, T>) -> Result<GraphBuffer<T>> {
        Ok(GraphBuffer {
            graph: self.id,
            index: self.register_range(v.buffer(), v.offset(), v.len(), false)?,
            _t: PhantomData,
        })
    }

    /// Registers a writable view as a graph buffer (see [`Graph::view`]). The view
    /// borrows its buffer `&mut` for the graph's life, so no other view of that buffer
    /// can be registered beside it.
    pub fn view_mut<T: Element>(&mut self, v: BufferViewMut<'a, T>) -> Result<GraphBufferMut<T>> {
        let (buffer, offset, len) = v.into_parts();
        Ok(GraphBufferMut {
            graph: self.id,
            index: self.register_range(buffer, offset, len, true)?,
            _t: PhantomData,
        })
    }

    /// Registers a buffer the graph only reads. A buffer of another device is an error.
    pub fn buffer<T: Element>(&mut self, b: &'a Buffer<T>) -> Result<GraphBuffer<T>> {
        Ok(GraphBuffer {
            graph: self.id,
            index: self.register(b, false)?,
            _t: PhantomData,
        })
    }

    /// Registers a buffer the graph may write. A buffer of another device is an error.
    pub fn buffer_mut<T: Element>(&mut self, b: &'a mut Buffer<T>) -> Result<GraphBufferMut<T>> {
        Ok(GraphBufferMut {
            graph: self.id,
            index: self.register(b, true)?,
            _t: PhantomData,
        })
    }

    fn node_index(&self, n: NodeId) -> Result<usize> {
        if n.graph != self.id || n.index >= self.nodes.len() {
            return Err(Error::Graph {
                detail: "a node of another graph was named as a dependency".into(),
            });
        }
        Ok(n.index)
    }

    fn buffer_index(&self, graph: u64, index: usize) -> Result<usize> {
        if graph != self.id || index >= self.buffers.len() {
            return Err(Error::Graph {
                detail: "a buffer handle of another graph was used".into(),
            });
        }
        Ok(index)
    }

    fn push(&mut self, label: String, kind: NodeKind, deps: &[NodeId]) -> Result<NodeId> {
        let deps: Vec<usize> = deps
            .iter()
            .map(|&d| self.node_index(d))
            .collect::<Result<_>>()?;
        let index = self.nodes.len();
        self.nodes.push(Node {
            label: format!("#{index} {label}"),
            kind,
        });
        self.edges.extend(deps.into_iter().map(|d| (d, index)));
        Ok(NodeId {
            graph: self.id,
            index,
        })
    }

    /// Adds a launch of a `#[kernel]` that starts after `deps`. Arguments are checked as
    /// for a direct launch (count, kinds, element types, access, empty buffers) and the
    /// geometry against the device's limits, now.
    pub fn launch(
        &mut self,
        kernel: &KernelDef,
        launch: Launch,
        args: &[GraphArg],
        deps: &[NodeId],
    ) -> Result<NodeId> {
        let program = kernel.program()?.clone();
        self.launch_program(program, launch, args, deps)
    }

    /// Adds a launch of a hand-written kernel (see [`Graph::launch`]).
    pub fn launch_raw(
        &mut self,
        kernel: &RawKernel,
        launch: Launch,
        args: &[GraphArg],
        deps: &[NodeId],
    ) -> Result<NodeId> {
        let launch = kernel.group_for(launch)?;
        self.launch_program(kernel.program_arc(), launch, args, deps)
    }

    fn launch_program(
        &mut self,
        program: Arc<Program>,
        launch: Launch,
        args: &[GraphArg],
        deps: &[NodeId],
    ) -> Result<NodeId> {
        check_program(&program, &self.device)?;
        let ir = &program.kernel;
        check_count(ir, args.len())?;
        let mut node_args = Vec::with_capacity(args.len());
        for (param, arg) in ir.params.iter().zip(args) {
            node_args.push(match arg.0 {
                GraphArgKind::Buffer { graph, index } => {
                    let i = self.buffer_index(graph, index)?;
                    let b = &self.buffers[i];
                    check_arg(
                        ir,
                        param,
                        ArgView::Buffer {
                            elem: b.elem,
                            writable: b.writable,
                            len: b.len,
                        },
                    )?;
                    NodeArg::Buffer(i)
                }
                GraphArgKind::Scalar(l) => {
                    check_arg(ir, param, ArgView::Scalar(l))?;
                    NodeArg::Scalar(l)
                }
            });
        }
        self.check_aliasing(ir, &node_args)?;
        let mut geometry = launch.resolve(ir, &self.device.info().limits)?;
        check_geometry(&program, &geometry)?;
        if geometry.time_limit.is_some() {
            // A replay is one submission (one cuGraphLaunch on CUDA): no node can be
            // waited for alone.
            return Err(Error::Graph {
                detail: format!(
                    "node `{}`: a graph node cannot have its own time limit \
                     (Launch::time_limit); the device's limit bounds each wait for a replay",
                    ir.name
                ),
            });
        }
        // Graph nodes run unchecked: a checked launch waits for its kernel and reads its
        // violation record, which a captured CUDA graph cannot do. Check a graph's
        // kernels by launching them directly with `Launch::checked`.
        geometry.checked = false;
        let label = ir.name.clone();
        self.push(
            label,
            NodeKind::Launch {
                program,
                geometry,
                args: node_args,
            },
            deps,
        )
    }

    /// A buffer bound to a `&mut [T]` parameter of a node may not be bound to any other
    /// parameter of it: a typed launch cannot borrow one buffer as `&[T]` and `&mut [T]`
    /// at once, and a graph node must not either (the kernel's reads would race its
    /// writes; wgpu refuses such a binding only later, at an unrelated call).
    fn check_aliasing(&self, ir: &dotcompute_ir::Kernel, args: &[NodeArg]) -> Result<()> {
        for (i, (a, p)) in args.iter().zip(&ir.params).enumerate() {
            let NodeArg::Buffer(b) = *a else { continue };
            if !writes(p) {
                continue;
            }
            for (j, (other, q)) in args.iter().zip(&ir.params).enumerate() {
                if j != i && matches!(*other, NodeArg::Buffer(c) if c == b) {
                    return Err(Error::Graph {
                        detail: format!(
                            "graph {}, node #{} `{}`: {} is bound to `{}` (written) and to \
                             `{}`; a buffer a kernel writes must not be bound twice",
                            self.id,
                            self.nodes.len(),
                            ir.name,
                            self.buffers[b].describe(b),
                            p.name(),
                            q.name()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Lets nodes that no dependency orders use `buffer` together, one of them writing
    /// (kernels that only combine into it atomically, say). Without this,
    /// [`Graph::instantiate`] refuses such a graph, naming both nodes.
    pub fn allow_unordered<T: Element>(&mut self, buffer: GraphBufferMut<T>) -> Result<()> {
        let i = self.buffer_index(buffer.graph, buffer.index)?;
        self.buffers[i].unordered = true;
        Ok(())
    }

    /// Two nodes that use one buffer, one of them writing, must be ordered by the
    /// dependencies (directly or through other nodes): otherwise they may run at once
    /// (parallel branches of a CUDA graph, one level's nodes on the CPU) and the result
    /// depends on timing. `levels` is a topological order of the nodes.
    fn check_races(&self, levels: &[Vec<usize>]) -> Result<()> {
        let n = self.nodes.len();
        let words = n.div_ceil(64);
        // before[i]: the nodes that finish before node i starts (its ancestors).
        let mut before = vec![0u64; n * words];
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(b, a) in &self.edges {
            preds[a].push(b);
        }
        for &i in levels.iter().flatten() {
            for &p in &preds[i] {
                before[i * words + p / 64] |= 1 << (p % 64);
                for w in 0..words {
                    before[i * words + w] |= before[p * words + w];
                }
            }
        }
        let ordered = |x: usize, y: usize| {
            before[y * words + x / 64] & (1 << (x % 64)) != 0
                || before[x * words + y / 64] & (1 << (y % 64)) != 0
        };
        // For each buffer, its users in node order. Registrations of one buffer's memory
        // (a lent buffer and the ranges of it a recording used) count as one buffer.
        let memory = self.memory_of_registrations();
        let mut users: Vec<Vec<(usize, bool)>> = vec![Vec::new(); self.buffers.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for (b, writes) in node.accesses() {
                let b = memory[b];
                if users[b]
                    .last()
                    .is_some_and(|&(last, w)| last == i && (w || !writes))
                {
                    continue;
                }
                users[b].push((i, writes));
            }
        }
        for (b, list) in users.iter().enumerate() {
            if (0..self.buffers.len()).any(|r| memory[r] == b && self.buffers[r].unordered) {
                continue;
            }
            for (k, &(x, wx)) in list.iter().enumerate() {
                for &(y, wy) in &list[k + 1..] {
                    if x != y && (wx || wy) && !ordered(x, y) {
                        let writer = if wx { x } else { y };
                        return Err(Error::Graph {
                            detail: format!(
                                "graph {}: nodes {} and {} both use {} and {} writes it, \
                                 but no dependency orders them; add one (the `deps` of a \
                                 node, or Graph::depend) or, where any order is right, \
                                 call Graph::allow_unordered on the buffer",
                                self.id,
                                self.nodes[x].label,
                                self.nodes[y].label,
                                self.buffers[b].describe(b),
                                self.nodes[writer].label
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// For each registration, the first registration of the same buffer.
    fn memory_of_registrations(&self) -> Vec<usize> {
        (0..self.buffers.len())
            .map(|b| {
                (0..=b)
                    .find(|&r| std::ptr::eq(self.buffers[r].raw, self.buffers[b].raw))
                    .unwrap_or(b)
            })
            .collect()
    }

    /// Adds a device-to-device copy of `src` into `dst` (same length).
    pub fn copy<T: Element>(
        &mut self,
        src: GraphBuffer<T>,
        dst: GraphBufferMut<T>,
        deps: &[NodeId],
    ) -> Result<NodeId> {
        let s = self.buffer_index(src.graph, src.index)?;
        let d = self.buffer_index(dst.graph, dst.index)?;
        if s == d {
            return Err(Error::Graph {
                detail: format!(
                    "graph {}, node #{} copy: the source and the destination are both {}",
                    self.id,
                    self.nodes.len(),
                    self.buffers[d].describe(d)
                ),
            });
        }
        crate::buffer::same_len("Graph::copy", self.buffers[d].len, self.buffers[s].len)?;
        let bytes = self.buffers[d].len * std::mem::size_of::<T>();
        self.push_copy(s, d, bytes, deps)
    }

    /// Adds a copy of `bytes` from registered buffer `s` to `d` (checked by the caller).
    fn push_copy(&mut self, s: usize, d: usize, bytes: usize, deps: &[NodeId]) -> Result<NodeId> {
        self.push(
            "copy".into(),
            NodeKind::Copy {
                src: s,
                dst: d,
                bytes,
            },
            deps,
        )
    }

    /// Adds a fill of `dst` with `value`.
    pub fn fill<T: Element>(
        &mut self,
        dst: GraphBufferMut<T>,
        value: T,
        deps: &[NodeId],
    ) -> Result<NodeId> {
        let d = self.buffer_index(dst.graph, dst.index)?;
        self.push(
            "fill".into(),
            NodeKind::Fill {
                dst: d,
                pattern: bytemuck::bytes_of(&value).to_vec(),
            },
            deps,
        )
    }

    /// Makes `after` start once `before` is done (an edge added after both exist; a
    /// cycle is reported by [`Graph::instantiate`]).
    pub fn depend(&mut self, before: NodeId, after: NodeId) -> Result<()> {
        let (b, a) = (self.node_index(before)?, self.node_index(after)?);
        self.edges.push((b, a));
        Ok(())
    }

    /// The nodes in an order that respects every dependency, grouped in levels (a node's
    /// level is one more than its latest dependency's), or the cycle that prevents it.
    fn levels(&self) -> Result<Vec<Vec<usize>>> {
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(b, a) in &self.edges {
            indegree[a] += 1;
            next[b].push(a);
        }
        let mut level: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut levels = Vec::new();
        let mut placed = 0;
        while !level.is_empty() {
            placed += level.len();
            let mut following = Vec::new();
            for &i in &level {
                for &a in &next[i] {
                    indegree[a] -= 1;
                    if indegree[a] == 0 {
                        following.push(a);
                    }
                }
            }
            following.sort_unstable();
            levels.push(std::mem::replace(&mut level, following));
        }
        if placed < n {
            return Err(Error::GraphCycle {
                nodes: self.cycle(&indegree, &next),
            });
        }
        Ok(levels)
    }

    /// The labels of one cycle among the nodes Kahn's algorithm could not place.
    fn cycle(&self, indegree: &[usize], next: &[Vec<usize>]) -> Vec<String> {
        let stuck = |i: usize| indegree[i] > 0;
        let Some(start) = (0..self.nodes.len()).find(|&i| stuck(i)) else {
            return Vec::new();
        };
        // Walk forward through stuck nodes until one repeats: that stretch is a cycle.
        let mut path = vec![start];
        let mut seen = vec![usize::MAX; self.nodes.len()];
        seen[start] = 0;
        let mut at = start;
        while let Some(&n) = next[at].iter().find(|&&n| stuck(n)) {
            if seen[n] != usize::MAX {
                let mut cyc: Vec<String> = path[seen[n]..]
                    .iter()
                    .map(|&i| self.nodes[i].label.clone())
                    .collect();
                cyc.push(self.nodes[n].label.clone());
                return cyc;
            }
            seen[n] = path.len();
            path.push(n);
            at = n;
        }
        path.iter().map(|&i| self.nodes[i].label.clone()).collect()
    }

    /// Checks the graph, compiles its kernels, and instantiates it for its device: on
    /// CUDA as a CUDA graph. A dependency cycle is an error naming its nodes, and so are
    /// two nodes that use one buffer, one of them writing, with no dependency ordering
    /// them (unless [`Graph::allow_unordered`] allows it for that buffer).
    pub fn instantiate(self) -> Result<ExecGraph<'a>> {
        let levels = self.levels()?;
        self.check_races(&levels)?;
        for node in &self.nodes {
            if let NodeKind::Launch { program, .. } = &node.kind {
                self.device.backend().prepare(program)?;
            }
        }
        // The backend's capture extension decides; the capability reports the same.
        let native = self.device.backend().has_capture();
        debug_assert_eq!(native, self.device.info().caps.native_graphs);
        // Capture lanes: the capture stream and branch streams for the widest level (at
        // most 8 branches at once).
        let lanes = if native {
            levels.iter().map(Vec::len).max().unwrap_or(1).clamp(1, 8)
        } else {
            0
        };
        let mut exec = ExecGraph {
            order: levels.iter().flatten().copied().collect(),
            levels,
            graph: self,
            native: None,
            lanes,
            dirty: false,
            captures: 0,
        };
        if native {
            exec.recapture()?;
        }
        Ok(exec)
    }
}

impl<T> From<GraphBufferMut<T>> for GraphBuffer<T> {
    fn from(h: GraphBufferMut<T>) -> GraphBuffer<T> {
        GraphBuffer {
            graph: h.graph,
            index: h.index,
            _t: PhantomData,
        }
    }
}
