//! NVRTC compilation and the persistent compile cache.
//!
//! ## What is cached, and why CUBIN
//!
//! NVRTC compiles for the device's own architecture (`--gpu-architecture=sm_XY`), which
//! yields a CUBIN: machine code the driver loads without a JIT step. PTX would need the
//! driver's JIT in every new process (milliseconds per kernel), which is most of what a
//! cache is meant to save; CUBIN is tied to one architecture, but so is the cache key.
//!
//! ## Key
//!
//! SHA-256 of: a format tag, [`CODEGEN_VERSION`](dotcompute_codegen::CODEGEN_VERSION),
//! the NVRTC options (which name the architecture), the compute capability, the driver
//! version, the NVRTC version and the complete source text. Generated source is a pure
//! function of the IR and the code generator, so the source stands for the IR hash too.
//!
//! ## Disk format and failure handling
//!
//! `<dir>/<key hex>.cubin` = magic `DCCUBIN1`, payload length (u64 LE), SHA-256 of the
//! payload, payload. Entries are written to a unique temporary file and renamed into place,
//! so a reader sees a whole entry or none. An entry with a wrong magic, length or checksum
//! (truncated, corrupted, or from another format) is reported through `tracing`, ignored,
//! recompiled and overwritten; so is one the driver refuses to load. A cache directory that
//! cannot be created or written leaves the memory cache working and is not an error.
//!
//! The directory is `$DOTCOMPUTE_CACHE_DIR/cuda`, else `$XDG_CACHE_HOME/dotcompute/cuda`,
//! else `~/.cache/dotcompute/cuda`; `DOTCOMPUTE_CACHE=off` disables the disk cache.

use crate::driver::BACKEND;
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use dotcompute_hal::disk::{decode_entry, encode_entry, write_atomically};
use dotcompute_hal::Error;
use sha2::{Digest, Sha256};
use std::ffi::CString;
use std::path::PathBuf;

/// The kind of the disk cache's entries ([`dotcompute_hal::disk`]).
const MAGIC: &[u8; 8] = b"DCCUBIN1";

/// Where a compiled module came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Already loaded in this backend.
    Memory,
    /// Read from the disk cache.
    Disk,
    /// Compiled by NVRTC now.
    Compiled,
}

/// Counters of the compile cache, since the backend was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub nvrtc_compiles: u64,
    /// Disk entries that were damaged (or unloadable) and were recompiled.
    pub corrupt_entries: u64,
}

/// Compiles CUDA C++ for one device, through the disk cache.
pub(crate) struct Compiler {
    /// Options for generated kernels: `--fmad=false`, because the IR promises correctly
    /// rounded `+ - *` and a contracted `a * b + c` rounds once.
    generated_options: Vec<String>,
    /// Options for hand-written kernels: NVRTC's defaults (contraction on, as with nvcc).
    raw_options: Vec<String>,
    /// Everything in the key except the source.
    key_prefix: Vec<u8>,
    dir: Option<PathBuf>,
}

/// The NVRTC version as (major, minor).
pub(crate) fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    let _ = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

/// The disk cache directory the environment selects, if any (`Error::Config` for a
/// `DOTCOMPUTE_CACHE` value that is not an on/off word).
pub fn cache_dir() -> dotcompute_hal::Result<Option<PathBuf>> {
    dotcompute_hal::settings::cache_dir("cuda")
}

impl Compiler {
    pub(crate) fn new(
        compute_capability: (i32, i32),
        driver_version: i32,
    ) -> dotcompute_hal::Result<Compiler> {
        let (major, minor) = compute_capability;
        let raw_options = vec![
            format!("--gpu-architecture=sm_{major}{minor}"),
            "--std=c++17".to_string(),
        ];
        let mut generated_options = raw_options.clone();
        generated_options.push("--fmad=false".to_string());
        // Generated code's warnings are ours, not the user's (the C-family prelude
        // declares helpers a kernel may not use): silenced, so that a compile error is
        // not the last of a long log.
        generated_options.push("--disable-warnings".to_string());
        let (nv_major, nv_minor) = nvrtc_version();
        let key_prefix = format!(
            "dotcompute-cuda-cache/1 codegen={} cc={major}.{minor} driver={driver_version} nvrtc={nv_major}.{nv_minor}\n",
            dotcompute_codegen::CODEGEN_VERSION,
        )
        .into_bytes();
        let dir = cache_dir()?.filter(|d| std::fs::create_dir_all(d).is_ok());
        Ok(Compiler {
            generated_options,
            raw_options,
            key_prefix,
            dir,
        })
    }

    fn options(&self, raw: bool) -> &[String] {
        if raw {
            &self.raw_options
        } else {
            &self.generated_options
        }
    }

