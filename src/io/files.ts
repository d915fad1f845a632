/**
 * Opening the files of an untrusted checkpoint directory.
 *
 * - Only regular files are read. A FIFO named `model.safetensors` would block `open()` until some
 *   other process writes to it, and a directory fails with a bare EISDIR; both get a
 *   LoomFormatError naming the path and what it is. The file is opened with O_NONBLOCK (which a
 *   FIFO honours and a regular file ignores) and checked with fstat on the open descriptor, so
 *   it cannot be swapped between the check and the read.
 * - A file reached through symlinks must resolve (realpath) inside the checkpoint directory, or,
 *   when the directory is a Hugging Face cache snapshot, inside that repository's `blobs/` folder:
 *   huggingface_hub stores `models--org--name/snapshots/<rev>/<file>` as a relative link to
 *   `models--org--name/blobs/<sha>`. Anything else is refused, including links to other places of
 *   the same `models--*` folder (refs/, another snapshot) and to another repository's blobs.
 * - `resolve_pretrained_dir` turns a `models--org--name` folder into its snapshot for a revision
 *   (`refs/main` holds the commit hash naming `snapshots/<hash>/`).
 * Source: huggingface_hub file_download.py (_create_symlink, the "models--{org}--{name}"
 * repo folder name, "snapshots", "blobs" and "refs/{revision}"); open(2) O_NONBLOCK on FIFOs.
 */
import { type Stats, closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readSync, realpathSync, statSync } from "node:fs";
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
  const inside = (folder: string) => real.startsWith(folder.endsWith(sep) ? folder : folder + sep);
  if (!inside(root)) {
    const where = isHubRepo(root) ? `the Hugging Face cache folder ${root}` : `the checkpoint directory ${root}`;
    throw fail(`resolves to ${real}, outside ${where}`);
  }
  // in a cache repository, only the snapshot's own files and the repository's blobs are checkpoint data
  if (isHubRepo(root) && !inside(join(root, "blobs")) && !inside(realpathSync(dir))) {
    throw fail(`resolves to ${real}, inside the Hugging Face cache folder ${root} but outside its blobs/ and the snapshot ${realpathSync(dir)}`);
  }
  return full;
}

function isHubRepo(root: string): boolean {
  return basename(root).startsWith("models--");
}

/** Largest refs/<revision> file read, in bytes (it holds one commit hash). */
const MAX_REF_SIZE = 1024;
// One path segment: a commit hash, a branch or tag name as huggingface_hub stores it under refs/.
const SAFE_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]+$/;

/**
 * The checkpoint directory to load for `dir`: `dir` itself, or, when `dir` is a Hugging Face
 * cache repository folder (`models--org--name`, holding `snapshots/`), its snapshot for
 * `revision`: `snapshots/<revision>` when that exists (a commit hash), else
 * `snapshots/<contents of refs/<revision>>` (huggingface_hub writes the commit hash of a branch
 * such as "main" there). Plain directories and snapshot directories are returned unchanged.
 * @param revision - branch, tag or commit hash (default "main")
 * @throws LoomFormatError naming the folder for a missing or unreadable ref, a ref that is not a
 *   single path segment, or a snapshot that is not there
 */
export function resolve_pretrained_dir(dir: string, revision = "main"): string {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return dir; // a missing directory is reported by whoever reads it
  }
  if (!isHubRepo(real) || !existsSync(join(real, "snapshots"))) return dir;
  const fail: FileError = (reason) => new LoomFormatError(`[from_pretrained] ${dir}: ${reason}`);
  if (!SAFE_SEGMENT.test(revision)) throw fail(`revision ${JSON.stringify(revision)} is not a branch, tag or commit name`);
  const direct = join(real, "snapshots", revision);
  if (existsSync(direct)) return direct;
  const refPath = join(real, "refs", revision);
  const ref = resolveCheckpointFile(real, join("refs", revision), fail, real);
  if (ref === null) throw fail(`a Hugging Face cache folder without refs/${revision} or snapshots/${revision} (revision ${JSON.stringify(revision)} was never downloaded)`);
  const hash = new TextDecoder().decode(readRegularFile(ref, (reason) => fail(`refs/${revision} ${reason}`), MAX_REF_SIZE)).trim();
  if (!SAFE_SEGMENT.test(hash)) throw fail(`${refPath} holds ${JSON.stringify(hash.slice(0, 80))}, not a commit hash`);
  const snapshot = join(real, "snapshots", hash);
  if (!existsSync(snapshot)) throw fail(`refs/${revision} names snapshot ${hash}, which is not in ${join(real, "snapshots")}`);
  return snapshot;
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
