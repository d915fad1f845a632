/**
 * Opening the files of an untrusted checkpoint directory.
 *
 * - Only regular files are read. A FIFO named `model.safetensors` would block `open()` until some
 *   other process writes to it, and a directory fails with a bare EISDIR; both get a
 *   LoomFormatError naming the path and what it is. The file is opened with O_NONBLOCK (which a
 *   FIFO honours and a regular file ignores) and checked with fstat on the open descriptor, so
 *   it cannot be swapped between the check and the read.
 * - A file reached through symlinks must resolve (realpath) inside the checkpoint directory, or,
 *   when the directory is a Hugging Face cache snapshot, inside that repository's cache folder:
 *   huggingface_hub stores `models--org--name/snapshots/<rev>/<file>` as a relative link to
 *   `models--org--name/blobs/<sha>`. Anything else that escapes is refused.
 * Source: huggingface_hub file_download.py (_create_symlink, the "models--{org}--{name}"
 * repo folder name, "snapshots" and "blobs"); open(2) O_NONBLOCK on FIFOs.
 */
import { type Stats, closeSync, constants, fstatSync, lstatSync, openSync, readSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, join, resolve, sep } from "node:path";
import { LoomFormatError } from "../tensor/errors.ts";

/** What a non-regular file is, for messages: "a directory", "a FIFO (named pipe)"... */
export function fileKind(st: Stats): string {
  if (st.isFile()) return "a regular file";
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO (named pipe)";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  return "not a regular file";
}

/** Builds the error for a refused file from the reason ("is a directory, expected a regular file"). */
export type FileError = (reason: string) => Error;

/**
 * Opens `path` for reading if it is a regular file (symlinks followed).
 * @returns the descriptor (the caller closes it) and the file size in bytes
 * @throws the error `fail` builds if `path` is a directory, FIFO, socket or device; fs errors
 *   (ENOENT, EACCES...) as thrown by node:fs
 */
export function openRegularFile(path: string, fail: FileError): { fd: number; size: number } {
  const before = statSync(path);
  if (!before.isFile()) throw fail(`is ${fileKind(before)}, expected a regular file`);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    throw fail(`is ${fileKind(st)}, expected a regular file`);
  }
  return { fd, size: st.size };
}

/** Up to `length` bytes from `position` (fewer only at the end of the file). */
export function readAt(fd: number, position: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const got = readSync(fd, out, done, length - done, position + done);
    if (got <= 0) break;
    done += got;
  }
  return done === length ? out : out.subarray(0, done);
}

/**
 * The whole of a regular file.
 * @param max_bytes - refuse larger files (default: no limit)
 * @throws the error `fail` builds for a non-regular file or one over max_bytes
 */
export function readRegularFile(path: string, fail: FileError, max_bytes = Infinity): Uint8Array {
  const { fd, size } = openRegularFile(path, fail);
  try {
    if (size > max_bytes) throw fail(`${size} bytes exceeds the maximum of ${max_bytes}`);
    return readAt(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}

/**
 * The folder every file of checkpoint directory `dir` must resolve into: realpath(dir), or the
 * `models--*` folder when realpath(dir) lies in its `snapshots/<rev>/`.
 */
export function checkpointRoot(dir: string): string {
  const real = realpathSync(dir);
  const parts = real.split(sep);
  for (let i = parts.length - 3; i >= 0; i--) {
    if (parts[i]!.startsWith("models--") && parts[i + 1] === "snapshots") return parts.slice(0, i + 1).join(sep) || sep;
  }
  return real;
}

/**
 * Resolves file `name` of checkpoint directory `dir`, following symlinks.
 * @param root - checkpointRoot(dir), when the caller has it
 * @returns join(dir, name), or null when there is no such file (nor a link by that name)
 * @throws the error `fail` builds if `name` is a link whose target does not exist, or if the
 *   file resolves outside `root` (see module doc)
 */
export function resolveCheckpointFile(dir: string, name: string, fail: FileError, root?: string): string | null {
  const full = resolve(dir, name);
  let real: string;
  try {
    real = realpathSync(full);
  } catch {
    let link = false;
    try {
      link = lstatSync(full).isSymbolicLink();
    } catch {
      return null;
    }
    if (link) throw fail("is a symbolic link whose target does not exist (an incomplete download?)");
    return null;
  }
  root ??= checkpointRoot(dir); // after the file is known to exist, so a missing dir reads as a missing file
  if (!real.startsWith(root.endsWith(sep) ? root : root + sep)) {
    const where = basename(root).startsWith("models--") ? `the Hugging Face cache folder ${root}` : `the checkpoint directory ${root}`;
    throw fail(`resolves to ${real}, outside ${where}`);
  }
  return full;
}

/**
 * Resolves `name` in `dir` (see resolveCheckpointFile) and reads it if it is a regular file.
 * @returns the bytes, or null if there is no such file
 * @throws LoomFormatError `<tag> <path>: <reason>` for a dangling link, a link escaping the
 *   directory, a directory, FIFO or device, or a file over max_bytes
 */
export function readCheckpointFile(dir: string, name: string, tag: string, max_bytes = Infinity): Uint8Array | null {
  const fail: FileError = (reason) => new LoomFormatError(`${tag} ${join(dir, name)}: ${reason}`);
  const path = resolveCheckpointFile(dir, name, fail);
  return path === null ? null : readRegularFile(path, fail, max_bytes);
}

/**
 * Loom's per-user cache folder (generated kernels, the kernel database): `$LOOM_CACHE_DIR`, else
 * `$XDG_CACHE_HOME/loom`, else `~/.cache/loom` (the XDG base directory convention). Not created here.
 */
export function loomCacheDir(): string {
  return process.env.LOOM_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "loom");
}
