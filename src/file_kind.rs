//! What a path that is not a regular file is, in words ("a fifo", "a device"), for the errors
//! that refuse it before reading: a fifo blocks its reader and `/dev/zero` never ends, so spec
//! inputs and source files are checked by kind first. One wording for every such message.

/// `meta`'s kind when it is not a regular file: a folder, a fifo, a device, a socket.
pub fn describe(meta: &std::fs::Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a fifo";
        }
        if ty.is_char_device() || ty.is_block_device() {
            return "a device";
        }
        if ty.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}
