//! The one error type shared by every layer (re-exported as `dotcompute::Error`).

use dotcompute_ir::BuildError;
use thiserror::Error;

/// Everything that can go wrong in dotcompute. Each variant names what it is about (the
/// kernel, the argument, the sizes) so the message alone tells the user what to fix.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum Error {
    #[error("backend `{backend}` is not available: {reason}")]
    BackendUnavailable { backend: String, reason: String },

    /// The device hit a fault it cannot continue from (on CUDA: a sticky error such as an
    /// illegal address; on wgpu: the device-lost callback, or work that outlasted
    /// `DOTCOMPUTE_WGPU_TIMEOUT_S`). Every later call on it returns this error at once.
    /// Both NVIDIA drivers refuse the device for the rest of the process: a new process
    /// uses it again (`docs/reliability.md`).
    #[error("device {device} is lost: {reason}; its buffers, streams and handles are unusable, and a new process can use the device again")]
    DeviceLost { device: String, reason: String },

    #[error("unknown backend `{0}`: expected one of cpu, cuda, wgpu, metal")]
    UnknownBackend(String),

    #[error("out of memory on {device}: {requested} bytes requested ({detail})")]
    OutOfMemory {
        device: String,
        requested: u64,
        detail: String,
    },

    #[error("kernel `{kernel}`: empty launch ({detail}); launch at least one thread")]
    EmptyLaunch { kernel: String, detail: String },

    #[error("kernel `{kernel}`: grid too large: {detail}")]
    GridTooLarge { kernel: String, detail: String },

    #[error("kernel `{kernel}`: invalid group size: {detail}")]
    InvalidGroupSize { kernel: String, detail: String },

    #[error("kernel `{kernel}`: {requested} bytes of shared memory per group requested, the device allows {limit}")]
    SharedMemoryTooLarge {
        kernel: String,
        requested: u64,
        limit: u64,
    },

    #[error("kernel `{kernel}`: {detail}")]
    DynamicShared { kernel: String, detail: String },

    #[error("kernel `{kernel}` takes {expected} argument(s), {found} given")]
    ArgumentCount {
        kernel: String,
        expected: usize,
        found: usize,
    },

    #[error("kernel `{kernel}`, argument `{arg}`: expected {expected}, found {found}")]
    ArgumentType {
        kernel: String,
        arg: String,
        expected: String,
        found: String,
    },

    #[error("kernel `{kernel}`, argument `{arg}`: the buffer is empty; kernels cannot bind zero-length buffers")]
    EmptyBuffer { kernel: String, arg: String },

    #[error("kernel `{kernel}`, argument `{arg}`: the buffer belongs to device {buffer_device}, the launch is on device {device}")]
    WrongDevice {
        kernel: String,
        arg: String,
        buffer_device: String,
        device: String,
    },

    #[error("kernel `{kernel}`: out-of-bounds access to `{arg}`[{index}] (length {len}); the launch's results are incomplete")]
    OutOfBounds {
        kernel: String,
        arg: String,
        index: u64,
        len: u64,
    },

    #[error("kernel `{kernel}`: barrier divergence in group {group:?}: {detail}")]
    BarrierDivergence {
        kernel: String,
        group: [u32; 3],
        detail: String,
    },

    #[error(transparent)]
    Build(#[from] BuildError),

    #[error("kernel `{kernel}` failed to compile for {backend}:\n{log}")]
    Compile {
        kernel: String,
        backend: String,
        /// The compiler's message, quoting the generated source around the problem.
        log: String,
    },

    #[error("kernel `{kernel}` panicked: {message}")]
    KernelPanicked { kernel: String, message: String },

    #[error("{op}: {detail}")]
    Range { op: &'static str, detail: String },

    #[error("{backend} backend: {message}")]
    Backend { backend: String, message: String },

    /// A driver call failed; `code` is the driver's own result code (a `CUresult` on
    /// CUDA), `name` its symbolic name, so callers can match on it.
    #[error("{backend} backend: {operation}: {name} ({detail})")]
    Driver {
        backend: String,
        operation: String,
        code: i64,
        name: String,
        detail: String,
    },

    /// An object of one device (a buffer, an event, a stream, an executable graph) used
    /// with another device.
    #[error("{op}: {what} belongs to device {owner}, not to device {device}")]
    ForeignObject {
        op: &'static str,
        what: String,
        owner: String,
        device: String,
    },

    /// A graph whose dependencies form a cycle; `nodes` names the nodes on it, in order.
    #[error("the graph has a dependency cycle: {}", nodes.join(" -> "))]
    GraphCycle { nodes: Vec<String> },

    /// An error of a graph's node (or of a batch of its nodes, submitted together) while
    /// the graph was captured or replayed: the graph, the nodes, and the error itself.
    #[error("graph {graph}, node {nodes}: {source}")]
    InGraph {
        graph: u64,
        nodes: String,
        source: Box<Error>,
    },

    /// A graph built or used wrongly (a node or buffer handle of another graph, say).
    #[error("graph: {detail}")]
    Graph { detail: String },

    /// A setting (a `DOTCOMPUTE_*` environment variable) has a value dotcompute does not
    /// accept; nothing was opened or changed.
    #[error("{variable}={value:?} is not a valid setting: expected {expected}")]
    Config {
        variable: &'static str,
        value: String,
        expected: &'static str,
    },

    /// A kernel ran past the launch time limit and was stopped (on the CPU, at a loop
    /// back-edge: cooperative cancellation). Its outputs are partial; the device stays
    /// usable.
    #[error("kernel `{kernel}` ran longer than the launch limit of {seconds} s ({variable} sets it) and was stopped; its outputs are partial, and the device remains usable")]
    LaunchTimedOut {
        kernel: String,
        seconds: f64,
        variable: &'static str,
    },

    /// A limited resource of a device is used up (streams, say).
    #[error("{resource}: {detail}")]
    Exhausted {
        resource: &'static str,
        detail: String,
    },

    /// An operation this device cannot do (for example an f16 matrix product without a
    /// vendor library).
    #[error("{op} is not supported here: {detail}")]
    Unsupported { op: &'static str, detail: String },

    /// A size beyond a limit of the device or of dotcompute: `what` names what was
    /// measured and its unit, `limit` the most allowed, `found` what was asked for.
    /// Nothing was launched or changed.
    #[error("{what}: {found} is beyond the limit of {limit}")]
    TooLarge {
        what: String,
        limit: u64,
        found: u64,
    },

    /// An invariant of dotcompute itself was broken: a bug in dotcompute, not in the
    /// caller's code or the input. `place` names the component.
    #[error("internal error in {place}: {detail} (a bug in dotcompute; please report it with this message)")]
    Internal { place: String, detail: String },
}

impl Error {
    /// [`Error::Internal`] in `place`.
    pub fn internal(place: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Internal {
            place: place.into(),
            detail: detail.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether a device is lost to this process, and why: set once (the first reason wins),
/// then every call that checks it is [`Error::DeviceLost`]. Shared by the backends that
/// learn of the loss asynchronously or at a wait (wgpu's callback and bounded waits,
/// Metal's failed command buffers).
#[derive(Debug, Default)]
pub struct LostFlag(std::sync::OnceLock<String>);

impl LostFlag {
    /// Marks the device lost for `reason`, unless it already was (then the first reason
    /// stays).
    pub fn mark(&self, reason: String) {
        let _ = self.0.set(reason);
    }

    /// `Error::DeviceLost` naming `device` once the device is lost.
    pub fn check(&self, device: impl FnOnce() -> String) -> Result<()> {
        match self.0.get() {
            Some(reason) => Err(Error::DeviceLost {
                device: device(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}
