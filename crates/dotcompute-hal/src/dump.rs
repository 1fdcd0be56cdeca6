//! `DOTCOMPUTE_DUMP=<dir>`: every backend writes each source it compiles (generated or
//! hand-written) into that directory as it compiles it, so a user can read exactly what a
//! driver was given for their own kernel (issue 31). Files are named
//! `<kernel>.<content key, 16 hex digits>[.<variant>].<ext>`: the kernel's name with its
//! generic instance (`scale::<f32, 4>` becomes `scale-f32-4`), the program's content key
//! (the same key the compile caches use), and the variant the launch asked for (checked
//! mode, group size, form). Each file starts with a comment naming the kernel, the
//! instance, the whole key and the variant. An unusable directory is `Error::Config`
//! naming the variable, at the compile that needed it.

use crate::error::{Error, Result};
use crate::program::Program;
use std::path::PathBuf;

/// The variable naming the directory.
pub const DUMP_VARIABLE: &str = "DOTCOMPUTE_DUMP";

/// The directory to dump into, or `None` when the variable is unset or empty.
pub fn dump_dir() -> Option<PathBuf> {
    crate::settings::Config::get().path(DUMP_VARIABLE)
}

/// A kernel name as a file name: letters, digits and `_` kept, every other run of
/// characters one `-` (`scale::<f32, 4>` is `scale-f32-4`).
pub fn file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut gap = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            if gap && !out.is_empty() {
                out.push('-');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    if out.is_empty() {
        out.push_str("kernel");
    }
    out
}

/// Writes `text`, the source of `program` in the language of extension `ext` (`cu`,
/// `wgsl`, `metal`), when `DOTCOMPUTE_DUMP` is set; `variant` tells apart the sources of
/// one program (empty for the plain one). `comment` starts a line comment in that
/// language. Returns the path written.
pub fn dump_source(
    program: &Program,
    variant: &str,
    ext: &str,
    comment: &str,
    text: &str,
) -> Result<Option<PathBuf>> {
    let Some(dir) = dump_dir() else {
        return Ok(None);
    };
    let key = program.key.hex();
    let mut file = format!("{}.{}", file_stem(program.name()), &key[..16]);
    if !variant.is_empty() {
        file.push('.');
        file.push_str(&file_stem(variant));
    }
    file.push('.');
    file.push_str(ext);
    let path = dir.join(file);
    let header = format!(
        "{comment} dotcompute: kernel `{}`, content key {key}{}{}\n",
        program.name(),
        if variant.is_empty() { "" } else { ", variant " },
        variant
    );
    let failed = |e: std::io::Error| Error::Config {
        variable: DUMP_VARIABLE,
        value: format!("{} ({}: {e})", dir.display(), path.display()),
        expected: "a directory that exists or can be created, and can be written",
    };
    std::fs::create_dir_all(&dir).map_err(failed)?;
    std::fs::write(&path, format!("{header}{text}")).map_err(failed)?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn file_stems_keep_the_instance_readable() {
        assert_eq!(file_stem("scale::<f32, 4>"), "scale-f32-4");
        assert_eq!(file_stem("vector_add"), "vector_add");
        assert_eq!(file_stem("::<>"), "kernel");
        assert_eq!(file_stem("a/../b"), "a-b");
    }
}
