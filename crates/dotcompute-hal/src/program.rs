//! Programs: what a backend compiles and caches, keyed by content.
//!
//! A [`Program`] is a kernel's IR (or a hand-written kernel's signature and source) plus
//! a content key computed once when the program is built: SHA-256 of the IR's canonical
//! form, or of the language, entry and source text. Backends key every cache by that key
//! (plus their specialisation: group size, dynamic shared length, device), never by a
//! name or an address, and never hash per launch.

use crate::device::RawLanguage;
use crate::error::{Error, Result};
use crate::native::NativeFn;
use dotcompute_ir::{BuildError, Features, Kernel};
use std::sync::{Arc, OnceLock};

/// A program's content key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgramKey(pub [u8; 32]);

impl ProgramKey {
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A kernel written by hand for one backend's language, with its reflected interface.
#[derive(Clone, Debug)]
pub struct RawSource {
    pub language: RawLanguage,
    /// The source (WGSL, CUDA C++); for SPIR-V, a one-line summary (the words are in
    /// `spirv`).
    pub text: String,
    /// The module of a SPIR-V kernel, as given.
    pub spirv: Option<Arc<[u32]>>,
    pub entry: String,
    /// The entry point's fixed group size (WGSL); `None` when the launch chooses it (CUDA).
    pub workgroup_size: Option<[u32; 3]>,
    /// `(binding, read_only)` of each buffer parameter, in parameter order.
    pub buffer_bindings: Vec<(u32, bool)>,
    /// Binding of the uniform block holding the scalars (4 bytes each, in order).
    pub uniform_binding: Option<u32>,
    /// Workgroup (shared) memory the source declares, in bytes (WGSL; 0 for CUDA, whose
    /// launches size dynamic shared memory themselves).
    pub workgroup_bytes: u64,
}

/// Where a program's code comes from.
#[derive(Clone, Debug)]
pub enum ProgramSource {
    /// Generated from the IR; `native` is the CPU body `#[kernel]` compiled from the same
    /// Rust text (absent for IR built by hand).
    Ir { native: Option<NativeFn> },
    /// Hand-written for one backend; the program's kernel is only its signature.
    Raw(RawSource),
}

/// A kernel ready for any backend: IR or source, parameter list, and content key.
#[derive(Clone, Debug)]
pub struct Program {
    /// The IR (for raw kernels, a signature with an empty body). Its parameters are the
    /// launch's parameter list on every backend.
    pub kernel: Arc<Kernel>,
    pub key: ProgramKey,
    pub source: ProgramSource,
    /// What the kernel needs of a device beyond the core language, computed once
    /// ([`Features::required_by`]); checked against [`crate::Capabilities::features`]
    /// before a launch. Tensor cores also need groups of whole subgroups.
    pub features: Features,
}

impl Program {
    /// A program generated from `kernel`, keyed by the IR's content hash.
    pub fn from_ir(kernel: Arc<Kernel>, native: Option<NativeFn>) -> Program {
        Program {
            key: ProgramKey(kernel.content_hash()),
            features: Features::required_by(&kernel),
            kernel,
            source: ProgramSource::Ir { native },
        }
    }
    /// A hand-written program; the key covers language, entry, text and SPIR-V words.
    pub fn raw(signature: Arc<Kernel>, source: RawSource) -> Program {
        let words: String = source
            .spirv
            .iter()
            .flat_map(|w| w.iter())
            .map(|w| format!("{w:08x}"))
            .collect();
        let key = content_key(&[source.language.name(), &source.entry, &source.text, &words]);
        Program {
            kernel: signature,
            key,
            source: ProgramSource::Raw(source),
            // A hand-written kernel's needs are the driver's to check.
            features: Features::NONE,
        }
    }
    pub fn name(&self) -> &str {
        &self.kernel.name
    }
    pub fn native(&self) -> Option<NativeFn> {
        match self.source {
            ProgramSource::Ir { native } => native,
            ProgramSource::Raw(_) => None,
        }
    }
    pub fn raw_source(&self) -> Option<&RawSource> {
        match &self.source {
            ProgramSource::Raw(r) => Some(r),
            ProgramSource::Ir { .. } => None,
        }
    }
}

/// SHA-256 of the parts, each length-prefixed so that boundaries cannot shift.
pub fn content_key(parts: &[&str]) -> ProgramKey {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    ProgramKey(h.finalize().into())
}

/// A `#[kernel]` function as handed to devices: its program (IR built and hashed once,
/// lazily) and the native CPU implementation compiled from the same Rust text.
pub struct KernelDef {
    name: &'static str,
    build: fn() -> Result<Kernel, BuildError>,
    native: Option<NativeFn>,
    program: OnceLock<Result<Arc<Program>, BuildError>>,
}

impl KernelDef {
    /// Used by `#[kernel]`; `build` produces the IR, `native` runs it on the CPU.
    pub const fn new(
        name: &'static str,
        build: fn() -> Result<Kernel, BuildError>,
        native: Option<NativeFn>,
    ) -> KernelDef {
        KernelDef {
            name,
            build,
            native,
            program: OnceLock::new(),
        }
    }
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// The kernel's program: IR built, validated and hashed on first use, then cached.
    pub fn program(&self) -> Result<&Arc<Program>> {
        self.program
            .get_or_init(|| {
                (self.build)().map(|k| Arc::new(Program::from_ir(Arc::new(k), self.native)))
            })
            .as_ref()
            .map_err(|e| Error::Build(e.clone()))
    }
    /// The kernel's IR, built and validated on first use.
    pub fn ir(&self) -> Result<&Arc<Kernel>> {
        self.program().map(|p| &p.kernel)
    }
    pub fn native(&self) -> Option<NativeFn> {
        self.native
    }
}

/// The definitions of a generic `#[kernel]`, one per instantiation, keyed by the
/// `TypeId` of a marker type generic over the kernel's parameters. Each is made on first
/// use and kept (leaked) for the process, like the static of a plain kernel; a lookup is
/// a read lock and a scan of the few instantiations a program uses.
pub struct Instances(std::sync::RwLock<Vec<(std::any::TypeId, &'static KernelDef)>>);

impl Instances {
    pub const fn new() -> Instances {
        Instances(std::sync::RwLock::new(Vec::new()))
    }

    /// The definition of instantiation `id`, made by `make` the first time.
    pub fn get(
        &self,
        id: std::any::TypeId,
        make: impl FnOnce() -> KernelDef,
    ) -> &'static KernelDef {
        let find = |list: &[(std::any::TypeId, &'static KernelDef)]| {
            list.iter().find(|(k, _)| *k == id).map(|(_, d)| *d)
        };
        // A poisoned lock only means a panic elsewhere mid-push; the list stays valid.
        if let Some(d) = find(&self.0.read().unwrap_or_else(|e| e.into_inner())) {
            return d;
        }
        let mut list = self.0.write().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = find(&list) {
            return d;
        }
        let def: &'static KernelDef = Box::leak(Box::new(make()));
        list.push((id, def));
        def
    }
}

impl Default for Instances {
    fn default() -> Self {
        Instances::new()
    }
}

/// A generic kernel's instance name, kept for the process (instances are never dropped).
pub fn leak_name(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
}

/// A const generic argument as part of an instance name (an identifier: `-` becomes `m`).
pub fn instance_part(value: impl std::fmt::Display) -> String {
    value.to_string().replace('-', "m")
}

/// A hasher for maps keyed by [`ProgramKey`]s (already uniform SHA-256 bytes) and small
/// tuples around them: the Fx multiply-rotate over 8-byte words, a few nanoseconds per
/// lookup where SipHash took tens. Launch paths look programs up on every launch.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
}

/// A map keyed by program keys (see [`KeyHasher`]).
pub type KeyMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;
