//! A persistent pipeline cache (wgpu's `PIPELINE_CACHE`, Vulkan only): what the driver
//! built for every pipeline is kept in one file per adapter and driver, so a later
//! process builds the same pipelines from it instead of compiling again.
//!
//! Why: some drivers keep no cache of their own, and a pipeline can take seconds to
//! build (the register-blocked product: 1.4 s on NVIDIA's compiler cold).
//!
//! The file is `<cache dir>/wgpu/<adapter key>-<driver hash>.bin` (the cache dir of
//! `dotcompute_hal::settings::cache_dir`; `DOTCOMPUTE_CACHE=off` turns it off), written
//! as a checksummed entry ([`dotcompute_hal::disk`]) atomically after each new pipeline.
//! A damaged, truncated or foreign file is ignored (and replaced by the next save); wgpu
//! then also checks the data's own header against the adapter and driver version.

use dotcompute_hal::disk::{decode_entry, encode_entry, write_atomically};
use std::path::PathBuf;
use std::sync::Mutex;

/// The kind of the file's entry.
const MAGIC: &[u8; 8] = b"DCWGPUPC";

/// What was found on disk when the cache was opened (for tests and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No file yet.
    Nothing,
    /// A sound entry, handed to wgpu.
    Entry,
    /// A file that was not a sound entry, ignored.
    Damaged,
}

pub(crate) struct PipelineCacheFile {
    pub(crate) cache: wgpu::PipelineCache,
    path: PathBuf,
    pub(crate) loaded: Loaded,
    /// Length of the data last written (a save with no new data is skipped).
    saved_len: Mutex<usize>,
}

/// Whether a device of `adapter` can keep a pipeline cache, and where: `None` when the
/// adapter lacks `PIPELINE_CACHE` (non-Vulkan) or caching is off (`Error::Config` for a
/// `DOTCOMPUTE_CACHE` value that is not an on/off word).
pub(crate) fn path_for(adapter: &wgpu::Adapter) -> dotcompute_hal::Result<Option<PathBuf>> {
    use sha2::{Digest, Sha256};
    let Some(dir) = dotcompute_hal::settings::cache_dir("wgpu")? else {
        return Ok(None);
    };
    if !adapter.features().contains(wgpu::Features::PIPELINE_CACHE) {
        return Ok(None);
    }
    let info = adapter.get_info();
    let Some(key) = wgpu::util::pipeline_cache_key(&info) else {
        return Ok(None);
    };
    // A driver update starts a new file (wgpu would also refuse the old data).
    let driver = Sha256::digest(format!("{}\n{}", info.driver, info.driver_info).as_bytes());
    let driver: String = driver[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(Some(dir.join(format!("{key}-{driver}.bin"))))
}

impl PipelineCacheFile {
    /// Opens the cache of a device created with `PIPELINE_CACHE`, from the file at `path`
    /// if it holds a sound entry.
    pub(crate) fn open(device: &wgpu::Device, path: PathBuf) -> PipelineCacheFile {
        let bytes = std::fs::read(&path).ok();
        let (data, loaded) = match bytes.as_deref().map(|b| decode_entry(MAGIC, b)) {
            None => (None, Loaded::Nothing),
            Some(Ok(payload)) => (Some(payload), Loaded::Entry),
            Some(Err(_)) => (None, Loaded::Damaged),
        };
        // SAFETY: `data` is what `PipelineCache::get_data` returned for an adapter with
        // the same cache key and driver (the file name holds both), and its checksum
        // shows it arrived whole; wgpu checks its own header again (`fallback`: data it
        // cannot use leaves an empty cache instead of an error).
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("dotcompute pipeline cache"),
                data,
                fallback: true,
            })
        };
        let saved_len = Mutex::new(if loaded == Loaded::Entry {
            data.map_or(0, <[u8]>::len)
        } else {
            0
        });
        PipelineCacheFile {
            cache,
            path,
            loaded,
            saved_len,
        }
    }

    /// Writes the cache's data when it grew (best effort: a failure only costs a later
    /// build).
    pub(crate) fn save(&self) {
        let Some(data) = self.cache.get_data() else {
            return;
        };
        let mut saved = self.saved_len.lock().unwrap_or_else(|p| p.into_inner());
        if data.len() == *saved {
            return;
        }
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if write_atomically(&self.path, &encode_entry(MAGIC, &data)).is_ok() {
            *saved = data.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WGSL: &str = "
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&out)) { out[id.x] = id.x * 3u + 1u; }
}";

    /// A device with `PIPELINE_CACHE` on the first adapter that has it; `None` (skipping)
    /// where none does, unless `DOTCOMPUTE_REQUIRE` lists wgpu.
    fn device() -> Option<wgpu::Device> {
        let adapter = crate::adapters()
            .into_iter()
            .find(|a| a.features().contains(wgpu::Features::PIPELINE_CACHE));
        let Some(adapter) = adapter else {
            let required = dotcompute_hal::settings::backends("DOTCOMPUTE_REQUIRE")
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !required.contains(&dotcompute_hal::BackendKind::Wgpu),
                "no wgpu adapter with a pipeline cache"
            );
            eprintln!("skipping: no adapter with a pipeline cache");
            return None;
        };
        let (device, _queue) =
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                required_features: wgpu::Features::PIPELINE_CACHE,
                ..Default::default()
            }))
            .unwrap();
        Some(device)
    }

    /// Builds the test pipeline with `file`'s cache; whether wgpu reported no error.
    fn build(device: &wgpu::Device, file: &PipelineCacheFile) -> bool {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(WGSL.into()),
        });
        let _pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: Some(&file.cache),
        });
        file.save();
        pollster::block_on(scope.pop()).is_none()
    }

    #[test]
    fn the_cache_file_is_reused_and_damage_is_ignored_and_replaced() {
        let Some(device) = device() else { return };
        let dir = std::env::temp_dir().join(format!("dc-pcache-{}", std::process::id()));
        let path = dir.join("cache.bin");
        let _ = std::fs::remove_dir_all(&dir);
        let sound = |path: &PathBuf| {
            let bytes = std::fs::read(path).expect("the cache file was written");
            decode_entry(MAGIC, &bytes).is_ok_and(|p| !p.is_empty())
        };

        let first = PipelineCacheFile::open(&device, path.clone());
        assert_eq!(first.loaded, Loaded::Nothing);
        assert!(build(&device, &first));
        assert!(sound(&path), "a sound entry after the first build");

        let second = PipelineCacheFile::open(&device, path.clone());
        assert_eq!(second.loaded, Loaded::Entry);
        assert!(build(&device, &second));

        // One flipped byte in the payload, then garbage, then a truncated file: each is
        // ignored, pipelines still build, and the next save replaces the file.
        let mut flipped = std::fs::read(&path).unwrap();
        *flipped.last_mut().unwrap() ^= 0x40;
        let truncated = flipped[..flipped.len() / 2].to_vec();
        for damaged in [flipped, b"not a cache".to_vec(), truncated] {
            std::fs::write(&path, &damaged).unwrap();
            let file = PipelineCacheFile::open(&device, path.clone());
            assert_eq!(file.loaded, Loaded::Damaged);
            assert!(build(&device, &file));
            assert!(sound(&path), "the damaged file was replaced");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
