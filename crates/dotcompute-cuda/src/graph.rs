//! CUDA graphs: the facade enqueues a graph's nodes on a stream while it is captured
//! (`cuStreamBeginCapture`, thread-local mode), and the captured graph is instantiated
//! once; later captures with new scalars or buffers update the executable in place
//! (`cuGraphExecUpdate`) instead of instantiating again. Each kernel node captured is
//! noted in launch order (the capture stream's dependency right after the launch), so
//! that new arguments for one launch patch its node in the executable
//! (`cuGraphExecKernelNodeSetParams`) without capturing at all.

use crate::driver::{bind, Check};
use crate::CudaBackend;
use cudarc::driver::sys;
use dotcompute_hal::{Error, GraphExec, Result, StreamId};
use std::any::Any;

/// An instantiated CUDA graph.
pub(crate) struct CudaGraph {
    exec: sys::CUgraphExec,
    /// The graph `exec` was instantiated from, kept for its node handles.
    template: sys::CUgraph,
    /// The template's kernel nodes in launch order (null where one was not known).
    nodes: Vec<sys::CUgraphNode>,
    ctx: std::sync::Arc<crate::driver::Context>,
}

/// Kernel nodes of the captures in progress, by capture id.
#[derive(Default)]
pub(crate) struct CaptureLog(
    std::sync::Mutex<std::collections::HashMap<u64, Vec<sys::CUgraphNode>>>,
);

// SAFETY: node handles are plain driver handles, used only with the context bound.
unsafe impl Send for CaptureLog {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for CaptureLog {}

/// The capture id of a capturing stream, and its one current dependency (the node
/// captured last) when it has exactly one.
fn capture_info(stream: sys::CUstream) -> Option<(u64, Option<sys::CUgraphNode>)> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut count = 0usize;
    // SAFETY: the stream is live; the outputs are ours; the dependency array belongs to
    // the driver and is read at once.
    let r = unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            std::ptr::null_mut(),
            &mut count,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS
        || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
    {
        return None;
    }
    // SAFETY: the driver's array holds `count` nodes.
    let last = (count == 1 && !deps.is_null()).then(|| unsafe { *deps });
    Some((id, last))
}

// SAFETY: a graph executable is a driver handle usable from any thread with the context
// bound; launches of one executable are serialised by the facade (`&mut` replays).
unsafe impl Send for CudaGraph {}
// SAFETY: shared use is sound for the reason above (Send).
unsafe impl Sync for CudaGraph {}

impl GraphExec for CudaGraph {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: destroyed once; the driver keeps it alive until pending launches end.
            let _ = unsafe { sys::cuGraphExecDestroy(self.exec) };
            // SAFETY: destroyed once, after its executable.
            let _ = unsafe { sys::cuGraphDestroy(self.template) };
        }
    }
}

/// An executable graph of another backend: the facade refuses another device's graphs
/// (`Error::ForeignObject`) before they reach a backend.
fn not_ours() -> Error {
    Error::internal(
        "cuda",
        "an executable graph of another backend reached this device",
    )
}

impl CudaBackend {
    /// Notes the kernel node a launch just added to the capture on `stream` (its only
    /// dependency now); a null node where that is not one node.
    pub(crate) fn log_captured_node(&self, stream: sys::CUstream) {
        if let Some((id, last)) = capture_info(stream) {
            crate::lock(&self.capture_log.0)
                .entry(id)
                .or_default()
                .push(last.unwrap_or(std::ptr::null_mut()));
        }
    }

    /// Patches launch number `launch` (in capture order) of `graph` with `request`'s
    /// arguments: `Ok(false)` where that cannot be done.
    pub(crate) fn update_graph_launch_on(
        &self,
        graph: &dyn GraphExec,
        launch: usize,
        request: &dotcompute_hal::LaunchRequest<'_, crate::memory::CudaBuffer>,
    ) -> Result<bool> {
        let graph = graph
            .as_any()
            .downcast_ref::<CudaGraph>()
            .ok_or_else(not_ours)?;
        match graph.nodes.get(launch) {
            Some(&node) if !node.is_null() => self.patch_graph_launch(graph.exec, node, request),
            _ => Ok(false),
        }
    }

    pub(crate) fn begin_capture_on(&self, s: StreamId) -> Result<()> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        self.ctx.capture_gate.enter();
        // Thread-local mode: only this thread's unsafe calls (synchronisations) are
        // refused during the capture; other threads keep working.
        // SAFETY: the stream is live and not capturing (the facade captures one graph at
        // a time per stream).
        unsafe {
            sys::cuStreamBeginCapture_v2(
                stream,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .during("cuStreamBeginCapture")
        .inspect_err(|_| self.ctx.capture_gate.leave())?;
        Ok(())
    }

    pub(crate) fn end_capture_on(
        &self,
        s: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>> {
        // The capture is counted out however this returns (a count left behind would
        // hold every gated call back for good).
        struct CountedOut<'a>(&'a crate::driver::CaptureGate);
        impl Drop for CountedOut<'_> {
            fn drop(&mut self) {
                self.0.leave();
            }
        }
        let counted = CountedOut(&self.ctx.capture_gate);
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        // The kernel nodes this capture's launches noted.
        let nodes = capture_info(stream)
            .and_then(|(id, _)| crate::lock(&self.capture_log.0).remove(&id))
            .unwrap_or_default();
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: the stream was capturing (begin_capture_on); the graph handle is ours.
        let ended = unsafe { sys::cuStreamEndCapture(stream, &mut graph) };
        drop(counted);
        ended.during("cuStreamEndCapture")?;
        struct Owned(sys::CUgraph);
        impl Drop for Owned {
            fn drop(&mut self) {
                if !self.0.is_null() {
                    // SAFETY: destroyed once; executables made from it are independent.
                    let _ = unsafe { sys::cuGraphDestroy(self.0) };
                }
            }
        }
        let mut graph = Owned(graph);
        if let Some(exec) = update {
            let exec = exec
                .as_any()
                .downcast_ref::<CudaGraph>()
                .ok_or_else(not_ours)?;
            // SAFETY: both handles are live; on failure the executable is unchanged.
            let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let r = unsafe { sys::cuGraphExecUpdate_v2(exec.exec, graph.0, &mut info) };
            if r == sys::CUresult::CUDA_SUCCESS {
                return Ok(None);
            }
            tracing::debug!("cuGraphExecUpdate refused ({r:?}); instantiating anew");
        }
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: the graph is complete; flags 0.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph.0, 0) }
            .during("cuGraphInstantiate")?;
        // The template stays with its executable: its nodes name the launches to patch.
        let template = std::mem::replace(&mut graph.0, std::ptr::null_mut());
        Ok(Some(Box::new(CudaGraph {
            exec,
            template,
            nodes,
            ctx: self.ctx.clone(),
        })))
    }

    pub(crate) fn launch_graph_on(&self, s: StreamId, graph: &dyn GraphExec) -> Result<()> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let graph = graph
            .as_any()
            .downcast_ref::<CudaGraph>()
            .ok_or_else(not_ours)?;
        self.timed(s, stream, "graph", || {
            // SAFETY: both handles are live.
            unsafe { sys::cuGraphLaunch(graph.exec, stream) }.during("cuGraphLaunch")
        })
    }
}
