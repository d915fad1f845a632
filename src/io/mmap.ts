/**
 * Private (copy-on-write) file mappings: the bytes of a file as a Uint8Array whose pages are read
 * from disk when first touched, and whose writes go to private copies of the pages, never to the
 * file (mmap(2) MAP_PRIVATE). A model whose parameters view such a mapping can be trained in
 * place without changing its checkpoint.
 *
 * Under Bun, `Bun.mmap(path, { shared: false })` (src/runtime/files.ts `mmapFile`) maps with
 * MAP_PRIVATE and PROT_READ|PROT_WRITE, but opens the file O_RDWR, so it fails (EACCES) on a file
 * the process may read but not write: a read-only Hugging Face cache, a read-only mount, another
 * user's files. Private writable mappings need only read access, so for those the file is mapped
 * here through libc's mmap (an O_RDONLY descriptor, PROT_READ|PROT_WRITE, MAP_PRIVATE) with the
 * runtime's FFI, and the ArrayBuffer's finalizer unmaps it: the runtime calls the deallocator as
 * (bytes, context) with context = the length, which is munmap(addr, length).
 * Under Deno (whose FFI cannot attach a finalizer to an ArrayBuffer: `ffi().adopts` is false) and
 * in a browser nothing is mapped: the callers read the file instead.
 * Source: mmap(2) (MAP_PRIVATE: "updates to the mapping are not carried through to the
 * underlying file"; EACCES only for MAP_SHARED with PROT_WRITE on a descriptor not open for
 * writing); JavaScriptCore JSTypedArrayBytesDeallocator.
 */
import { ffi, type Ffi } from "../runtime/ffi.ts";
import { mmapFile } from "../runtime/files.ts";

const PROT_READ_WRITE = 3; // PROT_READ | PROT_WRITE, the same on Linux and macOS
const MAP_PRIVATE = 2; // Linux and macOS

const LIBC_SYMBOLS = {
  // (addr, length, prot, flags, fd, offset) -> addr or MAP_FAILED ((void *) -1)
  mmap: { args: ["ptr", "u64", "i32", "i32", "i32", "i64"], returns: "ptr" },
  munmap: { args: ["ptr", "u64"], returns: "i32" },
} as const;

interface Libc {
  ffi: Ffi;
  mmap(addr: null, length: number, prot: number, flags: number, fd: number, offset: number): number | null;
  munmap(addr: number, length: number): number;
  munmap_ptr: number;
}

let libc: Libc | null | undefined;

// libc's mmap and munmap through the runtime's FFI, or null where that is unavailable (another
// OS, no FFI, or an FFI that cannot unmap on collection: the mapping would leak).
function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  const f = ffi();
  if (f === null || !f.adopts) return libc;
  const name = process.platform === "linux" ? "libc.so.6" : process.platform === "darwin" ? "libSystem.B.dylib" : null;
  if (name === null) return libc;
  try {
    const lib = f.dlopen(name, LIBC_SYMBOLS);
    const munmap_ptr = lib.address("munmap");
    if (!munmap_ptr) return libc;
    libc = { ffi: f, mmap: lib.symbols.mmap, munmap: lib.symbols.munmap, munmap_ptr };
  } catch {
    libc = null;
  }
  return libc;
}

/**
 * Maps the whole of regular file `path` privately, or returns null when it cannot be mapped (no
 * mmap support, a filesystem that refuses it); the caller then reads it. Writes to the returned
 * bytes never reach the file. The mapping lives as long as any view of its buffer.
 * @param fd - `path` opened for reading and checked to be a regular file (the fallback maps this
 *   descriptor, so a file swapped in after the check is never mapped)
 * @param size - its size in bytes (fstat of fd); a mapping of another length is discarded
 */
export function map_private(path: string, fd: number, size: number): Uint8Array | null {
  if (size <= 0) return null;
  // null on EACCES for a file this process may not write (Bun opens it O_RDWR): mapped from fd below
  const m = mmapFile(path);
  if (m !== null && m.length === size) return m;
  return map_fd_private(fd, size);
}

/**
 * Maps `size` bytes of open descriptor `fd` (read access suffices) privately through libc's mmap;
 * null where libc cannot be reached through the runtime's FFI (or it cannot unmap on collection:
 * Deno) or mmap fails. The ArrayBuffer's finalizer unmaps it.
 */
export function map_fd_private(fd: number, size: number): Uint8Array | null {
  const c = size > 0 ? loadLibc() : null;
  if (c === null) return null;
  const addr = c.mmap(null, size, PROT_READ_WRITE, MAP_PRIVATE, fd, 0);
  // MAP_FAILED is (void *) -1 = 2^64 - 1, far above any address a number holds exactly
  if (addr === null || !Number.isSafeInteger(addr)) return null;
  // the deallocator is called as (bytes, context) = munmap(addr, size)
  const ab = c.ffi.adopt(addr, size, c.munmap_ptr, size);
  if (ab === null) {
    c.munmap(addr, size);
    return null;
  }
  return new Uint8Array(ab);
}
