//! Replaying an instantiated graph ([`ExecGraph`]): node by node, or as the driver's
//! captured graph (CUDA), with scalars and buffers changed between replays.

use super::*;

/// An instantiated graph: replay it with [`ExecGraph::launch`] on any stream of its
/// device, change scalars or buffers between replays without instantiating again.
pub struct ExecGraph<'a> {
    pub(super) graph: Graph<'a>,
    pub(super) levels: Vec<Vec<usize>>,
    pub(super) order: Vec<usize>,
    /// The driver's executable graph (CUDA).
    pub(super) native: Option<Box<dyn GraphExec>>,
    /// Streams a capture uses (the capture stream, then branch streams for a level's
    /// parallel nodes); 0 without driver graphs. They are the backend's private capture
    /// streams, taken for one capture and given back, never a user's stream: another
    /// thread's work on a user stream id must not join the capture.
    pub(super) lanes: usize,
    /// Scalars or buffers changed since the last capture and not patched in place.
    pub(super) dirty: bool,
    /// Captures into a driver graph so far.
    pub(super) captures: u32,
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
        if on.recording() {
            return Err(Error::Graph {
                detail: "an executable graph cannot be replayed into a graph recording \
                         (its replay would run now, not at the recording graph's replays)"
                    .into(),
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

    /// Enqueues every node on `s` in dependency order; on devices whose work completes
    /// before the call returns (`Capabilities::completes_on_enqueue`: the CPU), the nodes
    /// of one level run in parallel.
    fn replay(&self, s: StreamId) -> Result<()> {
        if self.graph.device.info().caps.completes_on_enqueue {
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
    pub(super) fn recapture(&mut self) -> Result<()> {
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
        backend.begin_capture(s)?;
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
        // The handle's registration, and those a recording made for ranges of the same
        // buffer (a writable buffer has no other: its `&mut` borrow excludes them), which
        // keep their offsets into it.
        let old = self.graph.buffers[i].raw;
        let same: Vec<usize> = (0..self.graph.buffers.len())
            .filter(|&j| std::ptr::eq(self.graph.buffers[j].raw, old))
            .collect();
        for &j in &same {
            let b = &mut self.graph.buffers[j];
            b.raw = buffer.raw();
            b.uses = buffer.uses();
            if j == i {
                b.offset = 0;
            }
        }
        // Patch every launch that binds them.
        let uses = |b: &usize| same.contains(b);
        let users: Vec<usize> = (0..self.graph.nodes.len())
            .filter(|&j| match &self.graph.nodes[j].kind {
                NodeKind::Launch { args, .. } => args
                    .iter()
                    .any(|a| matches!(a, NodeArg::Buffer(b) if uses(b))),
                NodeKind::Copy { src, dst, .. } => uses(src) || uses(dst),
                NodeKind::Fill { dst, .. } => uses(dst),
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
