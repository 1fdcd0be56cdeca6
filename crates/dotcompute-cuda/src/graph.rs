//! CUDA graphs: the facade enqueues a graph's nodes on a stream while it is captured
//! (`cuStreamBeginCapture`, thread-local mode), and the captured graph is instantiated
//! once; later captures with new scalars or buffers update the executable in place
//! (`cuGraphExecUpdate`) instead of instantiating again.

use crate::driver::{bind, Check};
use crate::CudaBackend;
use cudarc::driver::sys;
use dotcompute_hal::{Error, GraphExec, Result, StreamId};
use std::any::Any;

/// An instantiated CUDA graph.
pub(crate) struct CudaGraph {
    exec: sys::CUgraphExec,
    ctx: std::sync::Arc<crate::driver::Context>,
}

// SAFETY: a graph executable is a driver handle usable from any thread with the context
// bound; launches of one executable are serialised by the facade (`&mut` replays).
unsafe impl Send for CudaGraph {}
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
        }
    }
}

fn not_ours() -> Error {
    Error::Backend {
        backend: "cuda".into(),
        message: "an executable graph of another backend was passed to a CUDA device".into(),
    }
}

impl CudaBackend {
    pub(crate) fn begin_capture_on(&self, s: StreamId) -> Result<bool> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
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
        .during("cuStreamBeginCapture")?;
        Ok(true)
    }

    pub(crate) fn end_capture_on(
        &self,
        s: StreamId,
        update: Option<&dyn GraphExec>,
    ) -> Result<Option<Box<dyn GraphExec>>> {
        bind(&self.ctx)?;
        let stream = self.stream(s)?;
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: the stream was capturing (begin_capture_on); the graph handle is ours.
        unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.during("cuStreamEndCapture")?;
        struct Owned(sys::CUgraph);
        impl Drop for Owned {
            fn drop(&mut self) {
                // SAFETY: destroyed once; executables made from it are independent.
                let _ = unsafe { sys::cuGraphDestroy(self.0) };
            }
        }
        let graph = Owned(graph);
        if let Some(exec) = update {
            let exec = exec
                .as_any()
                .downcast_ref::<CudaGraph>()
                .ok_or_else(not_ours)?;
            // SAFETY: both handles are live; on failure the executable is unchanged.
            let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
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
        Ok(Some(Box::new(CudaGraph {
            exec,
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