    /// The cache key of `source` compiled as a generated (`raw == false`) or hand-written
    /// kernel.
    pub(crate) fn key(&self, source: &str, raw: bool) -> String {
        let mut h = Sha256::new();
        h.update(&self.key_prefix);
        h.update(self.options(raw).join(" ").as_bytes());
        h.update(b"\n");
        h.update(source.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn entry_path(&self, key: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{key}.cubin")))
    }

    /// The cached CUBIN for `key`, if a sound entry exists.
    pub(crate) fn read_disk(&self, key: &str, stats: &mut CompileStats) -> Option<Vec<u8>> {
        let path = self.entry_path(key)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode_entry(MAGIC, &bytes) {
            Ok(payload) => Some(payload.to_vec()),
            Err(why) => {
                stats.corrupt_entries += 1;
                tracing::warn!(path = %path.display(), "compile cache entry ignored and rebuilt: {why}");
                None
            }
        }
    }

    /// Stores a CUBIN under `key` (best effort: a failure only costs a later recompile).
    pub(crate) fn write_disk(&self, key: &str, cubin: &[u8]) {
        let Some(path) = self.entry_path(key) else {
            return;
        };
        if let Err(e) = write_atomically(&path, &encode_entry(MAGIC, cubin)) {
            tracing::warn!(path = %path.display(), "could not write the compile cache: {e}");
        }
    }

    /// Runs NVRTC. A compile error quotes the source lines it points at.
    pub(crate) fn nvrtc(&self, kernel: &str, source: &str, raw: bool) -> Result<Vec<u8>, Error> {
        let compile_error = |log: String| Error::Compile {
            kernel: kernel.into(),
            backend: BACKEND.into(),
            log,
        };
        let file = format!("{kernel}.cu");
        let src = CString::new(source)
            .map_err(|_| compile_error("the source contains a NUL byte".into()))?;
        let name = CString::new(file.clone()).unwrap_or_else(|_| c"kernel.cu".into());
        let prog = nvrtc::create_program(&src, Some(&name))
            .map_err(|e| compile_error(format!("nvrtcCreateProgram failed: {e}")))?;
        // SAFETY: prog is a live program until destroy_program below.
        let result = unsafe {
            let compiled = nvrtc::compile_program(prog, self.options(raw));
            let log = nvrtc::get_program_log(prog)
                .map(|chars| {
                    let bytes: Vec<u8> = chars
                        .iter()
                        .map(|&c| c as u8)
                        .take_while(|&b| b != 0)
                        .collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                })
                .unwrap_or_default();
            match compiled {
                Err(e) => Err(compile_error(annotate(&log, source, &file, e.to_string()))),
                Ok(()) => cubin(prog).map_err(|e| compile_error(format!("nvrtcGetCUBIN: {e}"))),
            }
        };
        // SAFETY: destroyed once.
        let _ = unsafe { nvrtc::destroy_program(prog) };
        result
    }
}

/// Reads the CUBIN of a compiled program.
///
/// # Safety
///
/// `prog` is a live NVRTC program that compiled successfully.
unsafe fn cubin(prog: nvrtc_sys::nvrtcProgram) -> Result<Vec<u8>, nvrtc::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is live and compiled (the caller's contract); `size` is writable.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds the `size` bytes the program's CUBIN has.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) }.result()?;
    Ok(buf)
}

/// Each error with its source line and two lines of context, first, then the whole
/// compiler log (or the status, when the log is empty). NVRTC reports errors as
/// `<file>(<line>): error: ...`.
pub fn annotate(log: &str, source: &str, file: &str, status: String) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = String::new();
    let prefix = format!("{file}(");
    let mut shown = 0;
    for l in log.lines() {
        let Some(rest) = l.strip_prefix(&prefix) else {
            continue;
        };
        let Some((num, msg)) = rest.split_once("): ") else {
            continue;
        };
        let (Ok(line), true) = (num.parse::<usize>(), msg.starts_with("error")) else {
            continue;
        };
        if shown == 5 || line == 0 || line > lines.len() {
            continue;
        }
        shown += 1;
        out.push_str(&format!("\n--> {file}:{line}: {msg}\n"));
        for n in line.saturating_sub(2).max(1)..=(line + 2).min(lines.len()) {
            let mark = if n == line { ">" } else { " " };
            out.push_str(&format!("{mark}{n:>5} | {}\n", lines[n - 1]));
        }
    }
    if log.trim().is_empty() {
        out.push_str(&format!("\n{status}\n"));
    } else {
        out.push_str(&format!("\n--- compiler log ---\n{}\n", log.trim_end()));
    }
    out.trim_start().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_errors_quote_the_source_line() {
        let source = "line one\nline two\nint x = y;\nline four\nline five\nline six\n";
        let log = "k.cu(3): error: identifier \"y\" is undefined\n\n1 error detected";
        let text = annotate(log, source, "k.cu", String::new());
        assert!(text.contains("--> k.cu:3: error: identifier \"y\" is undefined"));
        assert!(text.contains(">    3 | int x = y;"), "{text}");
        assert!(text.contains("     1 | line one"));
        assert!(text.contains("     5 | line five"));
        assert!(!text.contains("line six"));
    }

    /// Issue 27, item 7: the error comes first, not after the log's warnings.
    #[test]
    fn the_error_comes_before_a_long_log_of_warnings() {
        let source = (1..=300).map(|i| format!("line {i}\n")).collect::<String>();
        let mut log: String = (1..=187)
            .map(|i| format!("k.cu({i}): warning #177-D: variable \"v{i}\" was declared but never referenced\n"))
            .collect();
        log.push_str("k.cu(250): error: expected a \";\"\n\n1 error detected");
        let text = annotate(&log, &source, "k.cu", String::new());
        let first = text.lines().next().unwrap();
        assert_eq!(first, "--> k.cu:250: error: expected a \";\"", "{text}");
        assert!(
            text.contains("> 250 | line 250") || text.contains(">  250 | line 250"),
            "{text}"
        );
        // The whole log still follows.
        assert!(
            text.contains("--- compiler log ---") && text.contains("v187"),
            "{text}"
        );
    }
}
