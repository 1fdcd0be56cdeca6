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
}

impl<'a> Graph<'a> {
    pub fn new(device: &Device) -> Graph<'a> {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            buffers: Vec::new(),
            nodes: Vec::new(),
            edges: Vec::new(),
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
        // For each buffer, its users in node order.
        let mut users: Vec<Vec<(usize, bool)>> = vec![Vec::new(); self.buffers.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for (b, writes) in node.accesses() {
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
            if self.buffers[b].unordered {
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
        let native = self.device.info().caps.native_graphs;
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

/// An instantiated graph: replay it with [`ExecGraph::launch`] on any stream of its
/// device, change scalars or buffers between replays without instantiating again.
pub struct ExecGraph<'a> {
    graph: Graph<'a>,
    levels: Vec<Vec<usize>>,
    order: Vec<usize>,
    /// The driver's executable graph (CUDA).
    native: Option<Box<dyn GraphExec>>,
    /// Streams a capture uses (the capture stream, then branch streams for a level's
    /// parallel nodes); 0 without driver graphs. They are the backend's private capture
    /// streams, taken for one capture and given back, never a user's stream: another
    /// thread's work on a user stream id must not join the capture.
    lanes: usize,
    /// Scalars or buffers changed since the last capture and not patched in place.
    dirty: bool,
    /// Captures into a driver graph so far.
    captures: u32,
}

impl std::fmt::Debug for ExecGraph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ExecGraph of {} nodes in {} levels on {}{}",
            self.graph.nodes.len(),
            self.levels.len(),
            self.graph.device.label(),
            if self.native.is_some() {
                " (driver graph)"
            } else {
                ""
            }
        )
    }
}

impl<'a> ExecGraph<'a> {
    pub fn device(&self) -> &Device {
        &self.graph.device
    }
    /// Nodes per dependency level: independent nodes share a level.
    pub fn levels(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.len()).collect()
    }
    /// Whether replays run as one driver graph (CUDA).
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }
    /// How many times the nodes were captured into a driver graph (0 without one). New
    /// scalars and buffers patch the captured launches in place where the driver allows
    /// (CUDA), so they do not add captures.
    pub fn captures(&self) -> u32 {
        self.captures
    }

    /// Gives the driver graph's captured launch of node `i` its current arguments, or
    /// marks the graph for capture before the next replay where that cannot be done.
    fn patch_or_recapture(&mut self, i: usize) {
        if self.dirty {
            return;
        }
        let Some(native) = self.native.as_deref() else {
            return;
        };
        // Captures enqueue the launches level by level, in each level's order.
        let launch = self
            .order
            .iter()
            .filter(|&&j| matches!(self.graph.nodes[j].kind, NodeKind::Launch { .. }))
            .position(|&j| j == i);
        let patched = match (launch, self.launch_request(i)) {
            // SAFETY: the request binds registered ranges (whole buffers, or views checked
            // when made; borrowed by the graph)
            // with arguments checked when the node was added; every replay orders the
            // graph's buffers against other streams first.
            (Some(k), Some(request)) => unsafe {
                self.graph
                    .device
                    .backend()
                    .update_graph_launch(native, k, &request)
            },
            _ => Ok(false),
        };
        self.dirty = !matches!(patched, Ok(true));
    }

    /// Replays the graph on `on` (the device itself, or one of its streams): its nodes
    /// run after the work already enqueued there, in dependency order.
    pub fn launch(&mut self, on: &impl AsStream) -> Result<()> {
        let device = on.device();
        if !device.same(&self.graph.device) {
            return Err(Error::ForeignObject {
                op: "ExecGraph::launch",
                what: "the executable graph".into(),
                owner: device.labels_against(&self.graph.device).1,
                device: device.labels_against(&self.graph.device).0,
            });
        }
        let s = on.stream_id();
        if self.native.is_some() && self.dirty {
            self.recapture()?;
        }
        // Order the graph's buffers on `s` after other streams' uses, as a launch would.
        for b in &self.graph.buffers {
            device.before_use(b.uses, s, b.writable)?;
        }
        match &self.native {
            // One driver call for every node: the driver does not say which.
            Some(exec) => device
                .backend()
                .launch_graph(s, &**exec)
                .map_err(|e| self.in_nodes(&self.order, e)),
            None => self.replay(s),
        }
    }

    /// Enqueues every node on `s` in dependency order; on backends whose work completes
    /// before it returns (the CPU), the nodes of one level run in parallel.
    fn replay(&self, s: StreamId) -> Result<()> {
        if self.graph.device.backend_kind() == dotcompute_hal::BackendKind::Cpu {
            for level in &self.levels {
                if level.len() == 1 {
                    self.enqueue(level[0], s)?;
                } else {
                    use rayon::prelude::*;
                    level.par_iter().try_for_each(|&i| self.enqueue(i, s))?;
                }
            }
            return Ok(());
        }
        // Consecutive launches go to the backend as one batch (one submission on wgpu);
        // a copy or a fill ends the batch.
        let (mut batch, mut nodes) = (Vec::new(), Vec::new());
        for &i in &self.order {
            match self.launch_request(i) {
                Some(r) => {
                    batch.push(r);
                    nodes.push(i);
                }
                None => {
                    self.flush(s, &mut batch, &mut nodes)?;
                    self.enqueue(i, s)?;
                }
            }
        }
        self.flush(s, &mut batch, &mut nodes)
    }

    /// `e` as an error of nodes `nodes` of this graph (an `Error::InGraph` is kept).
    fn in_nodes(&self, nodes: &[usize], e: Error) -> Error {
        if matches!(e, Error::InGraph { .. }) {
            return e;
        }
        Error::InGraph {
            graph: self.graph.id,
            nodes: nodes
                .iter()
                .map(|&i| self.graph.nodes[i].label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            source: Box::new(e),
        }
    }

    fn flush(
        &self,
        s: StreamId,
        batch: &mut Vec<LaunchRequest<'_, RawBuffer>>,
        nodes: &mut Vec<usize>,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // SAFETY: each request is a node's, bound by bind_node (registered ranges,
        // arguments checked when the node was added, no buffer both written and bound
        // twice); the graph's buffers are borrowed for its life and ordered on `s` by
        // ExecGraph::launch.
        let r = unsafe { self.graph.device.backend().launch_batch(s, batch) };
        batch.clear();
        let r = r.map_err(|e| self.in_nodes(nodes, e));
        nodes.clear();
        r
    }

    /// The launch request of node `i`, if it is a launch.
    fn launch_request(&self, i: usize) -> Option<LaunchRequest<'_, RawBuffer>> {
        match &self.graph.nodes[i].kind {
            NodeKind::Launch {
                program,
                geometry,
                args,
            } => Some(self.bind_node(program, *geometry, args)),
            NodeKind::Copy { .. } | NodeKind::Fill { .. } => None,
        }
    }

    /// A launch node's request, its buffer handles bound to the registered buffers.
    fn bind_node<'s>(
        &'s self,
        program: &'s Program,
        geometry: ResolvedLaunch,
        args: &[NodeArg],
    ) -> LaunchRequest<'s, RawBuffer> {
        let buffers = &self.graph.buffers;
        let bound = args
            .iter()
            .zip(&program.kernel.params)
            .map(|(a, p)| match *a {
                NodeArg::Buffer(b) => BoundArg::Buffer {
                    buffer: buffers[b].raw,
                    offset: buffers[b].offset,
                    len: buffers[b].len,
                    elem: buffers[b].elem,
                    writable: buffers[b].writable && writes(p),
                },
                NodeArg::Scalar(l) => BoundArg::Scalar(l),
            })
            .collect();
        LaunchRequest {
            program,
            geometry,
            args: bound,
        }
    }

    /// Enqueues node `i` on `s` (no cross-stream ordering: the caller did it).
    fn enqueue(&self, i: usize, s: StreamId) -> Result<()> {
        let backend = self.graph.device.backend();
        let buffers = &self.graph.buffers;
        // SAFETY (each arm): the node's buffers are registered ranges (whole buffers, or
        // views checked when made), which the
        // graph borrows for its life (`&mut` for written ones); a launch's arguments were
        // checked when the node was added (kinds, element types, access, no buffer both
        // written and bound twice), a copy joins two different buffers of one length;
        // the caller ordered the graph's buffers on `s` against other streams.
        let r = match &self.graph.nodes[i].kind {
            NodeKind::Launch {
                program,
                geometry,
                args,
            } => {
                // SAFETY: as said above for every node.
                unsafe { backend.launch(s, &self.bind_node(program, *geometry, args)) }
            }
            NodeKind::Copy { src, dst, bytes } => {
                let (src, dst) = (&buffers[*src], &buffers[*dst]);
                // SAFETY: as said above for every node.
                unsafe { backend.copy(s, src.raw, src.offset, dst.raw, dst.offset, *bytes) }
            }
            NodeKind::Fill { dst, pattern } => {
                let b = &buffers[*dst];
                // SAFETY: as said above for every node.
                unsafe { backend.fill(s, b.raw, b.offset, b.len * b.elem.size_bytes(), pattern) }
            }
        };
        r.map_err(|e| self.in_nodes(&[i], e))
    }

    /// Captures the nodes into the driver's graph: a new executable the first time, an
    /// in-place update afterwards where the driver allows it.
    fn recapture(&mut self) -> Result<()> {
        if self.lanes == 0 {
            return Ok(());
        }
        let device = self.graph.device.clone();
        let lanes = device.backend().open_capture_streams(self.lanes)?;
        let captured = self.capture_on(&lanes);
        device.backend().close_capture_streams(&lanes);
        captured
    }

    /// Captures the nodes on `lanes` (private capture streams; the first is the capture
    /// stream).
    fn capture_on(&mut self, lanes: &[StreamId]) -> Result<()> {
        let s = lanes[0];
        let backend = self.graph.device.backend();
        if !backend.begin_capture(s)? {
            return Ok(());
        }
        // The fork and join events stay alive until the capture has ended.
        let mut events = Vec::new();
        let enqueued = self.enqueue_forked(lanes, &mut events);
        // The capture is ended even when a node failed, so the stream is usable again.
        let ended = backend.end_capture(s, self.native.as_deref());
        drop(events);
        enqueued?;
        if let Some(new) = ended? {
            self.native = Some(new);
        }
        self.dirty = false;
        self.captures += 1;
        Ok(())
    }

    /// Enqueues every node on the capturing stream `lanes[0]`, level by level. The nodes
    /// of a level with several run on the branch streams `lanes[1..]`: each branch waits
    /// for an event recorded on the capture stream (the fork) and the capture stream
    /// waits for an event of each branch (the join), which the driver's capture turns
    /// into a graph whose independent nodes are parallel branches.
    fn enqueue_forked(
        &self,
        lanes: &[StreamId],
        events: &mut Vec<Box<dyn dotcompute_hal::Fence>>,
    ) -> Result<()> {
        let backend = self.graph.device.backend();
        let s = lanes[0];
        for level in &self.levels {
            if level.len() == 1 || lanes.len() == 1 {
                for &i in level {
                    self.enqueue(i, s)?;
                }
                continue;
            }
            let fork = backend.record(s)?;
            let used = level.len().min(lanes.len());
            for &lane in &lanes[1..used] {
                backend.wait_fence(lane, &*fork)?;
            }
            for (k, &i) in level.iter().enumerate() {
                self.enqueue(i, lanes[k % used])?;
            }
            for &lane in &lanes[1..used] {
                let join = backend.record(lane)?;
                backend.wait_fence(s, &*join)?;
                events.push(join);
            }
            events.push(fork);
        }
        Ok(())
    }

    /// Sets scalar argument `arg` (its position in the kernel's parameter list) of launch
    /// node `node` for later replays.
    pub fn set_scalar<T: ScalarArg>(&mut self, node: NodeId, arg: usize, value: T) -> Result<()> {
        let i = self.graph.node_index(node)?;
        let label = self.graph.nodes[i].label.clone();
        let NodeKind::Launch { program, args, .. } = &mut self.graph.nodes[i].kind else {
            return Err(Error::Graph {
                detail: format!("node {label} is not a launch; it has no scalars"),
            });
        };
        let value = value.literal();
        match (args.get_mut(arg), program.kernel.params.get(arg)) {
            (Some(NodeArg::Scalar(slot)), Some(Param::Scalar { ty, name })) => {
                if value.ty() != *ty {
                    return Err(Error::ArgumentType {
                        kernel: program.kernel.name.clone(),
                        arg: name.clone(),
                        expected: ty.name().into(),
                        found: format!("a {} scalar", value.ty()),
                    });
                }
                *slot = value;
                self.patch_or_recapture(i);
                Ok(())
            }
            _ => Err(Error::Graph {
                detail: format!("argument {arg} of node {label} is not a scalar"),
            }),
        }
    }

    /// Sets the scalar parameter called `name` of launch node `node` for later replays.
    /// A name the kernel's scalars do not have, or a value of another type than the
    /// parameter's, is an `Err` naming both (nothing changes).
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::{Graph, GraphArg};
    ///
    /// #[kernel]
    /// fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    ///     let i = global_id().x;
    ///     if i < y.len() {
    ///         y[i] = a * x[i] + y[i];
    ///     }
    /// }
    ///
    /// let device = Device::cpu();
    /// let x = device.upload(&[1.0f32, 2.0])?;
    /// let mut y = device.alloc_filled(2, 0.0f32)?;
    /// let mut graph = Graph::new(&device);
    /// let (hx, hy) = (graph.buffer(&x)?, graph.buffer_mut(&mut y)?);
    /// let node = graph.launch(
    ///     axpy::kernel(),
    ///     Launch::threads(2),
    ///     &[GraphArg::scalar(1.0f32), hx.arg(), hy.arg()],
    ///     &[],
    /// )?;
    /// let mut exec = graph.instantiate()?;
    /// exec.set(node, "a", 3.0f32)?;
    /// assert!(exec.set(node, "a", 3u32).is_err()); // `a` is an f32
    /// exec.launch(&device)?;
    /// assert_eq!(exec.read(hy)?, [3.0, 6.0]);
    /// exec.fill(hy, 1.0)?; // between replays, ordered with them
    /// exec.launch(&device)?;
    /// assert_eq!(exec.read(hy)?, [4.0, 7.0]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn set<T: ScalarArg>(&mut self, node: NodeId, name: &str, value: T) -> Result<()> {
        let i = self.graph.node_index(node)?;
        let label = &self.graph.nodes[i].label;
        let NodeKind::Launch { program, .. } = &self.graph.nodes[i].kind else {
            return Err(Error::Graph {
                detail: format!("node {label} is not a launch; it has no scalars"),
            });
        };
        let params = &program.kernel.params;
        let position = params
            .iter()
            .position(|p| matches!(p, Param::Scalar { name: n, .. } if n == name));
        match position {
            Some(arg) => self.set_scalar(node, arg, value),
            None => {
                let scalars: Vec<&str> = params
                    .iter()
                    .filter_map(|p| match p {
                        Param::Scalar { name, .. } => Some(name.as_str()),
                        _ => None,
                    })
                    .collect();
                Err(Error::Graph {
                    detail: format!(
                        "node {label} (kernel `{}`) has no scalar parameter `{name}`; its \
                         scalars are: {}",
                        program.kernel.name,
                        if scalars.is_empty() {
                            "none".to_string()
                        } else {
                            scalars.join(", ")
                        }
                    ),
                })
            }
        }
    }

    /// Writes `data` (the buffer's length) into the graph buffer `handle` between replays:
    /// after the replays already enqueued that use it, before later ones (on the default
    /// stream, ordered against every stream as a buffer write is). The graph keeps the
    /// buffer borrowed, so this is the way to reset an accumulator without building the
    /// graph again.
    pub fn write<T: Element>(&mut self, handle: GraphBufferMut<T>, data: &[T]) -> Result<()> {
        let i = self.graph.buffer_index(handle.graph, handle.index)?;
        crate::buffer::same_len("ExecGraph::write", self.graph.buffers[i].len, data.len())?;
        let Some(b) = self.ordered_for_write(i)? else {
            return Ok(());
        };
        // SAFETY: the registered range (a whole buffer, or a view checked when made) from
        // data of its length (same_len), ordered after every stream's uses; the graph
        // holds the buffer's `&mut` borrow (a GraphBufferMut comes only from
        // buffer_mut / view_mut), so nothing else uses it.
        unsafe {
            self.graph.device.backend().write(
                StreamId::DEFAULT,
                b.raw,
                b.offset,
                bytemuck::cast_slice(data),
            )
        }
    }

    /// Sets every element of the graph buffer `handle` to `value` between replays (see
    /// [`ExecGraph::write`]).
    pub fn fill<T: Element>(&mut self, handle: GraphBufferMut<T>, value: T) -> Result<()> {
        let i = self.graph.buffer_index(handle.graph, handle.index)?;
        let Some(b) = self.ordered_for_write(i)? else {
            return Ok(());
        };
        // SAFETY: as for write: the registered range, ordered, borrowed `&mut` by the graph.
        unsafe {
            self.graph.device.backend().fill(
                StreamId::DEFAULT,
                b.raw,
                b.offset,
                b.len * std::mem::size_of::<T>(),
                bytemuck::bytes_of(&value),
            )
        }
    }

    /// Copies graph buffer `src` into graph buffer `dst` (same length, not the same
    /// buffer) between replays, ordered like [`ExecGraph::write`].
    pub fn copy<T: Element>(
        &mut self,
        src: impl Into<GraphBuffer<T>>,
        dst: GraphBufferMut<T>,
    ) -> Result<()> {
        let src = src.into();
        let s = self.graph.buffer_index(src.graph, src.index)?;
        let d = self.graph.buffer_index(dst.graph, dst.index)?;
        if s == d {
            return Err(Error::Graph {
                detail: format!(
                    "ExecGraph::copy: the source and the destination are both {}",
                    self.graph.buffers[d].describe(d)
                ),
            });
        }
        let (src_b, dst_len) = (&self.graph.buffers[s], self.graph.buffers[d].len);
        crate::buffer::same_len("ExecGraph::copy", dst_len, src_b.len)?;
        self.graph
            .device
            .before_use(src_b.uses, StreamId::DEFAULT, false)?;
        let Some(dst_b) = self.ordered_for_write(d)? else {
            return Ok(());
        };
        let src_b = &self.graph.buffers[s];
        // SAFETY: two registered ranges of one length, of different buffers (a writable
        // graph buffer is registered from a `&mut` borrow, so no other registration
        // shares its buffer), both ordered after other streams' uses.
        unsafe {
            self.graph.device.backend().copy(
                StreamId::DEFAULT,
                src_b.raw,
                src_b.offset,
                dst_b.raw,
                dst_b.offset,
                dst_b.len * std::mem::size_of::<T>(),
            )
        }
    }

    /// Graph buffer `i`, with a write on the default stream ordered after every stream's
    /// uses of it; `None` when it is empty (nothing to write).
    fn ordered_for_write(&self, i: usize) -> Result<Option<&Registered<'a>>> {
        let b = &self.graph.buffers[i];
        if b.len == 0 {
            return Ok(None);
        }
        self.graph
            .device
            .before_use(b.uses, StreamId::DEFAULT, true)?;
        Ok(Some(b))
    }

    /// Replaces the buffer behind `handle` (same element type and length) for later
    /// replays.
    pub fn set_buffer<T: Element>(
        &mut self,
        handle: GraphBufferMut<T>,
        buffer: &'a mut Buffer<T>,
    ) -> Result<()> {
        let i = self.graph.buffer_index(handle.graph, handle.index)?;
        if !buffer.device().same(&self.graph.device) {
            return Err(Error::ForeignObject {
                op: "ExecGraph::set_buffer",
                what: "the buffer".into(),
                owner: self.graph.device.labels_against(buffer.device()).1,
                device: self.graph.device.labels_against(buffer.device()).0,
            });
        }
        crate::buffer::same_len(
            "ExecGraph::set_buffer",
            self.graph.buffers[i].len,
            buffer.len(),
        )?;
        let b = &mut self.graph.buffers[i];
        b.raw = buffer.raw();
        b.uses = buffer.uses();
        b.offset = 0;
        // Patch every launch that binds it.
        let users: Vec<usize> = (0..self.graph.nodes.len())
            .filter(|&j| match &self.graph.nodes[j].kind {
                NodeKind::Launch { args, .. } => args
                    .iter()
                    .any(|a| matches!(a, NodeArg::Buffer(b) if *b == i)),
                NodeKind::Copy { src, dst, .. } => *src == i || *dst == i,
                NodeKind::Fill { dst, .. } => *dst == i,
            })
            .collect();
        for j in users {
            match self.graph.nodes[j].kind {
                NodeKind::Launch { .. } => self.patch_or_recapture(j),
                // Copies and fills are captured again.
                _ => self.dirty = true,
            }
        }
        Ok(())
    }

    /// Copies a graph buffer to the host (on the default stream, after the graph's
    /// replays that wrote it).
    pub fn read<T: Element>(&self, handle: impl Into<GraphBuffer<T>>) -> Result<Vec<T>> {
        let h = handle.into();
        let i = self.graph.buffer_index(h.graph, h.index)?;
        let b = &self.graph.buffers[i];
        let device = &self.graph.device;
        let mut out = vec![T::zeroed(); b.len];
        if b.len == 0 {
            return Ok(out);
        }
        device.before_use(b.uses, StreamId::DEFAULT, false)?;
        // SAFETY: a registered range (a whole buffer or a view checked when made) into an
        // output of its length, after before_use; the graph holds the buffer's borrow, so
        // nothing writes it meanwhile.
        unsafe {
            device.backend().read(
                StreamId::DEFAULT,
                b.raw,
                b.offset,
                bytemuck::cast_slice_mut(&mut out),
            )
        }?;
        Ok(out)
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
